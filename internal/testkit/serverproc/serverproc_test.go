package serverproc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	full := write("full.log", "one\ntwo\nthree\n")
	empty := write("empty.log", "")
	missing := filepath.Join(dir, "missing.log")

	for _, tc := range []struct {
		name      string
		path      string
		from, max int64
		want      string
		prefix    bool // want is how the tail starts (an error's wording is the system's)
	}{
		{"whole", full, 0, 1 << 10, "server log " + full + " ends:\none\ntwo\nthree\n", false},
		{"from an offset", full, 4, 1 << 10, "server log " + full + " ends:\ntwo\nthree\n", false},
		{"at most max", full, 0, 6, "server log " + full + " ends:\nthree\n", false},
		{"max over from", full, 4, 6, "server log " + full + " ends:\nthree\n", false},
		{"nothing new", full, 14, 1 << 10, "(server log " + full + ": nothing new)\n", false},
		{"empty", empty, 0, 1 << 10, "(server log " + empty + ": nothing)\n", false},
		{"missing", missing, 0, 1 << 10, "(no server log: open " + missing, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := LogTail(tc.path, "server log", tc.from, tc.max)
			if tc.prefix && strings.HasPrefix(got, tc.want) && strings.HasSuffix(got, ")\n") {
				return
			}
			if got != tc.want {
				t.Fatalf("LogTail = %q, want %q", got, tc.want)
			}
		})
	}
}
