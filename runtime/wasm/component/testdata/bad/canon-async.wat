(component
  (core func (canon waitable-set.new)))
