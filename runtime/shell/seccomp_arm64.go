//go:build linux

package shell

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_AARCH64
	x32Bit    = 0
)

func archDenied() []uintptr { return nil }

func modeRules() []modeRule { return nil }
