package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// TestRunOnceScriptCapsule runs the test script capsule end to end: stage from a
// registry, a session workdir, the script invoking the echo wasm tool, the result file.
func TestRunOnceScriptCapsule(t *testing.T) {
	ctx := context.Background()
	e, _ := newEngine(t, WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero")))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testguests/echo"))
	script := guestbuild.Wasm(t, "../internal/testguests/script")

	tests := []struct {
		name       string
		tool       string // TESTGUEST_TOOL on the host
		wantStatus string
		wantResult string
	}{
		{"completes", "", StateCompleted, "hello"},
		{"undeclared tool fails the task", "nope", StateFailed, `no wasm tool named "nope" is declared`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte("name: scripted\nversion: 1.0.0\nartifacts:\n  - {name: echo, version: 1.0.0}\ncapabilities:\n  env: {allow: [TESTGUEST_TOOL]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 60}\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644)
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			workRoot := t.TempDir()
			lookup := func(k string) (string, bool) {
				if k == "TESTGUEST_TOOL" && tt.tool != "" {
					return tt.tool, true
				}
				return "", false
			}
			res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, WorkRoot: workRoot, Task: "say hello", LookupEnv: lookup})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.wantStatus || !strings.Contains(res.Result, tt.wantResult) {
				t.Fatalf("result = %+v", res)
			}
			if !strings.HasPrefix(res.SessionID, "ses_") || res.Records != filepath.Join(workRoot, "scripted", res.SessionID) {
				t.Errorf("session = %+v", res)
			}
			onDisk, _ := os.ReadFile(filepath.Join(res.Workdir, "out", "result.txt"))
			if !strings.Contains(string(onDisk), tt.wantResult) {
				t.Errorf("out/result.txt = %q", onDisk)
			}
			if task, _ := os.ReadFile(filepath.Join(res.Workdir, "task.md")); string(task) != "say hello" {
				t.Errorf("task.md = %q", task)
			}
		})
	}
}
