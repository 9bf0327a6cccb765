package samefile

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestHolds(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789abcdef"), 10000) // several chunks and a partial one
	path := filepath.Join(dir, "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	other := bytes.Clone(data)
	other[len(other)-1] = 'x'
	for _, tt := range []struct {
		name string
		want []byte
		same bool
	}{
		{"same bytes", data, true},
		{"last byte differs", other, false},
		{"shorter", data[:len(data)-1], false},
		{"longer", append(bytes.Clone(data), 'x'), false},
		{"empty", nil, false},
	} {
		if got, err := Holds(path, tt.want); err != nil || got != tt.same {
			t.Errorf("%s: Holds = %v, %v; want %v", tt.name, got, err, tt.same)
		}
	}
	if _, err := Holds(filepath.Join(dir, "missing"), data); err == nil {
		t.Error("a missing file: no error")
	}
}
