package escape

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/runtime/shell"
)

// Shell and native rows run commands and a native tool in one OS sandbox (the sealed
// tier; on a host without it they skip, saying why), its network wired to the suite's
// netpolicy proxy and pinning resolver. Sentinels: a workdir beside a home with a key
// and an outside folder (nothing there may be read, created or changed), the gateway's
// own process (it must be neither signalled nor read), a host variable, the network
// fixture's sentinel server, and a UDP listener on host loopback.

type sandboxFixture struct {
	sb                          *shell.Sandbox
	work, home, outside, native string
	udp                         net.PacketConn
	unixPath, unixAbstract      string       // unix socket sentinels: a path outside, an abstract name
	unixHits                    atomic.Int64 // connections they accepted
}

func (s *suite) sandbox(t *testing.T) *sandboxFixture {
	if s.sb != nil {
		return s.sb
	}
	n := s.netFix(t)
	base, err := filepath.EvalSymlinks(s.top.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &sandboxFixture{work: filepath.Join(base, "work"), home: filepath.Join(base, "home"), outside: filepath.Join(base, "outside")}
	records := filepath.Join(base, "records")
	for p, content := range map[string]string{
		filepath.Join(f.home, ".ssh", "id_ed25519"): secret,
		filepath.Join(f.outside, "existing.txt"):    secret,
		filepath.Join(f.outside, "other.txt"):       secret,
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Mkdir(f.work, 0o755); err != nil {
		t.Fatal(err)
	}
	// Planted in the workdir by a hostile neighbour: links out.
	for name, target := range map[string]string{
		"key-link":   filepath.Join(f.home, ".ssh", "id_ed25519"),
		"ssh-dir":    filepath.Join(f.home, ".ssh"),
		"write-link": filepath.Join(f.outside, "existing.txt"),
	} {
		if err := os.Symlink(target, filepath.Join(f.work, name)); err != nil {
			t.Fatal(err)
		}
	}
	f.native = filepath.Join(records, "tools", "hostile", "hostile")
	if err := os.MkdirAll(filepath.Dir(f.native), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.native, []byte(nativeTool), 0o755); err != nil {
		t.Fatal(err)
	}
	f.udp, err = net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { f.udp.Close() })
	// Unix socket sentinels on the host: one by path (in a folder beside the workdir), one
	// abstract (abstract names belong to the network namespace).
	f.unixPath = filepath.Join(base, "sockets", "gateway.sock")
	f.unixAbstract = fmt.Sprintf("capsulegate-escape-%d", os.Getpid())
	if err := os.Mkdir(filepath.Dir(f.unixPath), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{f.unixPath, "@" + f.unixAbstract} {
		l, err := net.Listen("unix", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.top.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				f.unixHits.Add(1)
				c.Close()
			}
		}()
	}
	s.top.Setenv("ESCAPE_HOST_SECRET", hostSecret) // in the gateway's environment, never in a tool's
	sb, err := shell.New(shell.Config{Workdir: f.work, Records: records, Env: []string{"LANG=C"},
		Allow: []string{"bash", "python3"}, ProxyAddr: n.proxyAddr, DNSAddr: n.dnsAddr, MinTier: shell.TierSealed})
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { sb.Close() })
	f.sb = sb
	s.sb = f
	return f
}

// escaped reports what changed outside the workdir or reached a sentinel listener.
func (f *sandboxFixture) escaped() string {
	var out []string
	for _, p := range []string{filepath.Join(f.outside, "existing.txt"), filepath.Join(f.outside, "other.txt"), filepath.Join(f.home, ".ssh", "id_ed25519")} {
		if b, err := os.ReadFile(p); err != nil || string(b) != secret {
			out = append(out, p+" changed")
		}
	}
	if n := f.unixHits.Load(); n != 0 {
		out = append(out, fmt.Sprintf("a host unix socket accepted %d connections", n))
	}
	for dir, n := range map[string]int{f.outside: 2, f.home: 1, filepath.Dir(f.work): 5} {
		if ents, _ := os.ReadDir(dir); len(ents) != n {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			out = append(out, dir+" now holds "+strings.Join(names, ", "))
		}
	}
	if st, err := os.Stat(filepath.Join(f.work, "myid")); err == nil && st.Mode()&os.ModeSetuid != 0 {
		out = append(out, "a set-uid file in the workdir")
	}
	if datagramQueued(f.udp) {
		out = append(out, "the host's loopback UDP listener got a datagram")
	}
	return strings.Join(out, "; ")
}

