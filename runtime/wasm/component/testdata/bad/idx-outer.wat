(component
  (type (instance (alias outer 1 9 (type)))))
