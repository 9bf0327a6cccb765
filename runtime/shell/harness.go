package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// HarnessSpec is a long-running command of the sandbox whose output is read as it comes: a
// process transport's harness CLI (docs/reference/process-drivers.md).
type HarnessSpec struct {
	// Path is the binary's absolute path; Args its argv, Args[0] the name it runs as.
	Path string
	Args []string
	// Env is added to the sandbox's environment (a launch plan's env-set).
	Env []string
	// ReadOnly are folders (or files) the command may read and execute (the harness's
	// install, the paths it needs read-only).
	ReadOnly []string
	// ReadWrite are folders (or files) outside the workdir the command may also write:
	// the paths a harness needs read-write, granted by capabilities.harness.paths. They
	// are mounted like the workdir (docs/sandbox.md "How a command runs").
	ReadWrite []string
	// Stdin is written to the command's stdin once it starts; with KeepStdinOpen the
	// stdin stays open for Harness.WriteStdin, else it is closed after Stdin.
	Stdin         []byte
	KeepStdinOpen bool
	// Reach are host loopback addresses ("127.0.0.1:<port>") the command may connect to
	// at the same address in every tier — the run's credential gateway and tool bridge —
	// and which it reaches directly, never through the proxy. In sealed each is carried
	// through a socket of its own; in scoped Landlock lets its port through.
	Reach []string
}

// StderrTail is how much of a process's stderr its HarnessExit keeps, the end of it.
const StderrTail = 4 << 10

// Harness is a running HarnessSpec: read its stdout from Stdout until EOF, then Wait.
type Harness struct {
	// Stdout is the command's stdout as it is written.
	Stdout io.Reader
	c      *child
	outR   *os.File
	stdin  *os.File // nil once closed, or when there is none
	inMu   sync.Mutex
	stderr tail
	errW   sync.WaitGroup
	start  time.Time

	done   chan struct{}
	exit   HarnessExit
	killed string
	killMu sync.Mutex
}

// HarnessExit is how a Harness ended.
type HarnessExit struct {
	// Code is the exit code, or 128+signal when a signal ended it.
	Code int
	// Killed says why the gateway killed it ("" when it ended by itself).
	Killed     string
	StderrTail string
	Duration   time.Duration
}

// tail keeps the last StderrTail bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - StderrTail; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// Start runs spec in the sandbox, its stdout streamed to Harness.Stdout. ctx ending kills it
// (and everything it started). An error means the sandbox could not start it.
func (s *Sandbox) Start(ctx context.Context, spec HarnessSpec) (*Harness, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("shell: the sandbox is closed")
	}
	if len(spec.Args) == 0 {
		return nil, errors.New("shell: a command without argv[0]")
	}
	full := s.sessionSpec()
	full.Path, full.Args, full.ReadOnly, full.ReadWrite = spec.Path, spec.Args, spec.ReadOnly, spec.ReadWrite
	var bridges []*bridge
	closeBridges := func() {
		for _, b := range bridges {
			b.close()
		}
	}
	for _, addr := range spec.Reach {
		host, p, err := net.SplitHostPort(addr)
		port, perr := strconv.Atoi(p)
		if err != nil || perr != nil || host != "127.0.0.1" || port < 1 || port > 65535 {
			closeBridges()
			return nil, fmt.Errorf("shell: %q is not a 127.0.0.1 address a command may reach", addr)
		}
		full.Reach = append(full.Reach, port)
		if full.Tier == TierSealed {
			b, err := s.listenBridge(reachSocket(port), addr)
			if err != nil {
				closeBridges()
				return nil, err
			}
			bridges = append(bridges, b)
		}
	}
	extra := spec.Env
	if len(spec.Reach) > 0 {
		extra = append([]string{"NO_PROXY=127.0.0.1,localhost", "no_proxy=127.0.0.1,localhost"}, extra...)
	}
	full.Env = overrideEnv(full.Env, extra)
	outR, outW, err := os.Pipe()
	if err != nil {
		closeBridges()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		closeBridges()
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		errR.Close()
		errW.Close()
		closeBridges()
		return nil, err
	}
	var c *child
	w, err := prestart(s.wrapper, full, inR, outW, errW) // closes inR, outW, errW
	if err == nil {
		c, err = w.begin(command{Path: full.Path, Args: full.Args})
	}
	if err != nil {
		outR.Close()
		errR.Close()
		inW.Close()
		closeBridges()
		return nil, startErr(full, err)
	}
	p := &Harness{Stdout: outR, c: c, outR: outR, stdin: inW, start: time.Now(), done: make(chan struct{})}
	p.errW.Add(1)
	go func() {
		defer p.errW.Done()
		io.Copy(&p.stderr, errR)
		errR.Close()
	}()
	if len(spec.Stdin) > 0 {
		go func() {
			p.WriteStdin(spec.Stdin)
			if !spec.KeepStdinOpen {
				p.CloseStdin()
			}
		}()
	} else if !spec.KeepStdinOpen {
		p.CloseStdin()
	}
	go func() {
		select {
		case <-ctx.Done():
			p.Kill(ctx.Err().Error())
		case <-p.done:
		}
	}()
	go func() {
		p.wait(full)
		closeBridges()
	}()
	return p, nil
}

