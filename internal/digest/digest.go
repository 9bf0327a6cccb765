// Package digest is the one spelling of a sha256 the project writes and checks: 64
// lowercase hex characters, as locks, registries, the artifact cache and runtime pins
// keep it.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// Hex returns the sha256 of b in 64 lowercase hex characters.
func Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Valid reports whether s is a sha256 as Hex writes it.
func Valid(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
