//go:build linux

package guestfs

import (
	"os"
	"syscall"
	"unsafe"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// Open flags with no os.O_* equivalent.
const (
	oDIRECTORY = syscall.O_DIRECTORY
	oDSYNC     = syscall.O_DSYNC
	oRSYNC     = syscall.O_RSYNC
	oNONBLOCK  = syscall.O_NONBLOCK
)

// utimeOmit is Linux's UTIME_OMIT for utimensat(2).
const utimeOmit = (1 << 30) - 2

// control runs fn on the descriptor of f, holding a reference to it.
func control(f *os.File, fn func(fd uintptr) error) experimentalsys.Errno {
	rc, err := f.SyscallConn()
	if err != nil {
		return toErrno(err)
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) { opErr = fn(fd) }); err != nil {
		return toErrno(err)
	}
	return toErrno(opErr)
}

func setAppend(f *os.File, enable bool) experimentalsys.Errno {
	return control(f, func(fd uintptr) error {
		fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		if e != 0 {
			return e
		}
		if enable {
			fl |= syscall.O_APPEND
		} else {
			fl &^= syscall.O_APPEND
		}
		if _, _, e = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, fl); e != 0 {
			return e
		}
		return nil
	})
}

func pwriteRaw(f *os.File, buf []byte, off int64) (int, experimentalsys.Errno) {
	total := 0
	errno := control(f, func(fd uintptr) error {
		for total < len(buf) {
			n, err := syscall.Pwrite(int(fd), buf[total:], off+int64(total))
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return syscall.EIO
			}
			total += n
		}
		return nil
	})
	return total, errno
}

func datasync(f *os.File) experimentalsys.Errno {
	return control(f, func(fd uintptr) error {
		for {
			err := syscall.Fdatasync(int(fd))
			if err != syscall.EINTR {
				return err
			}
		}
	})
}

func toTimespec(n int64) syscall.Timespec {
	if n == experimentalsys.UTIME_OMIT {
		return syscall.Timespec{Sec: 0, Nsec: utimeOmit}
	}
	return syscall.NsecToTimespec(n)
}

// futimens is utimensat(fd, NULL, times, 0): the open descriptor itself, no
// name lookup at all.
func futimens(f *file, atim, mtim int64) experimentalsys.Errno {
	ts := [2]syscall.Timespec{toTimespec(atim), toTimespec(mtim)}
	return control(f.f, func(fd uintptr) error {
		_, _, e := syscall.Syscall6(syscall.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
		if e != 0 {
			return e
		}
		return nil
	})
}
