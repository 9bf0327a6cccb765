package runtime

import (
	"os"
	"path/filepath"
	"testing"
)

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
