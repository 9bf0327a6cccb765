package shell

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
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
	if stage == stageOuter || stage == stageReaper {
		// First: whatever this stage starts is then born in the session's cgroup.
		if err := joinCgroups(); err != nil {
			fmt.Fprintf(setup, "%v", err)
			return 125
		}
	}
	switch stage {
	case stageOuter:
		return outer(specF, setup)
	case stageReaper:
		return reaper(specF, setup)
	case stageInner:
		spec, code := readSpec(json.NewDecoder(specF), setup)
		specF.Close()
		if spec == nil {
			return code
		}
		return inner(spec, setup)
	}
	fmt.Fprintf(setup, "unknown stage %q", stage)
	return 125
}

// readSpec reads a runSpec from in, waiting as long as the sender takes: a stage may be
// started before its command is known (Sandbox keeps one ready). On failure it returns
// nil and the exit code; a pipe closed without a spec is silent, because whoever closed
// it (a failing outer stage, or a gateway discarding a ready wrapper) reports, or needs
// no report.
func readSpec(in *json.Decoder, setup *os.File) (*runSpec, int) {
	var spec runSpec
	err := in.Decode(&spec)
	if err == io.EOF {
		return nil, 125
	}
	if err != nil {
		fmt.Fprintf(setup, "reading the command: %v", err)
		return nil, 125
	}
	return &spec, 0
}

// readCommand completes spec with the command that follows it on in (see runSpec).
func readCommand(in *json.Decoder, spec *runSpec, setup *os.File) int {
	var c command
	err := in.Decode(&c)
	if err == io.EOF {
		return 125
	}
	if err != nil {
		fmt.Fprintf(setup, "reading the command: %v", err)
		return 125
	}
	spec.Path, spec.Args = c.Path, c.Args
	return 0
}

// outer is the sealed tier's first stage, root of fresh mount, network, pid, IPC and UTS
// namespaces: it starts the inner stage, reads the spec, builds the minimal root, pivots
// into it and forwards the proxy and DNS ports; then it reads the command, hands the
// whole spec to the inner stage and waits, relaying the inner stage's exit status.
func outer(specIn, setup *os.File) int {
	fail := func(step string, err error) int {
		fmt.Fprintf(setup, "%s: %v", step, err)
		return 125
	}
	rootMode := os.Getenv(rootEnv) == "1"
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fail("making mounts private", err)
	}
	// A /proc of our own pid namespace: the inner stage's uid_map is written through it.
	procErr := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if procErr != nil && rootMode {
		return fail("mounting /proc", procErr)
	}
	// The inner stage starts first, so its runtime starts while this stage builds the
	// root; it needs nothing of the command until the spec it is sent after the pivot.
	innerProc, specW, err := startInnerSealed(rootMode, setup)
	if err != nil {
		return fail("starting the inner stage", err)
	}
	// An interrupt is the command's to handle (a harness ends its turn): as init of the
	// pid namespace this stage would otherwise ignore it.
	handOn(func(sig os.Signal) { innerProc.Signal(sig) })
	in := json.NewDecoder(specIn)
	spec, code := readSpec(in, setup)
	if spec == nil {
		return code
	}
	if spec.RootMode != rootMode {
		return fail("reading the command", fmt.Errorf("root mode %v, but the stage was started for %v", spec.RootMode, rootMode))
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
	for _, port := range spec.Reach {
		// The same port inside as on the host, so the command's URLs read the same in
		// every tier; each reaches the host only through its own socket.
		ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return fail("forwarding a reachable port", err)
		}
		go acceptLoop(ln, rootMarker+"/"+reachSocket(port))
	}
	// The root is ready: a wrapper started ahead waits here for its command.
	if code := readCommand(in, spec, setup); code != 0 {
		return code
	}
	specIn.Close()
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

// startInnerSealed starts the sealed tier's inner stage, which waits for its command on
// the returned pipe; as root, in a user namespace mapping its 0 to sandboxUID. It must
// run before the pivot: pivot_root moves the inner stage's root and cwd into the new root.
func startInnerSealed(rootMode bool, setup *os.File) (*os.Process, *os.File, error) {
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if rootMode {
		attr.Cloneflags = unix.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sandboxUID, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sandboxUID, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		// Without setuid the child would keep host root's kuid, unmapped in its namespace.
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	}
	p, err := os.StartProcess("/proc/self/exe", []string{wrapperArg0}, &os.ProcAttr{
		Dir: "/", Env: wrapperEnv(stageInner, false),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, specR, setup}, Sys: attr,
	})
	specR.Close()
	if err != nil {
		specW.Close()
		return nil, nil, err
	}
	return p, specW, nil
}

// reaper runs the inner stage in its own process group as a child subreaper, so every
// process the tool starts, even one that left the group with setsid, stays its
// descendant. When the tool exits, or the gateway closes the control pipe (fd 5), it
// kills and reaps all of them: what a pid namespace does for the sealed tier.
func reaper(specIn, setup *os.File) int {
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
	// Started before the command is read, so its runtime starts meanwhile; it waits for
	// the spec on its pipe and needs nothing else of the command.
	p, err := os.StartProcess("/proc/self/exe", []string{wrapperArg0}, &os.ProcAttr{
		Dir: "/", Env: wrapperEnv(stageInner, false),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, specR, setup},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	specR.Close()
	if err != nil {
		fmt.Fprintf(setup, "starting the inner stage: %v", err)
		return 125
	}
	handOn(func(sig os.Signal) { unix.Kill(-p.Pid, sig.(syscall.Signal)) })
	in := json.NewDecoder(specIn)
	spec, code := readSpec(in, setup)
	if spec == nil {
		return code // the inner stage dies with this process (Pdeathsig)
	}
	if code := readCommand(in, spec, setup); code != 0 {
		return code
	}
	specIn.Close()
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

// handOn passes every SIGINT this stage receives to to: the gateway interrupts a
// command by signalling its wrapper.
func handOn(to func(os.Signal)) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT)
	go func() {
		for sig := range ch {
			to(sig)
		}
	}()
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
