(component
  (type (stream u8)))