// datagramQueued says whether pc holds a datagram. One sent to host loopback would be
// queued already: loopback delivers at once. (A deadline already past would fail the
// read before looking, hence a short one.)
func datagramQueued(pc net.PacketConn) bool {
	pc.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
	_, _, err := pc.ReadFrom(make([]byte, 64))
	return err == nil
}

// placeholders in commands: the fixture's paths, the sentinel ports, the gateway's pid.
func (s *suite) expand(cmd string) string {
	f, n := s.sb, s.net
	_, udpPort, _ := net.SplitHostPort(f.udp.LocalAddr().String())
	return strings.NewReplacer("{home}", f.home, "{outside}", f.outside, "{outsidebase}", filepath.Base(f.outside),
		"{sentinel}", n.sentinelPort, "{udp}", udpPort, "{gateway}", strconv.Itoa(os.Getpid()),
		"{tool}", filepath.Dir(f.native), "{unixpath}", f.unixPath, "{abstract}", f.unixAbstract).Replace(cmd)
}

// shellClass names how a command ended: its exit status, and the error it printed when
// known ("exit 1 EACCES").
func shellClass(code int, output string) string {
	class := "exit " + strconv.Itoa(code)
	if code == 0 {
		return class
	}
	// Network phrases first: "Address family not supported" is no ENOTSUP.
	for _, e := range append([]struct{ text, name string }{
		{"Connection refused", "ECONNREFUSED"},
		{"Network is unreachable", "ENETUNREACH"},
		{"No such process", "ESRCH"},
		{"Address family not supported", "EAFNOSUPPORT"},
		{"Function not implemented", "ENOSYS"},
		{"Too many open files", "EMFILE"},
		{"MemoryError", "MemoryError"},
		{"The requested URL returned error: 403", "HTTP 403"},
		{"Could not resolve", "no DNS answer"},
	}, errnoNames...) {
		if strings.Contains(output, e.text) {
			return class + " " + e.name
		}
	}
	return class
}

// shellAttack runs cmd with bash in the sandbox.
func shellAttack(cmd string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f, n := s.sandbox(t), s.net
		hits := n.sentinelHits.Load()
		in, _ := json.Marshal(map[string]string{"command": s.expand(cmd)})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := f.sb.RunShell(ctx, "bash", in)
		if err != nil {
			t.Fatal(err)
		}
		escaped := join(leaked(r.Text), f.escaped())
		if got := n.sentinelHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the sentinel server was reached %d times", got-hits))
		}
		return outcome{class: shellClass(r.ExitCode, r.Text), escaped: escaped}
	}
}

