package shell

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// sandboxUID is the host uid (and gid) a sealed tool runs as when the gateway is root:
// unprivileged, so RLIMIT_NPROC binds and root-owned files stay root's.
const sandboxUID = 65534

// Inside the sealed root: the folder holding the marker, resolv.conf and the sockets.
const rootMarker = "/.capsulegate"

// systemDirs are visible read-only (and executable) in the sealed tier and readable in
// the scoped tier; /etc is readable only.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// wrapperMain runs one stage; its return value is the process's exit code. 125 means the
// sandbox failed, and the reason is on fd 4.
func wrapperMain(stage string) int {
	// Credentials, no_new_privs, Landlock and seccomp are per thread: everything from here
	// to execve happens on this one.
	runtime.LockOSThread()
	specF, setup := os.NewFile(3, "spec"), os.NewFile(4, "setup")
	if specF == nil || setup == nil {
		fmt.Fprintln(os.Stderr, "capsulegate-sandbox: started without its pipes")
		return 125
	}
	var spec runSpec
	err := json.NewDecoder(specF).Decode(&spec)
	specF.Close()
	if err != nil {
		fmt.Fprintf(setup, "reading the command: %v", err)
		return 125
	}
	switch stage {
	case stageOuter:
		return outer(&spec, setup)
	case stageReaper:
		return reaper(&spec, setup)
	case stageInner:
		return inner(&spec, setup)
	}
	fmt.Fprintf(setup, "unknown stage %q", stage)
	return 125
}

// outer is the sealed tier's first stage, root of fresh mount, network, pid, IPC and UTS
// namespaces: it builds the minimal root, starts the inner stage, pivots into the root,
// forwards the proxy and DNS ports, and waits, relaying the inner stage's exit status.
func outer(spec *runSpec, setup *os.File) int {
	fail := func(step string, err error) int {
		fmt.Fprintf(setup, "%s: %v", step, err)
		return 125
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("making mounts private", err)
	}
	// A /proc of our own pid namespace: the inner stage's uid_map is written through it.
	procErr := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if procErr != nil && spec.RootMode {
		return fail("mounting /proc", procErr)
	}
	if err := loopbackUp(); err != nil {
		return fail("bringing up lo", err)
	}
	unix.Sethostname([]byte("capsule"))
	nr := filepath.Join(spec.Private, "root")
	if err := unix.Mount("tmpfs", nr, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=4m,nr_inodes=8192"); err != nil {
		return fail("mounting the sandbox root", err)
	}
	proc, err := buildRoot(nr, spec, procErr == nil)
	if err != nil {
		return fail("building the sandbox root", err)
	}
	spec.Proc = proc

	specR, specW, err := os.Pipe()
	if err != nil {
		return fail("pipe", err)
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if spec.RootMode {
		attr.Cloneflags = unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sandboxUID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sandboxUID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Without setuid the child would keep host root's kuid, unmapped in its namespace.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	}
	// Started before the pivot: pivot_root moves its root and cwd into the new root.
	innerProc, err := os.StartProcess("/proc/self/exe", []string{wrapperArg0}, &os.ProcAttr{
		Dir: "/", Env: wrapperEnv(stageInner),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, specR, setup}, Sys: attr,
	})
	specR.Close()
	if err != nil {
		return fail("starting the inner stage", err)
	}
	if err := placeWorkdir(nr, spec, innerProc.Pid); err != nil {
		return fail("mounting the workdir", err)
	}
	if err := pivot(nr); err != nil {
		return fail("entering the sandbox root", err)
	}
	if spec.Network {
		if err := forward(spec); err != nil {
			return fail("forwarding the proxy", err)
		}
	}
	if err := json.NewEncoder(specW).Encode(spec); err != nil {
		return fail("handing the command to the inner stage", err)
	}
	specW.Close()
	setup.Close()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 125
		}
		if pid == innerProc.Pid {
			if ws.Signaled() {
				return 128 + int(ws.Signal())
			}
			return ws.ExitStatus()
		}
	}
}

