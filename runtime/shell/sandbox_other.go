//go:build !linux

package shell

import (
	"os"
	"os/exec"
)

// Outside Linux there is no wrapper: tools run directly, in the env-only tier.
const wrapperUsed = false

func wrapperMain(string) int { return 125 }

func probeHost(string, string, string) TierReport {
	return TierReport{Tier: TierEnvOnly, Reasons: []string{"sealed and scoped: need Linux (namespaces, Landlock, seccomp)"}}
}

// pending holds what a command will start with: without a wrapper, nothing runs before
// the command is known.
type pending struct {
	spec                  runSpec
	stdin, stdout, stderr *os.File
}

// prestart keeps the command's ends of its pipes until begin or abandon closes them.
func prestart(_ string, spec *runSpec, stdin, stdout, stderr *os.File) (*pending, error) {
	return &pending{spec: *spec, stdin: stdin, stdout: stdout, stderr: stderr}, nil
}

// close closes the command's ends of its pipes.
func (w *pending) close() {
	for _, f := range []*os.File{w.stdin, w.stdout, w.stderr} {
		if f != nil {
			f.Close()
		}
	}
}

func (w *pending) alive() bool { return true }

func (w *pending) abandon() { w.close() }

func (w *pending) begin(c command) (*child, error) {
	defer w.close()
	spec := &w.spec
	spec.Path, spec.Args = c.Path, c.Args
	setupR, setupW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	setupW.Close()
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Workdir, Stdout: w.stdout, Stderr: w.stderr}
	if w.stdin != nil {
		cmd.Stdin = w.stdin
	}
	if err := cmd.Start(); err != nil {
		setupR.Close()
		return nil, err
	}
	done := make(chan struct{})
	var code int
	var werr error
	go func() {
		werr = cmd.Wait()
		if cmd.ProcessState != nil {
			code, werr = cmd.ProcessState.ExitCode(), nil
		}
		close(done)
	}()
	return &child{
		setup:    setupR,
		kill:     func() { cmd.Process.Kill() },
		signal:   cmd.Process.Signal,
		waitExit: func() { <-done },
		reap:     func() (int, error) { <-done; return code, werr },
	}, nil
}
