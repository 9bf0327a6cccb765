(component
  (core instance (export "t" (table 0))))
