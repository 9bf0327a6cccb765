//go:build unix

package atomicfile

import (
	"fmt"
	"os"
	"syscall"
)

// LockDir takes an exclusive advisory lock on a folder, blocking until it is free, so
// read-modify-write cycles on files inside it (murmur.lock) from several processes run
// one at a time. The returned func releases it.
func LockDir(dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s to lock it: %w", dir, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
