(component
  (type (func))
  (func (type 0) (canon lift (core func 5))))
