(component
  (alias core export 3 "memory" (core memory)))
