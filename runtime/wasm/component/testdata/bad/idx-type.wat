(component
  (type (list 7)))