// reaper runs the inner stage in its own process group as a child subreaper, so every
// process the tool starts, even one that left the group with setsid, stays its
// descendant. When the tool exits, or the gateway closes the control pipe (fd 5), it
// kills and reaps all of them: what a pid namespace does for the sealed tier.
func reaper(spec *runSpec, setup *os.File) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintf(setup, "becoming a subreaper: %v", err)
		return 125
	}
	ctl := os.NewFile(5, "control")
	specR, specW, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(setup, "pipe: %v", err)
		return 125
	}
	p, err := os.StartProcess("/proc/self/exe", []string{wrapperArg0}, &os.ProcAttr{
		Dir: "/", Env: wrapperEnv(stageInner),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, specR, setup},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	specR.Close()
	if err != nil {
		fmt.Fprintf(setup, "starting the inner stage: %v", err)
		return 125
	}
	json.NewEncoder(specW).Encode(spec)
	specW.Close()
	setup.Close()
	if ctl != nil {
		go func() {
			ctl.Read(make([]byte, 1)) // EOF: the gateway wants the command dead
			unix.Kill(-p.Pid, unix.SIGKILL)
		}()
	}
	status := 125
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return status
		}
		if pid != p.Pid {
			continue
		}
		status = ws.ExitStatus()
		if ws.Signaled() {
			status = 128 + int(ws.Signal())
		}
		break
	}
	killDescendants()
	return status
}

// killDescendants kills this process's children until none is left; orphans of the
// killed come to this subreaper and die in the next round.
func killDescendants() {
	for {
		for _, pid := range children() {
			unix.Kill(pid, unix.SIGKILL)
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); err == unix.ECHILD {
			return
		}
	}
}

// children lists this process's children from every thread's /proc children file.
func children() []int {
	var out []int
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// loopbackUp brings up lo in the new network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return err
	}
	// getaddrinfo's AI_ADDRCONFIG (glibc's default) returns no IPv4 answer unless some
	// address other than 127.0.0.1 is configured: give lo a second one.
	alias, err := unix.NewIfreq("lo:1")
	if err != nil {
		return err
	}
	if err := alias.SetInet4Addr([]byte{127, 0, 0, 2}); err != nil {
		return err
	}
	return unix.IoctlIfreq(fd, unix.SIOCSIFADDR, alias)
}

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
	for _, sock := range []string{"proxy.sock", "dns.sock"} {
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

// placeWorkdir mounts the workdir and the extra read-only folders into the root. As
// root, the workdir mount is idmapped so the inner stage's unprivileged uid owns what
// root owns there, and what it creates is root's on disk.
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
	if err := bindTree(spec.Workdir, nr+spec.Workdir, false, attr); err != nil {
		return fmt.Errorf("%s: %w", spec.Workdir, err)
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
	if err := os.MkdirAll(dst, 0o755); err != nil {
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

// forward listens on the sandbox's loopback for the proxy (and DNS) and carries each
// connection or query over the bridge sockets to the gateway.
func forward(spec *runSpec) error {
	proxySock, dnsSock := rootMarker+"/proxy.sock", rootMarker+"/dns.sock"
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(innerProxyPort))
	if err != nil {
		return err
	}
	go acceptLoop(ln, proxySock)
	if !spec.DNS {
		return nil
	}
	dl, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(innerDNSPort))
	if err != nil {
		return err
	}
	go acceptLoop(dl, dnsSock) // DNS over TCP is already framed as the bridge carries it
	pc, err := net.ListenPacket("udp4", "127.0.0.1:"+strconv.Itoa(innerDNSPort))
	if err != nil {
		return err
	}
	go serveUDPDNS(pc, dnsSock)
	return nil
}

func acceptLoop(ln net.Listener, sock string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			u, err := net.Dial("unix", sock)
			if err != nil {
				c.Close()
				return
			}
			pipe(c, u)
		}()
	}
}

// serveUDPDNS answers each UDP query by asking over the bridge as DNS over TCP: a
// two-byte length, then the message.
func serveUDPDNS(pc net.PacketConn, sock string) {
	sem := make(chan struct{}, 64)
	var mu sync.Mutex // WriteTo from many goroutines
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		if n < 12 {
			continue
		}
		q := append([]byte{byte(n >> 8), byte(n)}, buf[:n]...)
		select {
		case sem <- struct{}{}:
		default:
			continue // too many in flight: the client retries
		}
		go func() {
			defer func() { <-sem }()
			reply, err := exchangeTCP(sock, q)
			if err != nil {
				return
			}
			mu.Lock()
			pc.WriteTo(reply, from)
			mu.Unlock()
		}()
	}
}

func exchangeTCP(sock string, framed []byte) ([]byte, error) {
	c, err := net.Dial("unix", sock)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if _, err := c.Write(framed); err != nil {
		return nil, err
	}
	var l [2]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return nil, err
	}
	reply := make([]byte, int(l[0])<<8|int(l[1]))
	_, err = io.ReadFull(c, reply)
	return reply, err
}