func shellRows() []row {
	cases := []struct{ attack, cmd, want string }{
		{"read /etc/shadow", "cat /etc/shadow", "exit 1 EACCES"},
		{"read a key in a home beside the workdir", "cat {home}/.ssh/id_ed25519", "exit 1 ENOENT"},
		{"list the home beside the workdir", "ls {home}", "exit 2 ENOENT"},
		{"read /etc/shadow through /proc/self/root", "cat /proc/self/root/etc/shadow", "exit 1 EACCES"},
		{"read the key through /proc/self/root", "cat /proc/self/root{home}/.ssh/id_ed25519", "exit 1 ENOENT"},
		{"read through a planted symlink to the key", "cat key-link", "exit 1 ENOENT"},
		{"read through a planted symlink to the key's folder", "cat ssh-dir/id_ed25519", "exit 1 ENOENT"},
		{"write through a planted symlink out", "echo pwned > write-link", "exit 1 ENOENT"},
		{"read outside by ../ from the workdir", "cat ../{outsidebase}/other.txt", "exit 1 ENOENT"},
		{"write a new file outside", "echo pwned > {outside}/new.txt", "exit 1 ENOENT"},
		{"append to a file outside", "echo pwned >> {outside}/existing.txt", "exit 1 ENOENT"},
		{"make a folder outside", "mkdir {outside}/d", "exit 1 ENOENT"},
		{"write a system folder", "echo pwned > /usr/pwned", "exit 1 EROFS"},
		{"append to /etc/hosts", "echo pwned >> /etc/hosts", "exit 1 EACCES"},
		{"hard-link a file outside into the workdir", "ln {outside}/other.txt mine && cat mine", "exit 1 ENOENT"},
		{"symlink a file outside into the workdir and read it", "ln -s {outside}/other.txt s2 && cat s2", "exit 1 ENOENT"},
		{"make a device node", "mknod null2 c 1 3", "exit 1 EACCES"},
		{"make a set-uid binary", "cp /usr/bin/id myid && chmod u+s myid && stat -c %A myid | grep -q s", "exit 1 EPERM"},
		{"signal the gateway process", "kill -9 {gateway}", "exit 1 ESRCH"},
		{"read the gateway's environment through /proc", "cat /proc/{gateway}/environ", "exit 1 ENOENT"},
		{"find a host variable in the environment", "env | grep ESCAPE_HOST_SECRET", "exit 1"},
		{"mount a filesystem", "mount -t tmpfs none /tmp", "exit 32 EACCES"},
		{"chroot out", "/usr/sbin/chroot / /bin/true", "exit 125 EPERM"},
		{"write a kernel setting", "echo 1 > /proc/sys/kernel/sysrq", "exit 1 ENOENT"},
		{"reach the sentinel server directly, around the proxy", "curl -sS -m 5 --noproxy '*' http://127.0.0.1:{sentinel}/", "exit 7"},
		{"reach the sentinel server through the proxy", "curl -sS -f -m 10 http://127.0.0.1:{sentinel}/", "exit 22 HTTP 403"},
		{"reach the metadata address through the proxy", "curl -sS -f -m 10 http://169.254.169.254/latest/meta-data/", "exit 22 HTTP 403"},
		{"connect to host loopback by TCP", `python3 -c "import socket; socket.create_connection(('127.0.0.1', {sentinel}), timeout=5)"`, "exit 1 ECONNREFUSED"},
		{"send UDP to host loopback", `python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {udp}))"; exit 3`, "exit 3"},
		{"send DNS straight to a public resolver", `python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))"`, "exit 1 ENETUNREACH"},
		{"resolve a name no rule allows", "getent hosts evil.example", "exit 2"},
		{"open a raw packet socket", `python3 -c "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)"`, "exit 1 EAFNOSUPPORT"},
		{"connect to a host unix socket by path", `python3 -c "import socket; socket.socket(socket.AF_UNIX).connect('{unixpath}')"`, "exit 1 ENOENT"},
		{"connect to a host abstract unix socket", `python3 -c "import socket; socket.socket(socket.AF_UNIX).connect('\0{abstract}')"`, "exit 1 ECONNREFUSED"},
		{"reopen the workdir's parent through /proc/self/cwd", "cat /proc/self/cwd/../{outsidebase}/other.txt", "exit 1 ENOENT"},
		{"use a descriptor inherited from the gateway (exit 3: none open)", `python3 -c "import os, sys; l=[os.readlink('/proc/self/fd/%d' % f) for f in range(3, 1024) if os.path.lexists('/proc/self/fd/%d' % f)]; print(l); sys.exit(0 if l else 3)"`, "exit 3"},
		{"open files without bound", `python3 -c "
import os
fs = []
while True: fs.append(os.open('/dev/null', os.O_RDONLY))"`, "exit 1 EMFILE"},
		{"allocate 8 GiB", `python3 -c "b = bytearray(8 << 30)"`, "exit 1 MemoryError"},
	}
	// Kernel interfaces seccomp keeps from tools, called raw through libc's syscall(2).
	// io_uring answers ENOSYS, so programs fall back to ordinary calls.
	for _, sc := range []string{"io_uring_setup", "userfaultfd", "bpf", "open_by_handle_at", "perf_event_open", "keyctl"} {
		want := "exit 1 EPERM"
		if sc == "io_uring_setup" {
			want = "exit 1 ENOSYS"
		}
		cases = append(cases, struct{ attack, cmd, want string }{"the " + sc + " system call", fmt.Sprintf(rawSyscall, sc), want})
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("SH-%02d", i+1), surface: Shell, attack: c.attack + ": " + c.cmd, want: c.want, need: needSealed, run: shellAttack(c.cmd)})
	}
	return rows
}

