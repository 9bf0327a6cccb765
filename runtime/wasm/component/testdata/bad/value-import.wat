(component
  (import "v" (value string)))
