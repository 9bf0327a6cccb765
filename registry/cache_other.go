//go:build !unix

package registry

// alive cannot tell here, so every pin file is honoured.
func alive(int) bool { return true }
