(component
  (alias export 4 "f" (func)))
