(component
  (core module (import "env" "f" (func)))
  (core instance (instantiate 0)))
