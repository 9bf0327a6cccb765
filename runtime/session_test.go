package runtime

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^ses_[0-9a-f]{12}7[0-9a-f]{3}[89ab][0-9a-f]{15}$`)
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 1000; i++ {
		id := NewID("ses_")
		if !re.MatchString(id) {
			t.Fatalf("id %q is not a ses_ UUIDv7", id)
		}
		if seen[id] {
			t.Fatalf("duplicate %s", id)
		}
		seen[id] = true
		if id[:16] < prev[:min(16, len(prev))] {
			t.Fatalf("ids not time-ordered: %s after %s", id, prev)
		}
		prev = id
	}
}

func TestNewLayout(t *testing.T) {
	root := t.TempDir()
	l, err := NewLayout(root, "hello", "ses_x", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"work/out", "work/logs", "work/.capsule-home", "logs", "tools"} {
		if fi, err := os.Stat(filepath.Join(root, "hello", "ses_x", d)); err != nil || !fi.IsDir() {
			t.Errorf("%s: %v", d, err)
		}
	}
	custom := filepath.Join(t.TempDir(), "mine")
	l, err = NewLayout(root, "hello", "ses_y", custom)
	if err != nil || l.Work != custom {
		t.Fatalf("workdir override: %v %+v", err, l)
	}
	if _, err := os.Stat(filepath.Join(custom, "out")); err != nil {
		t.Error(err)
	}
	if l.Trace != filepath.Join(root, "hello", "ses_y", "trace.jsonl") {
		t.Errorf("records not under work_root: %s", l.Trace)
	}
}
