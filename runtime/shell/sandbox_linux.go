package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// wrapperUsed: on Linux every command starts through the wrapper.
const wrapperUsed = true

// pending is a wrapper started before its command: its runtime starts (and, sealed, its
// inner stage) while the gateway does other things; begin hands it the command.
type pending struct {
	cmd    *exec.Cmd
	p      *childPipes
	sealed bool
	next   chan command // the command for the spec writer; closed unsent: abandoned
}

// prestart starts the wrapper for a command of tier: the outer stage in fresh namespaces
// for the sealed tier, else the reaper stage, whose control pipe (fd 5) closing means
// "kill". The wrapper waits for its command on its spec pipe. prestart closes stdin
// (when not nil), stdout and stderr, the command's ends of its pipes.
func prestart(wrapper string, spec *runSpec, stdin, stdout, stderr *os.File) (*pending, error) {
	defer func() {
		for _, f := range []*os.File{stdin, stdout, stderr} {
			if f != nil {
				f.Close()
			}
		}
	}()
	sealed := spec.Tier == TierSealed
	p, err := openChildPipes(!sealed)
	if err != nil {
		return nil, err
	}
	stage, attr := wrapperStage(spec.Tier, spec.RootMode)
	cmd := &exec.Cmd{
		Path:        wrapper,
		Args:        []string{wrapperArg0},
		Env:         append(wrapperEnv(stage, spec.RootMode), cgroupVar(spec.Cgroups)...),
		Dir:         "/",
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  p.extra,
		SysProcAttr: attr,
	}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		p.closeAll()
		return nil, err
	}
	for _, f := range p.extra {
		f.Close()
	}
	w := &pending{cmd: cmd, p: p, sealed: sealed, next: make(chan command, 1)}
	session := *spec
	session.Path, session.Args = "", nil
	go func() {
		// A wrapper that died early is reported by its exit, or discarded unused.
		enc := json.NewEncoder(p.specW)
		if enc.Encode(&session) == nil {
			if c, ok := <-w.next; ok {
				enc.Encode(c)
			}
		}
		p.specW.Close()
	}()
	return w, nil
}

// alive reports whether the wrapper has not exited, without reaping it: one that died
// while waiting must not be handed a command (its exit would read as the tool's).
func (w *pending) alive() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, w.cmd.Process.Pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	return err == nil && info.Signo == 0
}

// begin sends the command to the wrapper; from here on it runs.
func (w *pending) begin(c command) (*child, error) {
	w.next <- c
	close(w.next)
	return newChild(w.cmd, w.p.setupR, w.p.ctlW, w.sealed), nil
}

// abandon kills a wrapper that never got its command and reaps it.
func (w *pending) abandon() {
	w.cmd.Process.Kill()
	close(w.next) // the spec writer closes the pipe
	if w.p.ctlW != nil {
		w.p.ctlW.Close()
	}
	w.cmd.Wait()
	w.p.setupR.Close()
}

// childPipes are the pipes between the gateway and a wrapper: the spec it reads (fd 3),
// the setup failures it reports (fd 4) and, outside sealed, the control pipe (fd 5).
type childPipes struct {
	specW, setupR, ctlW *os.File
	extra               []*os.File // the wrapper's ends, from fd 3 on
	all                 []*os.File // every end, for closing on failure
}

// openChildPipes opens the pipes of one wrapper, the control pipe only if control;
// on failure none is left open.
func openChildPipes(control bool) (*childPipes, error) {
	p := &childPipes{}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			p.all = append(p.all, r, w)
		}
		return r, w, err
	}
	specR, specW, err := pipe()
	if err != nil {
		return nil, err
	}
	setupR, setupW, err := pipe()
	if err != nil {
		p.closeAll()
		return nil, err
	}
	p.specW, p.setupR = specW, setupR
	p.extra = []*os.File{specR, setupW}
	if control {
		ctlR, ctlW, err := pipe()
		if err != nil {
			p.closeAll()
			return nil, err
		}
		p.ctlW = ctlW
		p.extra = append(p.extra, ctlR)
	}
	return p, nil
}

// closeAll closes both ends of every pipe opened.
func (p *childPipes) closeAll() {
	for _, f := range p.all {
		f.Close()
	}
}

