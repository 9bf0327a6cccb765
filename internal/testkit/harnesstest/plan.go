package harnesstest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// TestKey stands for the run's placeholder key, which the runtime puts where
// {gateway_key} is in a plan.
const TestKey = "capsulegate-placeholder-test"

// Plan makes a launch plan runnable as the runtime would: its files written into
// filesDir, and {files_dir}, {gateway_url} (gatewayURL) and {gateway_key} (TestKey)
// replaced in its arguments, variables and file contents.
func Plan(t testing.TB, plan process.LaunchPlan, filesDir, gatewayURL string) (args, env []string) {
	t.Helper()
	sub := strings.NewReplacer("{files_dir}", filesDir, "{gateway_url}", gatewayURL, "{gateway_key}", TestKey)
	for _, f := range plan.Files {
		path := filepath.Join(filesDir, f.Name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sub.Replace(f.Contents)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range plan.Args {
		args = append(args, sub.Replace(a))
	}
	for _, kv := range plan.EnvSet {
		env = append(env, kv[0]+"="+sub.Replace(kv[1]))
	}
	return args, env
}

// Interrupt starts bin with args and env against a provider that never finishes its
// answer, sends SIGINT once the request is in, and returns what the harness printed and
// the exit status classify-exit is given for it.
func Interrupt(t *testing.T, bin string, args, env []string, sp *Provider) (Result, process.ExitStatus) {
	t.Helper()
	r := Start(t, t.TempDir(), bin, args, env)
	<-sp.Requested()
	if err := r.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	res := r.Wait()
	x := process.ExitStatus{StderrTail: res.Stderr, Interrupted: true}
	var exit *exec.ExitError
	if errors.As(res.Err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig := int32(ws.Signal())
			x.Signal = &sig
		} else {
			code := int32(exit.ExitCode())
			x.Code = &code
		}
	} else if res.Err == nil {
		code := int32(0)
		x.Code = &code
	}
	return res, x
}

// StageTable checks a shipped driver's stage: the capsule stages with its install
// folder, or a folder above it, granted, and is refused E-PRC-009 without.
func StageTable(t *testing.T, pkgDir, installPath string) {
	tests := []struct {
		name, caps string
		want       []string
	}{
		{"install folder granted", "  harness: {paths: [{path: " + installPath + "}]}\n", nil},
		{"a folder above it granted", "  harness: {paths: [{path: " + filepath.Dir(installPath) + "}]}\n", nil},
		{"nothing granted", "  harness: {paths: [{path: /opt}]}\n", []string{runtime.CodeProcessPath}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := StageCodes(t, pkgDir, tt.caps); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("codes %v, want %v", got, tt.want)
			}
		})
	}
}
