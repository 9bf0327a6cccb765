(component
  (type (instance (export "x" (type (sub resource)))))
  (import "i" (instance (type 0)))
  (alias export 0 "y" (type)))
