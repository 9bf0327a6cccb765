package shell

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The seccomp filter is a deny-list: the namespaces and Landlock do the confining; the
// filter closes what they do not cover (docs/sandbox.md "seccomp" lists every entry):
//   - kernel interfaces a tool never needs and that widen the attack surface: mount
//     and the new mount API, namespaces (unshare, setns, clone with CLONE_NEW*), BPF,
//     perf, keyrings, modules, kexec, reboot, swap, clock setting, handle-based opens;
//   - io_uring, whose operations bypass this filter (ENOSYS: programs fall back);
//   - clone3 and openat2, whose arguments a filter cannot read (ENOSYS: libc falls back);
//   - setuid/setgid bits in chmod, open/creat and mknod modes: as root, the sealed
//     workdir is idmapped and a set-uid file made there would be root's on the host;
//   - socket families other than Unix, IPv4, IPv6 and netlink (vsock reaches the
//     hypervisor past any network namespace), and Multipath TCP, which Landlock's TCP
//     rules do not see. In the scoped tier IPv4/IPv6 sockets are TCP only (Landlock
//     confines TCP connects there, nothing confines UDP, SCTP or raw sockets), and Unix
//     sockets are refused unless Landlock (ABI 9) confines their connects.

// seccomp return values and BPF opcodes (linux/seccomp.h, linux/filter.h).
const (
	retKillProcess = 0x80000000
	retErrno       = 0x00050000
	retAllow       = 0x7fff0000

	bpfLdAbs  = 0x20 // BPF_LD | BPF_W | BPF_ABS
	bpfJeq    = 0x15 // BPF_JMP | BPF_JEQ | BPF_K
	bpfJge    = 0x35 // BPF_JMP | BPF_JGE | BPF_K
	bpfJset   = 0x45 // BPF_JMP | BPF_JSET | BPF_K
	bpfJa     = 0x05 // BPF_JMP | BPF_JA
	bpfAnd    = 0x54 // BPF_ALU | BPF_AND | BPF_K
	bpfRet    = 0x06 // BPF_RET | BPF_K
	offNr     = 0
	offArch   = 4
	offArg0   = 16 // low 32 bits of args[i] at offArg0 + 8*i (little-endian)
	suidMask  = 0o6000
	nsFlags   = unix.CLONE_NEWUSER | unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS | unix.CLONE_NEWCGROUP
	ipMPTCP   = 262
	sockTypes = 0xf
)

// modeRule denies a system call whose argument arg (a file mode) has set-id bits.
type modeRule struct {
	nr  uintptr
	arg uint32
}

// bpfProg assembles a classic BPF program with forward jumps to labels.
type bpfProg struct {
	ins    []unix.SockFilter
	fix    []bpfFix
	labels map[string]int
}

type bpfFix struct {
	at       int
	jt, jf   string
	longJump bool
}

func (p *bpfProg) op(code uint16, k uint32) {
	p.ins = append(p.ins, unix.SockFilter{Code: code, K: k})
}

func (p *bpfProg) jmp(code uint16, k uint32, jt, jf string) {
	p.fix = append(p.fix, bpfFix{at: len(p.ins), jt: jt, jf: jf})
	p.op(code, k)
}

func (p *bpfProg) ja(label string) {
	p.fix = append(p.fix, bpfFix{at: len(p.ins), jt: label, longJump: true})
	p.op(bpfJa, 0)
}

func (p *bpfProg) label(name string) { p.labels[name] = len(p.ins) }

func (p *bpfProg) assemble() ([]unix.SockFilter, error) {
	off := func(from int, label string) (int, error) {
		if label == "" {
			return 0, nil
		}
		to, ok := p.labels[label]
		if !ok || to <= from {
			return 0, fmt.Errorf("bad jump to %q", label)
		}
		return to - from - 1, nil
	}
	for _, f := range p.fix {
		t, err := off(f.at, f.jt)
		if err != nil {
			return nil, err
		}
		if f.longJump {
			p.ins[f.at].K = uint32(t)
			continue
		}
		e, err := off(f.at, f.jf)
		if err != nil {
			return nil, err
		}
		if t > 255 || e > 255 {
			return nil, fmt.Errorf("jump too far to %q/%q", f.jt, f.jf)
		}
		p.ins[f.at].Jt, p.ins[f.at].Jf = uint8(t), uint8(e)
	}
	return p.ins, nil
}

