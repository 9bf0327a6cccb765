package guestfs

import (
	"errors"
	"io/fs"
	"os"
	"sync"
)

// Dir is the folder a Held and the FSs opened over it with NewIn serve, reached through
// an os.Root. A Dir from LazyDir is made and opened only when something first needs it
// (Root): a gateway context whose tasks the held files serve entirely never has its
// workdir created, and each folder created costs the kernel an inode and a block.
//
// Dir is safe for concurrent use.
type Dir struct {
	path   string
	make   bool // LazyDir: Root makes the folder
	mu     sync.Mutex
	root   *os.Root
	closed bool
}

// OpenDir opens the existing folder path now.
func OpenDir(path string) (*Dir, error) {
	r, err := os.OpenRoot(path)
	if err != nil {
		return nil, err
	}
	return &Dir{path: path, root: r}, nil
}

// DirOf returns the Dir of a root already open; the Dir's Close closes it.
func DirOf(r *os.Root) *Dir { return &Dir{path: r.Name(), root: r} }

// LazyDir returns the folder path, which its caller has not made yet but whose parent
// exists and is the host's alone: the first Root makes it (mode 0o755; one made meanwhile
// by the host, through its path, is taken as it is) and opens it.
func LazyDir(path string) *Dir { return &Dir{path: path, make: true} }

// Root returns the folder's root, making and opening the folder first if nothing has.
func (d *Dir) Root() (*os.Root, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.root != nil {
		return d.root, nil
	}
	if d.closed {
		return nil, &fs.PathError{Op: "open", Path: d.path, Err: fs.ErrClosed}
	}
	if d.make {
		if err := os.Mkdir(d.path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
	}
	r, err := os.OpenRoot(d.path)
	if err != nil {
		return nil, err
	}
	d.root = r
	return r, nil
}

// Opened returns the folder's root when Root (or OpenDir) has opened it, nil otherwise:
// then no one has reached the folder through the Dir, and a LazyDir's folder holds
// nothing the held files were written to.
func (d *Dir) Opened() *os.Root {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.root
}

// Path is the folder's host path.
func (d *Dir) Path() string { return d.path }

// Close closes the folder's root if it was opened; Root fails from then on.
func (d *Dir) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.root == nil {
		return nil
	}
	err := d.root.Close()
	d.root = nil
	return err
}
