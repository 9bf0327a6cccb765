//go:build !linux

package shell

import (
	"os"
	"os/exec"
)

// Outside Linux there is no wrapper: tools run directly, in the env-only tier.

func wrapperMain(string) int { return 125 }

func probeHost(string, string, string) TierReport {
	return TierReport{Tier: TierEnvOnly, Reasons: []string{"sealed and scoped: need Linux (namespaces, Landlock, seccomp)"}}
}

func startChild(_ string, spec *runSpec, stdin, stdout, stderr *os.File) (*child, error) {
	setupR, setupW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	setupW.Close()
	cmd := &exec.Cmd{Path: spec.Path, Args: spec.Args, Env: spec.Env, Dir: spec.Workdir, Stdout: stdout, Stderr: stderr}
	if stdin != nil {
		cmd.Stdin = stdin
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
		waitExit: func() { <-done },
		reap:     func() (int, error) { <-done; return code, werr },
	}, nil
}
