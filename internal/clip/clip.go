// Package clip shortens untrusted text for error messages and logs without splitting a
// UTF-8 sequence.
package clip

import "unicode/utf8"

// String returns s cut to at most n bytes on a rune boundary, with "…" added when it was
// cut.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n, 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
