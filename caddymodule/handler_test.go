package caddymodule

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// TestRunTaskFile runs the task.md of a capsule that takes no A2A tasks, once, as a
// task_md task; a capsule that takes tasks, or has no task.md, runs nothing.
func TestRunTaskFile(t *testing.T) {
	ctx := context.Background()
	reg := registry.NewLocal(t.TempDir())
	art := filepath.Join(t.TempDir(), "gatetool")
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: gatetool\nversion: 1.0.0\nruntime: tool\n"), 0o644)
	os.WriteFile(filepath.Join(art, "gatetool.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"), 0o644)
	data, _, err := registry.Pack(art)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Publish(ctx, data, ""); err != nil {
		t.Fatal(err)
	}
	e, err := runtime.New(ctx, wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	script := guestbuild.Wasm(t, "../internal/testkit/testguests/gateway")

	for _, tt := range []struct {
		name, acceptance, task string
		want                   string // "" = nothing runs
	}{
		{"none with task.md", "none", "from the file", "from the file (version 1.0.0)"},
		{"none without task.md", "none", "", ""},
		{"single ignores task.md", "single", "from the file", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: filed\nversion: 1.0.0\nartifacts:\n  - {name: gatetool, version: 1.0.0}\n"+
				"lifecycle: {task_acceptance: "+tt.acceptance+"}\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644)
			if tt.task != "" {
				os.WriteFile(filepath.Join(dir, "task.md"), []byte(tt.task), 0o644)
			}
			m, err := manifest.Load(filepath.Join(dir, "murmur.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			hosted, err := e.Serve(ctx, m, runtime.ServeOptions{Registry: reg, Session: runtime.SessionConfig{WorkRoot: t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			defer hosted.Close()
			done := runTaskFile(m, &version{hosted: hosted}, zap.NewNop())
			if tt.want == "" {
				if done != nil {
					t.Fatal("a task ran")
				}
				return
			}
			if done == nil {
				t.Fatal("task.md did not run")
			}
			out := <-done
			if out.State != runtime.StateCompleted || !strings.Contains(out.Result, tt.want) {
				t.Fatalf("outcome %+v", out)
			}
			trace, _ := os.ReadFile(filepath.Join(out.Layout.Root, "trace.jsonl"))
			if !strings.Contains(string(trace), `"source":"task_md"`) {
				t.Errorf("trace: %s", trace)
			}
			// No client takes a task.md run's answer: the operator reads it in the folder.
			if got, err := os.ReadFile(filepath.Join(out.Layout.Work, "out", "result.txt")); err != nil || !strings.Contains(string(got), tt.want) {
				t.Errorf("out/result.txt: %q, %v; want the answer", got, err)
			}
		})
	}
}
