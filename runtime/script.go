package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// scriptTask runs one task of a script capsule: its module's murmur:capsule/run, whose
// answer is the out/result.txt it wrote.
func (s *session) scriptTask(ctx context.Context, t *task) (result, state string, err error) {
	m := s.staged.Manifest
	// A stale answer of the previous task must not pass for this one's.
	if err := s.work.Remove("out/result.txt"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", StateFailed, err
	}
	if err := murmur.RunScript(ctx, s.rt.engine, s.staged.Script, s.grants(m.Name, murmur.RoleCapsule), s.imports(t, m.Name)); err != nil {
		if said := s.lastWords(m.Name + ".stderr.log"); said != "" {
			err = fmt.Errorf("%w; the guest's stderr ended with: %s", err, said)
		}
		return "", StateFailed, err
	}
	result, err = readResult(s.work)
	if err != nil {
		return "", StateFailed, fmt.Errorf("the capsule finished but wrote no out/result.txt: %w", err)
	}
	return result, StateCompleted, nil
}

// readResult reads out/result.txt through the workdir's root, so a symlink a guest
// planted cannot make the host read a file outside the workdir.
func readResult(work *os.Root) (string, error) {
	f, err := work.Open("out/result.txt")
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", &fs.PathError{Op: "read", Path: "out/result.txt", Err: errors.New("not a regular file")}
	}
	data, err := io.ReadAll(io.LimitReader(f, 16<<20))
	return strings.TrimRight(string(data), "\n"), err
}
