package guestfs

import (
	"errors"
	"io/fs"
	"os"
	"path"
	"strings"
	"sync"
	"syscall"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// escapeErr is os.Root's (unexported) "path escapes from parent" error,
// learned once from a real Root so that it can be matched with errors.Is.
var (
	escapeOnce sync.Once
	escapeErr  error
)

func learnEscapeError(r *os.Root) {
	escapeOnce.Do(func() {
		_, err := r.Lstat("..")
		var pe *os.PathError
		if errors.As(err, &pe) {
			if _, isErrno := pe.Err.(syscall.Errno); !isErrno {
				escapeErr = pe.Err
			}
		}
	})
}

func isEscape(err error) bool {
	if escapeErr != nil && errors.Is(err, escapeErr) {
		return true
	}
	// Fallback should the sentinel not have been learned.
	return strings.HasSuffix(err.Error(), "path escapes from parent")
}

// toErrno maps an error from os / os.Root to an Errno.
func toErrno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var en syscall.Errno
	switch {
	case errors.As(err, &en):
		return experimentalsys.UnwrapOSError(en)
	case errors.Is(err, os.ErrClosed):
		return experimentalsys.EBADF
	case isEscape(err):
		return experimentalsys.EPERM
	case errors.Is(err, fs.ErrNotExist):
		return experimentalsys.ENOENT
	case errors.Is(err, fs.ErrExist):
		return experimentalsys.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return experimentalsys.EPERM
	case errors.Is(err, fs.ErrInvalid):
		return experimentalsys.EINVAL
	}
	return experimentalsys.EIO
}

// clean turns a path from wazero into a name for os.Root: relative to the
// root, lexically cleaned, never climbing above the root. trailing reports
// whether the original ended in "/" (the name must then be a directory); the
// returned name never carries it, see withSlash.
func clean(p string) (name string, trailing bool, errno experimentalsys.Errno) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", false, experimentalsys.EINVAL
	}
	trailing = strings.HasSuffix(p, "/")
	p = strings.TrimLeft(p, "/")
	if p == "" {
		return ".", false, 0
	}
	name = path.Clean(p)
	if name == ".." || strings.HasPrefix(name, "../") {
		return "", false, experimentalsys.EPERM
	}
	if name == "." {
		trailing = false
	}
	return name, trailing, 0
}

func withSlash(name string, trailing bool) string {
	if trailing {
		return name + "/"
	}
	return name
}

// cleanPair cleans both paths of a two-name mutation (rename, link), refusing it on a
// read-only filesystem.
func (s *FS) cleanPair(a, b string) (aName string, aSlash bool, bName string, bSlash bool, errno experimentalsys.Errno) {
	if aName, aSlash, errno = s.cleanWritable(a); errno != 0 {
		return
	}
	bName, bSlash, errno = clean(b)
	return
}

// cleanWritable cleans the path of a mutation, refusing it on a read-only filesystem.
func (s *FS) cleanWritable(p string) (name string, trailing bool, errno experimentalsys.Errno) {
	if s.readOnly {
		return "", false, experimentalsys.EROFS
	}
	return clean(p)
}
