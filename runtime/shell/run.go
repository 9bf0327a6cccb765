package shell

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// runSpec is one command as the wrapper receives it (JSON on its fd 3): first without
// Path and Args, which follow as a command; a wrapper started ahead of its command
// prepares all that does not depend on them (sealed: the whole root) meanwhile. The
// inner stage receives it whole.
type runSpec struct {
	Tier      string
	Path      string   // absolute path of the binary to execute
	Args      []string // argv, argv[0] the tool's name
	Env       []string
	Workdir   string
	ReadOnly  []string // extra folders the tool may read and execute (a native tool's own)
	ReadWrite []string // extra folders (or files) the command may write, like the workdir (HarnessSpec.ReadWrite)
	Limits    Limits
	Private   string // records/sandbox-<id>: proxy.sock, dns.sock, root/
	Network   bool   // forward the proxy (and DNS, when DNS) into the sandbox
	DNS       bool
	ProxyPort int      // scoped: the only TCP port the tool may connect to
	Reach     []int    // host loopback ports a long-running command may connect to (HarnessSpec.Reach)
	Cgroups   []string // cgroup.procs files the wrapper joins before it starts anything
	RootMode  bool     // the gateway is root: sealed maps the tool to uid 65534, scoped narrows /etc
	Proc      bool     // set by the outer stage: a private /proc is mounted
	Resolv    string   // set by the outer stage: resolv.conf's real path when outside /etc
}

// command is what a runSpec's recipient learns last: what to execute.
type command struct {
	Path string
	Args []string
}

// outcome is what a finished command left behind.
type outcome struct {
	exitCode       int
	stdout, stderr capture
	duration       time.Duration
	killed         string // why the gateway killed it, "" when it ended by itself
}

func (o *outcome) cleanup() {
	o.stdout.cleanup()
	o.stderr.cleanup()
}

// execSpec runs spec through the wrapper and collects its output; an error means the
// sandbox failed, never the tool.
func execSpec(ctx context.Context, wrapper string, spec *runSpec, stdin []byte, stdoutCap int, spillDir string) (*outcome, error) {
	if err := ctx.Err(); err != nil {
		return &outcome{exitCode: -1, killed: err.Error()}, nil
	}
	l, err := newLaunch(wrapper, spec, stdin)
	if err != nil {
		return nil, startErr(spec, err)
	}
	return l.exec(ctx, spec, stdoutCap, spillDir)
}

// launch is a wrapper started ahead of its command, with the read ends of its output.
type launch struct {
	w          *pending
	outR, errR *os.File
}

// newLaunch starts a wrapper for commands of spec (Path and Args aside), with stdin as the
// command's input (nil: /dev/null); the wrapper prepares and waits for the command (exec).
func newLaunch(wrapper string, spec *runSpec, stdin []byte) (*launch, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	var inR *os.File
	if stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			return nil, err
		}
		inR = r
		go func() {
			w.Write(stdin) // a tool that does not read its input is not an error
			w.Close()
		}()
	}
	w, err := prestart(wrapper, spec, inR, outW, errW) // closes inR, outW, errW
	if err != nil {
		outR.Close()
		errR.Close()
		return nil, err
	}
	return &launch{w: w, outR: outR, errR: errR}, nil
}

// abandon ends a launch that will not run a command.
func (l *launch) abandon() {
	l.w.abandon()
	l.outR.Close()
	l.errR.Close()
}

