(component
  (type (list u8))
  (type (own 0)))
