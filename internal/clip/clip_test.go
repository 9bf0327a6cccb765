package clip

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefghij…"},
		{"aaaaaaaaaü", 10, "aaaaaaaaa…"}, // ü is 2 bytes: not split
		{strings.Repeat("€", 5), 4, "€…"},
		{"abc", 0, "…"},
	} {
		got := String(tc.in, tc.n)
		if got != tc.want || !utf8.ValidString(got) {
			t.Errorf("String(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
