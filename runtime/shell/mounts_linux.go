package shell

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// buildRoot fills the tmpfs at nr: system folders read-only, private /dev, /proc, /tmp
// and /run, the marker folder, resolv.conf and the bridge sockets. It reports whether a
// private /proc is mounted.
func buildRoot(nr string, spec *runSpec, procOK bool) (bool, error) {
	roAttr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	for _, d := range systemDirs {
		st, err := os.Lstat(d)
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			target, err := os.Readlink(d)
			if err != nil {
				return false, err
			}
			if err := os.Symlink(target, nr+d); err != nil {
				return false, err
			}
			continue
		}
		if !st.IsDir() {
			continue
		}
		if err := bindTree(d, nr+d, true, roAttr); err != nil {
			return false, fmt.Errorf("%s: %w", d, err)
		}
	}
	// /dev: the harmless devices, and links into /proc.
	if err := mountTmpfs(nr+"/dev", "mode=0755,size=64k,nr_inodes=64", unix.MS_NOSUID|unix.MS_NOEXEC); err != nil {
		return false, err
	}
	for _, dev := range []string{"null", "zero", "full", "random", "urandom"} {
		if err := bindFile("/dev/"+dev, nr+"/dev/"+dev); err != nil {
			return false, fmt.Errorf("/dev/%s: %w", dev, err)
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, nr+"/dev/"+name); err != nil {
			return false, err
		}
	}
	if err := mountTmpfs(nr+"/dev/shm", "mode=1777,size=64m", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return false, err
	}
	if err := unix.Mount("", nr+"/dev", "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NOEXEC, ""); err != nil {
		return false, err
	}
	if err := mountTmpfs(nr+"/tmp", "mode=1777,size=64m", unix.MS_NOSUID|unix.MS_NODEV); err != nil {
		return false, err
	}
	if err := mountTmpfs(nr+"/run", "mode=0755,size=1m", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC); err != nil {
		return false, err
	}
	// /proc of this pid namespace only; hidepid keeps the root-owned outer stage out of sight.
	proc := false
	if procOK {
		if err := os.Mkdir(nr+"/proc", 0o555); err != nil {
			return false, err
		}
		flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
		for _, opts := range []string{"subset=pid,hidepid=invisible", "hidepid=invisible", ""} {
			if unix.Mount("proc", nr+"/proc", "proc", flags, opts) == nil {
				proc = true
				break
			}
		}
	}
	if err := os.Mkdir(nr+rootMarker, 0o755); err != nil {
		return false, err
	}
	if spec.Network && spec.DNS {
		if err := placeResolv(nr, spec); err != nil {
			return false, fmt.Errorf("resolv.conf: %w", err)
		}
	}
	socks := []string{"proxy.sock", "dns.sock"}
	for _, port := range spec.Reach {
		socks = append(socks, reachSocket(port))
	}
	for _, sock := range socks {
		src := filepath.Join(spec.Private, sock)
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		if err := bindFile(src, nr+rootMarker+"/"+sock); err != nil {
			return false, fmt.Errorf("%s: %w", sock, err)
		}
	}
	return proc, nil
}

// placeResolv points the sandbox's resolver at 127.0.0.1, where the DNS forwarder listens.
func placeResolv(nr string, spec *runSpec) error {
	generated := nr + rootMarker + "/resolv.conf"
	if err := os.WriteFile(generated, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		return err
	}
	target, err := filepath.EvalSymlinks("/etc/resolv.conf")
	if err != nil {
		return nil // no resolv.conf: the C library's default is 127.0.0.1 anyway
	}
	for _, own := range []string{"/run/", "/tmp/"} {
		if strings.HasPrefix(target, own) {
			// systemd-resolved and friends: the link leads into a tmpfs of ours.
			if err := os.MkdirAll(filepath.Dir(nr+target), 0o755); err != nil {
				return err
			}
			spec.Resolv = target
			return os.WriteFile(nr+target, []byte("nameserver 127.0.0.1\n"), 0o644)
		}
	}
	if st, err := os.Stat(nr + target); err != nil || !st.Mode().IsRegular() {
		return nil // somewhere the sandbox does not see: the dangling link means 127.0.0.1
	}
	if !strings.HasPrefix(target, "/etc/") {
		spec.Resolv = target
	}
	return bindFile(generated, nr+target)
}

// placeWorkdir mounts the workdir, the extra writable paths and the extra read-only ones
// into the root. As root, the writable mounts are idmapped so the inner stage's
// unprivileged uid owns what root owns there, and what it creates is root's on disk.
func placeWorkdir(nr string, spec *runSpec, innerPid int) error {
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if spec.RootMode {
		userns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", innerPid))
		if err != nil {
			return err
		}
		defer userns.Close()
		attr.Attr_set |= unix.MOUNT_ATTR_IDMAP
		attr.Userns_fd = uint64(userns.Fd())
	}
	for _, d := range append([]string{spec.Workdir}, spec.ReadWrite...) {
		if err := bindTree(d, nr+d, false, attr); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	roAttr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	for _, d := range spec.ReadOnly {
		if err := bindTree(d, nr+d, false, roAttr); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	// Nothing may be created in the root itself.
	return unix.Mount("", nr, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "")
}

// bindTree mounts a detached copy of the tree at src, with attr applied, on dst.
func bindTree(src, dst string, recursive bool, attr *unix.MountAttr) error {
	flags := unix.OPEN_TREE_CLONE | unix.OPEN_TREE_CLOEXEC
	setFlags := unix.AT_EMPTY_PATH
	if recursive {
		flags |= unix.AT_RECURSIVE
		setFlags |= unix.AT_RECURSIVE
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, uint(flags))
	if err != nil {
		return fmt.Errorf("open_tree: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.MountSetattr(fd, "", uint(setFlags), attr); err != nil {
		return fmt.Errorf("mount_setattr: %w", err)
	}
	if st, err := os.Stat(src); err == nil && !st.IsDir() {
		// A file (a harness's credentials file) is mounted on an empty file of its name.
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		f.Close()
	} else if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// bindFile bind-mounts the file (a device node, a socket) at src onto dst.
func bindFile(src, dst string) error {
	if _, err := os.Stat(dst); err != nil {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	return unix.Mount(src, dst, "", unix.MS_BIND, "")
}

func mountTmpfs(dst, opts string, flags uintptr) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dst, "tmpfs", flags, opts); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return nil
}

// pivot makes nr the root and drops every view of the host's tree.
func pivot(nr string) error {
	if err := unix.Chdir(nr); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host's root: %w", err)
	}
	return unix.Chdir("/")
}
