package process

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestClip: a cut never splits a UTF-8 sequence (the host refuses invalid UTF-8), and a
// string within the bound is kept whole.
func TestClip(t *testing.T) {
	tests := []struct {
		name, s string
		n       int
		want    string
	}{
		{"within the bound", "héllo", 6, "héllo"},
		{"ASCII cut", "abcdef", 3, "abc…"},
		{"cut inside a two-byte rune", "aé", 2, "a…"},
		{"cut inside a four-byte rune", "ab😀", 4, "ab…"},
		{"cut after a whole rune", "é😀", 2, "é…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Clip(tt.s, tt.n)
			if got != tt.want || !utf8.ValidString(got) || len(strings.TrimSuffix(got, "…")) > tt.n {
				t.Errorf("Clip(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
			}
		})
	}
}
