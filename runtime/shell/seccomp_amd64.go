//go:build linux

package shell

import "golang.org/x/sys/unix"

const (
	auditArch = unix.AUDIT_ARCH_X86_64
	x32Bit    = 0x40000000 // __X32_SYSCALL_BIT: x32 entry points are refused wholesale
)

func archDenied() []uintptr {
	return []uintptr{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB}
}

func modeRules() []modeRule {
	return []modeRule{{unix.SYS_CHMOD, 1}, {unix.SYS_OPEN, 2}, {unix.SYS_CREAT, 1}, {unix.SYS_MKNOD, 1}}
}