// seccompFilter builds the filter; scoped narrows IPv4/IPv6 sockets to TCP, and noUnix
// refuses Unix sockets (scoped, where Landlock before ABI 9 does not confine connects to
// the host's pathname sockets: docker.sock, the D-Bus session bus, ssh-agent).
func seccompFilter(scoped, noUnix bool) ([]unix.SockFilter, error) {
	p := &bpfProg{labels: map[string]int{}}
	p.op(bpfLdAbs, offArch)
	p.jmp(bpfJeq, auditArch, "arch", "")
	p.op(bpfRet, retKillProcess) // another ABI (i386, x32 entry points) would skip every rule
	p.label("arch")
	p.op(bpfLdAbs, offNr)
	if x32Bit != 0 {
		p.jmp(bpfJge, x32Bit, "enosys", "")
	}
	for _, nr := range deniedSyscalls() {
		p.jmp(bpfJeq, uint32(nr), "eperm", "")
	}
	for _, nr := range []uintptr{unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER, unix.SYS_CLONE3, unix.SYS_OPENAT2} {
		p.jmp(bpfJeq, uint32(nr), "enosys", "")
	}
	rules := append(modeRules(), modeRule{unix.SYS_FCHMOD, 1}, modeRule{unix.SYS_FCHMODAT, 2}, modeRule{unix.SYS_FCHMODAT2, 2},
		modeRule{unix.SYS_OPENAT, 3}, modeRule{unix.SYS_MKNODAT, 2})
	for i, r := range rules {
		next := fmt.Sprintf("mode%d", i)
		p.jmp(bpfJeq, uint32(r.nr), "", next)
		p.op(bpfLdAbs, offArg0+8*r.arg)
		p.jmp(bpfJset, suidMask, "eperm", "")
		p.op(bpfLdAbs, offNr)
		p.label(next)
	}
	p.jmp(bpfJeq, unix.SYS_CLONE, "", "clone_end")
	p.op(bpfLdAbs, offArg0)
	p.jmp(bpfJset, nsFlags, "eperm", "")
	p.op(bpfLdAbs, offNr)
	p.label("clone_end")

	p.jmp(bpfJeq, unix.SYS_SOCKET, "", "allow")
	p.op(bpfLdAbs, offArg0)
	if noUnix {
		p.jmp(bpfJeq, unix.AF_UNIX, "eperm", "")
	} else {
		p.jmp(bpfJeq, unix.AF_UNIX, "allow", "")
	}
	p.jmp(bpfJeq, unix.AF_NETLINK, "allow", "")
	p.jmp(bpfJeq, unix.AF_INET, "inet", "")
	p.jmp(bpfJeq, unix.AF_INET6, "inet", "")
	p.ja("eafnosupport")
	p.label("inet")
	if scoped {
		p.op(bpfLdAbs, offArg0+8)
		p.op(bpfAnd, sockTypes)
		p.jmp(bpfJeq, unix.SOCK_STREAM, "", "eperm")
		p.op(bpfLdAbs, offArg0+16)
		p.jmp(bpfJeq, 0, "allow", "")
		p.jmp(bpfJeq, unix.IPPROTO_TCP, "allow", "eperm")
	} else {
		p.op(bpfLdAbs, offArg0+16)
		p.jmp(bpfJeq, ipMPTCP, "eperm", "allow")
	}
	p.label("allow")
	p.op(bpfRet, retAllow)
	p.label("eperm")
	p.op(bpfRet, retErrno|uint32(unix.EPERM))
	p.label("enosys")
	p.op(bpfRet, retErrno|uint32(unix.ENOSYS))
	p.label("eafnosupport")
	p.op(bpfRet, retErrno|uint32(unix.EAFNOSUPPORT))
	return p.assemble()
}

// deniedSyscalls answer EPERM.
func deniedSyscalls() []uintptr {
	return append(archDenied(),
		unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT, unix.SYS_CHROOT, unix.SYS_UNSHARE, unix.SYS_SETNS,
		unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG, unix.SYS_FSMOUNT, unix.SYS_FSPICK,
		unix.SYS_MOUNT_SETATTR, unix.SYS_OPEN_TREE_ATTR,
		unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD, unix.SYS_FANOTIFY_INIT,
		unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD, unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
		unix.SYS_REBOOT, unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_ACCT, unix.SYS_QUOTACTL, unix.SYS_QUOTACTL_FD,
		unix.SYS_SYSLOG, unix.SYS_VHANGUP, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY, unix.SYS_KEYCTL,
		unix.SYS_NAME_TO_HANDLE_AT, unix.SYS_OPEN_BY_HANDLE_AT,
		unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	)
}

// applySeccomp installs the filter on this thread; no_new_privs must be set.
func applySeccomp(scoped, noUnix bool) error {
	f, err := seccompFilter(scoped, noUnix)
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// seccompAvailable reports whether this kernel takes filters and this package has the
// architecture's system call table.
func seccompAvailable() bool {
	if auditArch == 0 {
		return false
	}
	action := uint32(retErrno)
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	return e == 0
}
