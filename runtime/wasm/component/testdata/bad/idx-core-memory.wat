(component
  (type (func (param "s" string)))
  (import "f" (func (type 0)))
  (core func (canon lower (func 0) (memory 3))))
