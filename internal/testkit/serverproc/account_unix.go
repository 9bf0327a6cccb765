//go:build unix

package serverproc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// Account is the unprivileged user a server runs as when the tests run as root; a nil
// *Account stands for the tests' own.
type Account struct {
	Name     string
	UID, GID uint32
}

// Unprivileged is the account to run a server as: nil (the tests' own) unless the tests
// run as root, then the first of names that exists, or an error saying why none would do.
func Unprivileged(names ...string) (*Account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []error
	for _, name := range names {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err := errors.Join(err1, err2); err != nil {
			errs = append(errs, fmt.Errorf("user %s: %w", name, err))
			continue
		}
		return &Account{Name: name, UID: uint32(uid), GID: uint32(gid)}, nil
	}
	return nil, errors.Join(errs...)
}

// Apply makes cmd run as the account, without root's supplementary groups, keeping what
// else cmd.SysProcAttr holds; on a nil account it does nothing.
func (a *Account) Apply(cmd *exec.Cmd) {
	if a == nil {
		return
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: []uint32{}}
}

// Own gives dir and everything in it to the account; on a nil account it does nothing.
func (a *Account) Own(dir string) error {
	if a == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(a.UID), int(a.GID))
	})
}
