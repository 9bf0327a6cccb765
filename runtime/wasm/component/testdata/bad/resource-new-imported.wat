(component
  (import "r" (type (sub resource)))
  (core func (canon resource.new 0)))
