package registry

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/manifest"
)

// InstallLock resolves the manifest's artifacts, pinning what its lock lacks, and writes
// the lock beside the manifest atomically when it changed. The read-resolve-write cycle
// holds an exclusive lock on the manifest's folder, so concurrent installs run one after
// the other and the file always holds exactly one install's result. opts.Lock and
// opts.Mode are ignored. It reports whether the lock file changed.
func InstallLock(ctx context.Context, m *manifest.Manifest, opts Options) (*Resolution, bool, error) {
	path := LockPath(m.File)
	unlock, err := atomicfile.LockDir(filepath.Dir(path))
	if err != nil {
		return nil, false, &errs.Error{Code: CodeLockWrite, Part: "lock", Pos: path, Msg: "cannot lock the manifest's folder", Err: err,
			Fix: "check that the folder exists and is readable"}
	}
	defer unlock()
	old, err := ReadLock(path)
	if err != nil && errs.Code(err) != CodeLockFileMissing {
		return nil, false, err
	}
	opts.Lock, opts.Mode = old, Install
	res, err := Resolve(ctx, m, opts)
	if err != nil {
		return nil, false, err
	}
	if !needsLock(m) && old == nil {
		return res, false, nil // no registry artifacts: no lock needed, none written
	}
	data := res.Lock.Marshal()
	if cur, err := os.ReadFile(path); err == nil && bytes.Equal(cur, data) {
		return res, false, nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false, &errs.Error{Code: CodeLockWrite, Part: "lock", Pos: path, Msg: "cannot read the current lock", Err: err, Fix: "check its permissions"}
	}
	if err := WriteLock(path, res.Lock); err != nil {
		return nil, false, err
	}
	return res, true, nil
}

// VerifyLock resolves the manifest's artifacts strictly against the lock beside it
// (docs/reference/lock.md "Verifying"), or against opts.LockPath when set, and writes
// nothing. opts.Lock and opts.Mode are ignored.
func VerifyLock(ctx context.Context, m *manifest.Manifest, opts Options) (*Resolution, error) {
	var lock *Lock
	if needsLock(m) {
		path := opts.LockPath
		if path == "" {
			path = LockPath(m.File)
		}
		l, err := ReadLock(path)
		if err != nil {
			return nil, err
		}
		lock = l
	}
	opts.Lock, opts.Mode = lock, Verify
	return Resolve(ctx, m, opts)
}
