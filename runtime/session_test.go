package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNewLayout(t *testing.T) {
	root := t.TempDir()
	// ses_x is the capsule's first session (its folder is made too), ses_z a later one.
	for _, id := range []string{"ses_x", "ses_z"} {
		if _, err := NewLayout(root, "hello", id, "", false); err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			dir  string
			made bool
		}{
			{"work/out", true},
			{"work/logs", false}, {"work/.capsule-home", false}, // the shell's: made when it needs them
			{"logs", false}, {"tools", false}, // host-only: made by their first file
		} {
			fi, err := os.Stat(filepath.Join(root, "hello", id, tt.dir))
			if made := err == nil && fi.IsDir(); made != tt.made {
				t.Errorf("%s %s: made %v, want %v (%v)", id, tt.dir, made, tt.made, err)
			}
		}
	}
	custom := filepath.Join(t.TempDir(), "mine")
	l, err := NewLayout(root, "hello", "ses_y", custom, false)
	if err != nil || l.Work != custom {
		t.Fatalf("workdir override: %v %+v", err, l)
	}
	for _, d := range []string{filepath.Join(custom, "out"), l.Root} {
		if _, err := os.Stat(d); err != nil {
			t.Error(err)
		}
	}
	if l.Trace != filepath.Join(root, "hello", "ses_y", "trace.jsonl") {
		t.Errorf("records not under work_root: %s", l.Trace)
	}
}

// TestCappedFileLazy checks that a guest log costs nothing until written: no folder, no
// file; the first non-empty write creates both, and the cap and tail still hold.
func TestCappedFileLazy(t *testing.T) {
	for _, tt := range []struct {
		name   string
		writes []string
		exists bool
		want   string
	}{
		{"never written", nil, false, ""},
		{"empty write", []string{""}, false, ""},
		{"written", []string{"a", "bc"}, true, "abc"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "logs", "g.stdout.log")
			c := &cappedFile{path: path, left: 2}
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("write %q: %d %v", w, n, err)
				}
			}
			c.close()
			data, err := os.ReadFile(path)
			if exists := err == nil; exists != tt.exists {
				t.Fatalf("file exists %v, want %v (%v)", exists, tt.exists, err)
			}
			if want := tt.want[:min(2, len(tt.want))]; string(data) != want {
				t.Errorf("file holds %q, want %q (capped at 2 bytes)", data, want)
			}
			if string(c.tail) != tt.want {
				t.Errorf("tail %q, want %q", c.tail, tt.want)
			}
		})
	}
}