// rawSyscall calls the system call it names (%s) with zero arguments and fails with its
// errno.
const rawSyscall = `python3 -c "
import ctypes, os
nr = {'x86_64': {'io_uring_setup': 425, 'userfaultfd': 323, 'bpf': 321, 'open_by_handle_at': 304, 'perf_event_open': 298, 'keyctl': 250},
      'aarch64': {'io_uring_setup': 425, 'userfaultfd': 282, 'bpf': 280, 'open_by_handle_at': 265, 'perf_event_open': 241, 'keyctl': 219}}[os.uname().machine]['%s']
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(nr, 0, 0, 0, 0, 0) < 0:
    e = ctypes.get_errno()
    raise OSError(e, os.strerror(e))"`

// nativeTool is a native tool (a Python script, read by the sandbox's python3) that
// attempts the operation its input names and reports the errno it met.
const nativeTool = `#!/usr/bin/python3
import errno, json, os, signal, socket, sys
req = json.load(sys.stdin)
args = json.loads(req["data"])
op, arg = args["op"], args.get("arg", "")
try:
    if op == "read":
        data = open(arg).read()
    elif op == "write":
        open(arg, "w").write("pwned")
        data = "written"
    elif op == "connect":
        host, port = arg.rsplit(":", 1)
        socket.create_connection((host, int(port)), timeout=5)
        data = "connected"
    elif op == "kill":
        os.kill(int(arg), signal.SIGKILL)
        data = "killed"
    elif op == "exec":
        os.execv(arg, [arg])
    print(json.dumps({"status": "passed", "summary": "done", "data": data}))
except OSError as e:
    print(json.dumps({"status": "failed", "summary": errno.errorcode.get(e.errno, str(e))}))
`

// nativeAttack runs the native tool with {"op", "arg"}.
func nativeAttack(op, arg string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f, n := s.sandbox(t), s.net
		hits := n.sentinelHits.Load()
		in, _ := json.Marshal(map[string]string{"op": op, "arg": s.expand(arg)})
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := f.sb.RunNative(ctx, "hostile", f.native, in)
		if err != nil {
			t.Fatal(err)
		}
		escaped := join(leaked(r.Text), f.escaped())
		if got := n.sentinelHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the sentinel server was reached %d times", got-hits))
		}
		if b, _ := os.ReadFile(f.native); string(b) != nativeTool {
			escaped = join(escaped, "the tool rewrote its own binary")
		}
		class := "tool " + r.Status + " " + r.Metadata["summary"]
		if r.Status == "error" {
			class = "tool error: " + r.Text
		}
		return outcome{class: class, escaped: escaped}
	}
}

func nativeRows() []row {
	cases := []struct{ attack, op, arg, want string }{
		{"read a file outside the workdir", "read", "{outside}/other.txt", "tool failed ENOENT"},
		{"read a key in a home beside the workdir", "read", "{home}/.ssh/id_ed25519", "tool failed ENOENT"},
		{"read /etc/shadow", "read", "/etc/shadow", "tool failed EACCES"},
		{"write a file outside the workdir", "write", "{outside}/native.txt", "tool failed ENOENT"},
		{"write its own (read-only) folder", "write", "{tool}/scribble", "tool failed EROFS"},
		{"overwrite its own binary", "write", "{tool}/hostile", "tool failed EROFS"},
		{"connect to the sentinel server, around the proxy", "connect", "127.0.0.1:{sentinel}", "tool failed ECONNREFUSED"},
		{"connect to the metadata address", "connect", "169.254.169.254:80", "tool failed ENETUNREACH"},
		{"signal the gateway process", "kill", "{gateway}", "tool failed ESRCH"},
		{"read the gateway's environment through /proc", "read", "/proc/{gateway}/environ", "tool failed ENOENT"},
		{"execute a binary from outside its folder and the system's", "exec", "{outside}/other.txt", "tool failed ENOENT"},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("NA-%02d", i+1), surface: Native, attack: c.attack + ": " + c.op + " " + c.arg, want: c.want, need: needSealed, run: nativeAttack(c.op, c.arg)})
	}
	return rows
}
