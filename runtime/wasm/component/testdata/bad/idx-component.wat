(component
  (component)
  (instance (instantiate 1)))
