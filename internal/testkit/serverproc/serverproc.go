// Package serverproc starts and watches the real servers test kits run: the unprivileged
// account they run as when tests run as root, and their logs.
package serverproc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// LogTail is the log file at path from offset from on, at most its last max bytes, worded
// for an error message that names it name ("server log"); a note in parentheses, ending
// in a newline, says when there is no such file or nothing in it from there.
func LogTail(path, name string, from, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no %s: %v)\n", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-from > max {
		from = fi.Size() - max
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return fmt.Sprintf("(%s: %v)\n", name, err)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		nothing := "nothing"
		if from > 0 {
			nothing = "nothing new"
		}
		return fmt.Sprintf("(%s %s: %s)\n", name, path, nothing)
	}
	return fmt.Sprintf("%s %s ends:\n%s", name, path, b)
}

// Traversable says whether every user may pass through path and its parents, as a
// server's account must to reach a folder.
func Traversable(path string) bool {
	path, err := filepath.Abs(path)
	if err != nil {
		return false
	}
	for {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(path)
		if parent == path {
			return true
		}
		path = parent
	}
}
