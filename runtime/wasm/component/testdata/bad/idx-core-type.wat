(component
  (import "m" (core module (type 4))))
