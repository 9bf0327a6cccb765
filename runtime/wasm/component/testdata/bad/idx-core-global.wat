(component
  (core instance (export "g" (global 2))))
