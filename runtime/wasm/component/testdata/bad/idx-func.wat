(component
  (core func (canon lower (func 3))))
