package jsontext

import (
	"encoding/json"
	"testing"
)

// TestAppendString writes every string as json.Marshal does, the fast path and the rest.
func TestAppendString(t *testing.T) {
	for _, s := range []string{"", "plain text", `quote " and \ backslash`, "tab\tnew\nline", "<b>&</b>", "é ü 日本", "\x00\x1f\x7f", "bad \xff utf-8", "\u2028 line sep"} {
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: %s, want %s", s, got[1:], want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("hello")
	f.Add("a\"b\\c<d>\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: %s, want %s", s, got, want)
		}
	})
}