// exec hands the command of spec, whose other fields must be those the launch was
// started with, to the launched wrapper and collects the command's output.
func (l *launch) exec(ctx context.Context, spec *runSpec, stdoutCap int, spillDir string) (*outcome, error) {
	o := &outcome{exitCode: -1, stdout: capture{limit: stdoutCap, dir: spillDir}, stderr: capture{limit: OutputCap, dir: spillDir}}
	outR, errR := l.outR, l.errR
	start := time.Now()
	c, err := l.w.begin(command{Path: spec.Path, Args: spec.Args})
	if err != nil {
		l.abandon()
		return nil, startErr(spec, err)
	}
	var wg sync.WaitGroup
	var setupMsg []byte
	wg.Add(3)
	go func() { io.Copy(&o.stdout, outR); wg.Done() }()
	go func() { io.Copy(&o.stderr, errR); wg.Done() }()
	go func() { setupMsg, _ = io.ReadAll(io.LimitReader(c.setup, 64<<10)); wg.Done() }()

	done, stopped := make(chan struct{}), make(chan struct{})
	var killed string
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
			killed = ctx.Err().Error()
			c.kill()
		case <-done:
		}
	}()
	c.waitExit()
	close(done)
	<-stopped
	code, werr := c.reap()
	// Everything of the command is dead now; a process that escaped the group (possible
	// outside sealed) must not hold the result hostage through an inherited pipe.
	t := time.AfterFunc(2*time.Second, func() { outR.Close(); errR.Close(); c.setup.Close() })
	wg.Wait()
	t.Stop()
	outR.Close()
	errR.Close()
	c.setup.Close()
	o.duration, o.killed = time.Since(start), killed
	if len(setupMsg) > 0 {
		o.cleanup()
		return nil, errs.New(CodeStart, part, fmt.Sprintf("the sandbox (tier %s) could not start %s: %s", spec.Tier, spec.Args[0], setupMsg),
			"see docs/sandbox.md for what each tier needs from the host")
	}
	if werr != nil {
		o.cleanup()
		return nil, startErr(spec, werr)
	}
	o.exitCode = code
	return o, nil
}

func startErr(spec *runSpec, err error) error {
	return errs.Wrap(err, CodeStart, part, fmt.Sprintf("the sandbox (tier %s) could not start %s", spec.Tier, spec.Args[0]),
		"see docs/sandbox.md for what each tier needs from the host")
}

// capture keeps the first limit bytes of a stream in memory and, once the stream
// passes the limit, all of it (up to maxFullLog) in a spill file outside the workdir.
type capture struct {
	limit    int
	dir      string
	head     []byte
	total    int64
	spill    *os.File
	spilled  int64
	spillErr error
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	taken := 0
	if room := c.limit - len(c.head); room > 0 {
		taken = min(room, len(p))
		c.head = append(c.head, p[:taken]...)
	}
	c.total += int64(n)
	if c.total <= int64(c.limit) || c.spillErr != nil {
		return n, nil
	}
	if c.spill == nil {
		c.spill, c.spillErr = os.CreateTemp(c.dir, "spill-")
		if c.spillErr != nil {
			return n, nil
		}
		c.save(c.head)
		p = p[taken:]
	}
	c.save(p)
	return n, nil
}

func (c *capture) save(p []byte) {
	if room := maxFullLog - c.spilled; int64(len(p)) > room {
		p = p[:room]
	}
	if len(p) == 0 || c.spillErr != nil {
		return
	}
	var n int
	n, c.spillErr = c.spill.Write(p)
	c.spilled += int64(n)
}

// cut reports whether the stream was longer than what the result keeps.
func (c *capture) cut() bool { return c.total > int64(c.limit) }

// writeAll writes the whole stream (or as much as was kept) to w.
func (c *capture) writeAll(w io.Writer) error {
	if c.spill == nil {
		_, err := w.Write(c.head)
		return err
	}
	if c.spillErr != nil {
		return c.spillErr
	}
	if _, err := c.spill.Seek(0, io.SeekStart); err != nil {
		return err
	}
	if _, err := io.Copy(w, c.spill); err != nil {
		return err
	}
	if c.total > c.spilled {
		_, err := fmt.Fprintf(w, "\n[log cut at %d of %d bytes]\n", c.spilled, c.total)
		return err
	}
	return nil
}

func (c *capture) cleanup() {
	if c.spill != nil {
		c.spill.Close()
		os.Remove(c.spill.Name())
		c.spill = nil
	}
}
