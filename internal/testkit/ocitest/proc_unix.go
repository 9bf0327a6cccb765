//go:build unix

package ocitest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// terminate asks the registry to stop.
var terminate os.Signal = syscall.SIGTERM

// account is the unprivileged user the registry runs as when the tests run as root.
type account struct{ uid, gid uint32 }

// serverAccount is the account to run the registry as: nil (ours) unless we are root;
// then nobody, so that a registry bug cannot touch what root may.
func serverAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("ocitest: running as root, and no user nobody to run the registry as: %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("ocitest: user nobody has uid %q, gid %q", u.Uid, u.Gid)
	}
	return &account{uid: uint32(uid), gid: uint32(gid)}, nil
}

// apply makes cmd run as the account, without root's supplementary groups, and die with
// the test binary where the system allows.
func (a *account) apply(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	setDeathSignal(cmd.SysProcAttr)
	if a != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: []uint32{}}
	}
}

// own gives dir and everything in it to the account.
func (a *account) own(dir string) error {
	if a == nil {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(a.uid), int(a.gid))
	})
}
