// Package artname is the one rule of capsule and artifact names, for the packages that
// check names without parsing manifests (the task stores) and for the manifest itself.
package artname

// MaxLen is the longest name.
const MaxLen = 100

// Valid reports whether s is a capsule or artifact name: [a-z0-9-], 1–100 characters,
// no leading or trailing '-'.
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
