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

// startChild starts the wrapper for spec: the outer stage in fresh namespaces for the
// sealed tier, else the reaper stage, whose control pipe (fd 5) closing means "kill".
func startChild(wrapper string, spec *runSpec, stdin, stdout, stderr *os.File) (*child, error) {
	sealed := spec.Tier == TierSealed
	p, err := openChildPipes(!sealed)
	if err != nil {
		return nil, err
	}
	stage, attr := wrapperStage(spec)
	cmd := &exec.Cmd{
		Path:        wrapper,
		Args:        []string{wrapperArg0},
		Env:         wrapperEnv(stage),
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
	go func() {
		json.NewEncoder(p.specW).Encode(spec) // a wrapper that died early is reported by its exit
		p.specW.Close()
	}()
	return newChild(cmd, p.setupR, p.ctlW, sealed), nil
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
func wrapperStage(spec *runSpec) (string, *syscall.SysProcAttr) {
	stage := stageReaper
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if spec.Tier == TierSealed {
		stage = stageOuter
		attr.Cloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
		if !spec.RootMode {
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
	c := &child{setup: setup}
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
