(component
  (core module (func (export "f") (param i64)))
  (core instance (instantiate 0))
  (alias core export 0 "f" (core func))
  (type (func (param "x" u32)))
  (func (type 0) (canon lift (core func 0))))