// inner is the last stage: limits, no_new_privs, no capabilities, Landlock and seccomp
// for sealed and scoped, then execve of the tool. Failures before execve go to fd 4.
func inner(spec *runSpec, setup *os.File) int {
	fail := func(step string, err error) int {
		fmt.Fprintf(setup, "%s: %v", step, err)
		return 125
	}
	unix.CloseOnExec(int(setup.Fd()))
	if spec.Tier == TierSealed {
		if st, err := os.Stat(rootMarker); err != nil || !st.IsDir() {
			return fail("checking the sandbox root", fmt.Errorf("%s is missing: the pivot did not reach this process", rootMarker))
		}
	}
	if spec.Tier == TierSealed && spec.RootMode && (unix.Getuid() != 0 || unix.Getgid() != 0) {
		// Unmapped ids here would mean the host's root ids survived into the sandbox.
		return fail("checking the sandbox identity", fmt.Errorf("uid %d gid %d, want the namespace's 0", unix.Getuid(), unix.Getgid()))
	}
	if err := unix.Chdir(spec.Workdir); err != nil {
		return fail("entering the workdir", err)
	}
	lim := spec.Limits
	if spec.Tier != TierSealed && unix.Getuid() != 0 {
		// Without a user namespace of its own, RLIMIT_NPROC counts every task of the
		// real uid, the gateway's threads included: the limit is headroom over those.
		lim.Processes += int64(tasksOf(unix.Getuid()))
	}
	if err := setLimits(lim); err != nil {
		return fail("setting resource limits", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail("setting no_new_privs", err)
	}
	if err := dropCaps(); err != nil {
		return fail("dropping capabilities", err)
	}
	if spec.Tier == TierSealed || spec.Tier == TierScoped {
		if err := applyLandlock(spec); err != nil {
			return fail("applying Landlock", err)
		}
		scoped := spec.Tier == TierScoped
		if err := applySeccomp(scoped, scoped && landlockABI() < 9); err != nil {
			return fail("applying seccomp", err)
		}
	}
	unix.CloseRange(5, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	err := syscall.Exec(spec.Path, spec.Args, spec.Env)
	// A binary the sandbox cannot run is the tool's failure, reported as a shell would.
	fmt.Fprintf(os.Stderr, "%s: %v\n", spec.Args[0], err)
	if err == unix.ENOENT {
		return 127
	}
	return 126
}

// tasksOf counts the threads whose real uid is uid.
func tasksOf(uid int) int {
	n := 0
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + p.Name() + "/status")
		if err != nil {
			continue
		}
		var real, threads int = -1, 0
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Uid:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					real, _ = strconv.Atoi(f[0])
				}
			} else if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		if real == uid {
			n += threads
		}
	}
	return n
}

// setLimits applies the rlimits; a hard limit below the asked one is kept.
func setLimits(l Limits) error {
	for _, r := range []struct {
		res int
		v   int64
	}{
		{unix.RLIMIT_NPROC, l.Processes}, {unix.RLIMIT_NOFILE, l.OpenFiles}, {unix.RLIMIT_FSIZE, l.FileSize},
		{unix.RLIMIT_CPU, l.CPUSeconds}, {unix.RLIMIT_AS, l.AddressSpace}, {unix.RLIMIT_CORE, 0},
	} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(r.res, &cur); err != nil {
			return err
		}
		v := uint64(r.v)
		if v > cur.Max {
			v = cur.Max
		}
		if err := unix.Setrlimit(r.res, &unix.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %d: %w", r.res, err)
		}
	}
	return nil
}

// dropCaps empties every capability set and locks the securebits, so a tool running as
// uid 0 (of its namespace, or of the host outside sealed) gains none through execve.
func dropCaps() error {
	const (
		noRoot, noRootLocked         = 1 << 0, 1 << 1
		noFixup, noFixupLocked       = 1 << 2, 1 << 3
		keepCapsLocked               = 1 << 5
		noAmbientRaise, noAmbientLck = 1 << 6, 1 << 7
	)
	bits := uintptr(noRoot | noRootLocked | noFixup | noFixupLocked | keepCapsLocked | noAmbientRaise | noAmbientLck)
	canSet := true
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, bits, 0, 0, 0); err != nil {
		if err != unix.EPERM {
			return fmt.Errorf("securebits: %w", err)
		}
		canSet = false // no CAP_SETPCAP: an unprivileged caller has nothing to drop
	}
	if canSet {
		for c := 0; c < 64; c++ {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err == unix.EINVAL {
				break
			} else if err != nil {
				return fmt.Errorf("bounding set: %w", err)
			}
		}
	}
	unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}
