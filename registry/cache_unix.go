//go:build unix

package registry

import (
	"errors"
	"syscall"
)

// alive reports whether a process with pid exists (one we may not signal counts).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
