(component
  (core module)
  (core instance (instantiate 2)))