// wrapperStage returns the stage the wrapper starts in and how it is cloned: the outer
// stage in fresh namespaces for sealed (with a user namespace of its own when the
// gateway is not root), else the reaper; either way in its own process group.
func wrapperStage(tier string, rootMode bool) (string, *syscall.SysProcAttr) {
	stage := stageReaper
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if tier == TierSealed {
		stage = stageOuter
		attr.Cloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
		if !rootMode {
			// Unprivileged: the outer stage is root of its own user namespace, mapped to us.
			attr.Cloneflags |= unix.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
			attr.GidMappingsEnableSetgroups = false
		}
	}
	return stage, attr
}

// newChild wraps the started wrapper cmd, reading setup failures from setup; ctlW is the
// reaper's control pipe (nil for sealed, where killing the outer stage is enough).
func newChild(cmd *exec.Cmd, setup, ctlW *os.File, sealed bool) *child {
	pid := cmd.Process.Pid
	c := &child{setup: setup, signal: cmd.Process.Signal}
	if sealed {
		// The outer stage is init of the sandbox's pid namespace: its death kills every
		// process in it, and the pidfd behind Process.Kill cannot hit a recycled pid.
		c.kill = func() { cmd.Process.Kill() }
	} else {
		var once sync.Once
		c.kill = func() {
			once.Do(func() {
				ctlW.Close()
				// A reaper that does not end is killed; what it leaves is then lost.
				time.AfterFunc(5*time.Second, func() { cmd.Process.Kill() })
			})
		}
	}
	c.waitExit = func() {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}
	c.reap = func() (int, error) {
		err := cmd.Wait()
		if ctlW != nil {
			c.kill() // closes the control pipe; the reaper is gone already
		}
		st := cmd.ProcessState
		if st == nil {
			return -1, err
		}
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return st.ExitCode(), nil
	}
	return c
}

// probeHost finds the strongest tier by trying it: a sealed or scoped run of `true` in
// workdir, with private as the sandbox's folder.
func probeHost(wrapper, workdir, private string) TierReport {
	r := TierReport{Landlock: landlockABI(), Seccomp: seccompAvailable()}
	var reasons []string
	if r.Landlock < 1 {
		reasons = append(reasons, "sealed and scoped: Landlock is not available (kernel built without CONFIG_SECURITY_LANDLOCK, or landlock missing from the lsm= boot parameter)")
	}
	if !r.Seccomp {
		reasons = append(reasons, "sealed and scoped: seccomp filters are not available on this kernel or architecture")
	}
	if r.Landlock >= 1 && r.Seccomp {
		if err := trial(wrapper, TierSealed, workdir, private); err != nil {
			reasons = append(reasons, "sealed: a trial run failed: "+err.Error())
		} else {
			r.Tier, r.Namespaces = TierSealed, true
			return r
		}
		if r.Landlock < 4 {
			reasons = append(reasons, fmt.Sprintf("scoped: Landlock ABI %d cannot confine TCP connections (ABI 4, Linux 6.7, can)", r.Landlock))
		} else if err := trial(wrapper, TierScoped, workdir, private); err != nil {
			reasons = append(reasons, "scoped: a trial run failed: "+err.Error())
		} else {
			r.Tier, r.Reasons = TierScoped, reasons
			return r
		}
	}
	r.Tier, r.Reasons = TierEnvOnly, reasons
	return r
}

// trial runs `true` in tier and reports why it did not succeed.
func trial(wrapper, tier, workdir, private string) error {
	path := lookPath("true")
	if path == "" {
		return errors.New("no `true` binary on " + sandboxPATH)
	}
	if err := os.MkdirAll(filepath.Join(private, "root"), 0o700); err != nil {
		return err
	}
	spec := &runSpec{Tier: tier, Path: path, Args: []string{"true"}, Workdir: workdir, Private: private,
		Limits: Limits{}.withDefaults(), RootMode: os.Geteuid() == 0}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := execSpec(ctx, wrapper, spec, nil, OutputCap, private)
	if err != nil {
		return err
	}
	defer out.cleanup()
	if out.killed != "" {
		return errors.New("timed out")
	}
	if out.exitCode != 0 {
		return fmt.Errorf("exit code %d: %s", out.exitCode, strings.TrimSpace(string(out.stderr.head)))
	}
	return nil
}
