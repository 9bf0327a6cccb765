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
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	specR, specW, err := pipe()
	if err != nil {
		return nil, err
	}
	setupR, setupW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	sealed := spec.Tier == TierSealed
	stage := stageReaper
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	extra := []*os.File{specR, setupW}
	var ctlW *os.File
	if sealed {
		stage = stageOuter
		attr.Cloneflags = unix.CLONE_NEWNS | unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS
		if !spec.RootMode {
			// Unprivileged: the outer stage is root of its own user namespace, mapped to us.
			attr.Cloneflags |= unix.CLONE_NEWUSER
			attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
			attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
			attr.GidMappingsEnableSetgroups = false
		}
	} else {
		var ctlR *os.File
		if ctlR, ctlW, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
		extra = append(extra, ctlR)
	}
	cmd := &exec.Cmd{
		Path:        wrapper,
		Args:        []string{wrapperArg0},
		Env:         wrapperEnv(stage),
		Dir:         "/",
		Stdout:      stdout,
		Stderr:      stderr,
		ExtraFiles:  extra,
		SysProcAttr: attr,
	}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	for _, f := range extra {
		f.Close()
	}
	go func() {
		json.NewEncoder(specW).Encode(spec) // a wrapper that died early is reported by its exit
		specW.Close()
	}()
	pid := cmd.Process.Pid
	c := &child{setup: setupR}
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
	return c, nil
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
