package registry

// Cache placeholder.
type Cache struct{}
