package shell

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock is applied with raw system calls on the wrapper's locked thread just before
// execve: only that thread's domain matters, so no all-threads machinery is needed.

// landlockABI returns the kernel's Landlock ABI version, 0 when Landlock is unavailable.
func landlockABI() int {
	v, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if e != 0 {
		return 0
	}
	return int(v)
}

const (
	llFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	llRead = unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_READ_DIR
	llExec = llRead | unix.LANDLOCK_ACCESS_FS_EXECUTE
)

// etcReadable is what a tool may read of /etc when it runs as uid 0 without namespaces
// (scoped, gateway running as root), where file permissions do not protect /etc.
var etcReadable = []string{
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
	"/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf", "/etc/networks", "/etc/protocols",
	"/etc/services", "/etc/localtime", "/etc/timezone", "/etc/locale.alias", "/etc/locale.conf", "/etc/default/locale",
	"/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/etc/pki/tls/certs",
	"/etc/pki/ca-trust", "/etc/alternatives", "/etc/mime.types", "/etc/magic", "/etc/magic.mime", "/etc/inputrc",
	"/etc/bash.bashrc", "/etc/profile", "/etc/profile.d", "/etc/environment", "/etc/os-release", "/etc/debian_version",
	"/etc/lsb-release", "/etc/hostname", "/etc/terminfo", "/etc/gitconfig", "/etc/npmrc", "/etc/pip.conf",
	"/etc/python3*", "/etc/perl", "/etc/java-*", "/etc/maven", "/etc/mailcap", "/etc/xdg",
}

// llRuleNetPort is LANDLOCK_RULE_NET_PORT; llNetPortAttr is struct landlock_net_port_attr.
const llRuleNetPort = 2

type llNetPortAttr struct {
	allowed uint64
	port    uint64
}

// applyLandlock restricts this thread (and the tool it becomes) to: the workdir read,
// write and execute; system folders read and execute; /etc read; a few devices; in the
// sealed root also /tmp, /dev/shm and /proc; for scoped, TCP only to the proxy's port.
// It handles every access right the kernel knows, so anything not granted is denied.
func applyLandlock(spec *runSpec) error {
	abi := landlockABI()
	if abi < 1 {
		return errors.New("Landlock is not available")
	}
	fs := uint64(0x1fff) // ABI 1: execute … make_sym
	if abi >= 2 {
		fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 5 {
		fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 9 {
		fs |= unix.LANDLOCK_ACCESS_FS_RESOLVE_UNIX
	}
	var netRights, scoped uint64
	if spec.Tier == TierScoped && abi >= 4 {
		netRights = unix.LANDLOCK_ACCESS_NET_BIND_TCP | unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
		if abi >= 10 {
			netRights |= unix.LANDLOCK_ACCESS_NET_BIND_UDP | unix.LANDLOCK_ACCESS_NET_CONNECT_SEND_UDP
		}
	}
	if abi >= 6 {
		scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	attr := unix.LandlockRulesetAttr{Handled_access_fs: fs, Handled_access_net: netRights, Scoped: scoped}
	size := uintptr(8) // sized to what this ABI reads, so older kernels accept it
	if abi >= 4 {
		size = 16
	}
	if abi >= 6 {
		size = 24
	}
	rfd, _, e := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, uintptr(unsafe.Pointer(&attr)), size, 0)
	if e != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", e)
	}
	defer unix.Close(int(rfd))

	rw := fs &^ (unix.LANDLOCK_ACCESS_FS_MAKE_CHAR | unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV)
	type grant struct {
		path   string
		access uint64
	}
	grants := []grant{{spec.Workdir, rw}}
	for _, d := range spec.ReadWrite {
		grants = append(grants, grant{d, rw})
	}
	for _, d := range systemDirs {
		switch {
		case d != "/etc":
			grants = append(grants, grant{d, llExec})
		case spec.Tier == TierScoped && spec.RootMode:
			// A uid-0 tool owns /etc/shadow and friends: only what programs need.
			for _, pattern := range etcReadable {
				matches, _ := filepath.Glob(pattern)
				for _, m := range matches {
					grants = append(grants, grant{m, llRead})
				}
			}
		default:
			grants = append(grants, grant{d, llRead})
		}
	}
	for _, d := range spec.ReadOnly {
		grants = append(grants, grant{d, llExec})
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full"} {
		grants = append(grants, grant{d, unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_WRITE_FILE | unix.LANDLOCK_ACCESS_FS_TRUNCATE})
	}
	grants = append(grants, grant{"/dev/random", unix.LANDLOCK_ACCESS_FS_READ_FILE}, grant{"/dev/urandom", unix.LANDLOCK_ACCESS_FS_READ_FILE})
	if spec.Resolv != "" {
		grants = append(grants, grant{spec.Resolv, unix.LANDLOCK_ACCESS_FS_READ_FILE})
	}
	if spec.Tier == TierSealed {
		// Private to this sandbox: the host's /tmp, /dev/shm and /proc are not these.
		grants = append(grants, grant{"/tmp", rw}, grant{"/dev/shm", rw})
		if spec.Proc {
			grants = append(grants, grant{"/proc", llRead})
		}
	}
	for _, g := range grants {
		if err := llAddPath(int(rfd), g.path, g.access&fs); err != nil {
			return fmt.Errorf("%s: %w", g.path, err)
		}
	}
	if netRights != 0 {
		// The only TCP ports it may connect to: the proxy's, and a long-running
		// command's own loopback servers (HarnessSpec.Reach).
		ports := spec.Reach
		if spec.Network && spec.ProxyPort > 0 {
			ports = append([]int{spec.ProxyPort}, ports...)
		}
		for _, port := range ports {
			pa := llNetPortAttr{allowed: unix.LANDLOCK_ACCESS_NET_CONNECT_TCP, port: uint64(port)}
			if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, rfd, llRuleNetPort, uintptr(unsafe.Pointer(&pa)), 0, 0, 0); e != 0 {
				return fmt.Errorf("port %d: %w", port, e)
			}
		}
	}
	if _, _, e := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, rfd, 0, 0); e != 0 {
		return fmt.Errorf("landlock_restrict_self: %w", e)
	}
	return nil
}

// llAddPath grants access beneath path; a missing path is skipped, and a file gets only
// the rights that apply to files.
func llAddPath(rfd int, path string, access uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= llFileRights
	}
	if access == 0 {
		return nil
	}
	pb := unix.LandlockPathBeneathAttr{Allowed_access: access, Parent_fd: int32(fd)}
	if _, _, e := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE, uintptr(rfd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(&pb)), 0, 0, 0); e != 0 {
		return fmt.Errorf("landlock_add_rule: %w", e)
	}
	return nil
}
