(component
  (core module (func (export "f")))
  (core instance (instantiate 0))
  (alias core export 0 "f" (core func))
  (type (list u8))
  (func (type 0) (canon lift (core func 0))))
