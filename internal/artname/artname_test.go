package artname

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want bool
	}{
		{"a", true}, {"word-count-2", true}, {strings.Repeat("a", 100), true},
		{"", false}, {"-a", false}, {"a-", false}, {"A", false}, {"a_b", false}, {"a/b", false}, {strings.Repeat("a", 101), false},
	} {
		if got := Valid(tt.s); got != tt.want {
			t.Errorf("Valid(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}