// overrideEnv is env with extra's variables set: an entry of env naming a variable extra
// sets is dropped, as the command's exec keeps the first of two entries of a name.
func overrideEnv(env, extra []string) []string {
	set := make(map[string]bool, len(extra))
	for _, kv := range extra {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// wait reaps the wrapper once it exits and records how the command ended.
func (p *Harness) wait(spec *runSpec) {
	p.c.waitExit()
	code, werr := p.c.reap()
	// Output pipes held by a process that escaped the group (possible outside sealed)
	// must not keep Stdout open: the reader ends a moment after the command.
	t := time.AfterFunc(2*time.Second, func() { p.outR.Close() })
	p.errW.Wait()
	t.Stop()
	setup := readSetup(p.c.setup)
	p.killMu.Lock()
	killed := p.killed
	p.killMu.Unlock()
	p.exit = HarnessExit{Code: code, Killed: killed, StderrTail: p.stderr.String(), Duration: time.Since(p.start)}
	switch {
	case setup != "":
		p.exit.Code, p.exit.StderrTail = 125, fmt.Sprintf("the sandbox (tier %s) could not start %s: %s", spec.Tier, spec.Args[0], setup)
	case werr != nil:
		p.exit.Code, p.exit.StderrTail = 125, werr.Error()
	}
	p.CloseStdin()
	close(p.done)
}

func readSetup(f *os.File) string {
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	f.Close()
	return string(b)
}

// WriteStdin writes b to the command's stdin; an error once it is closed or the command
// stopped reading.
func (p *Harness) WriteStdin(b []byte) error {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin == nil {
		return errors.New("shell: the command's stdin is closed")
	}
	_, err := p.stdin.Write(b)
	return err
}

// CloseStdin closes the command's stdin.
func (p *Harness) CloseStdin() {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
}

// Interrupt sends SIGINT to the command: the wrapper hands it on to the command
// (docs/sandbox.md "How a command runs").
func (p *Harness) Interrupt() error {
	select {
	case <-p.done:
		return errors.New("shell: the command has ended")
	default:
	}
	return p.c.signal(syscall.SIGINT)
}

// Kill kills the command and everything it started, recording why; the first reason
// stands.
func (p *Harness) Kill(why string) {
	p.killMu.Lock()
	if p.killed == "" {
		p.killed = why
	}
	p.killMu.Unlock()
	p.c.kill()
}

// Done is closed once the command has ended and Wait would not block.
func (p *Harness) Done() <-chan struct{} { return p.done }

// Wait returns how the command ended, once it has.
func (p *Harness) Wait() HarnessExit {
	<-p.done
	p.outR.Close() // read to its end by now (or abandoned): its descriptor is not kept
	return p.exit
}
