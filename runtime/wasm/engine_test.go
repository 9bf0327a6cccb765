package wasm

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
)

// hostile is one module exporting a function per kind of failure, plus one that works.
var hostile = wasmtest.Module{
	Imports: []wasmtest.Import{{Module: "wasi_snapshot_preview1", Name: "proc_exit", Params: []byte{wasmtest.I32}}},
	Funcs: []wasmtest.Func{
		{Export: "spin", Body: wasmtest.Spin},
		{Export: "trap", Body: wasmtest.Trap},
		{Export: "grow", Body: wasmtest.GrowUntilRefused},
		{Export: "exit", Body: wasmtest.CallImport(0, 3)},
		{Export: "ok", Body: wasmtest.Nop},
	},
	MemoryPages: 1,
}

func newEngine(t testing.TB, opts ...EngineOption) (*Engine, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := NewEngine(context.Background(), append(opts, WithMetrics(reg))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, reg
}

func callExport(ctx context.Context, e *Engine, mod *Module, g Grants, name string) error {
	return e.Call(ctx, mod, g, func(ctx context.Context, inst *Instance) error {
		_, err := inst.ExportedFunction(name).Call(ctx)
		return err
	})
}

// TestFailuresAreClassified: each failure ends in its reason, counts once, and the next
// call on the same engine succeeds.
func TestFailuresAreClassified(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := e.Compile(ctx, "cap", "hostile", manifest.RoleTool, hostile.Encode())
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 300 * time.Millisecond
	g := Grants{MemoryBytes: 4 << 20, Deadline: deadline}
	tests := []struct{ export, reason string }{
		{"spin", ReasonDeadline},
		{"trap", ReasonTrap},
		{"grow", ReasonMemoryLimit},
		{"exit", ReasonExit},
	}
	for _, tt := range tests {
		t.Run(tt.export, func(t *testing.T) {
			start := time.Now()
			err := callExport(ctx, e, mod, g, tt.export)
			elapsed := time.Since(start)
			var ge *GuestError
			if !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("want reason %s, got %v", tt.reason, err)
			}
			if errs.Code(err) != CodeGuest || !strings.Contains(err.Error(), "hostile") {
				t.Errorf("error lacks code or artifact: %v", err)
			}
			if elapsed > deadline+time.Second {
				t.Errorf("took %v, over deadline + 1s", elapsed)
			}
			if got := testutil.ToFloat64(e.metrics.Traps.WithLabelValues("cap", "hostile", "tool", tt.reason)); got != 1 {
				t.Errorf("traps{reason=%s} = %v", tt.reason, got)
			}
			if err := callExport(ctx, e, mod, g, "ok"); err != nil {
				t.Fatalf("the next call failed: %v", err)
			}
		})
	}
	if got := testutil.ToFloat64(e.metrics.Calls.WithLabelValues("cap", "hostile", "tool", "ok")); got != float64(len(tests)) {
		t.Errorf("calls{status=ok} = %v", got)
	}
}

func TestMemoryFloorAndCompileErrors(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	big := wasmtest.Module{Funcs: []wasmtest.Func{{Export: "ok", Body: wasmtest.Nop}}, MemoryPages: 100}
	mod, err := e.Compile(ctx, "cap", "big", manifest.RoleTool, big.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if err := callExport(ctx, e, mod, Grants{MemoryBytes: 1 << 20}, "ok"); errs.Code(err) != CodeMemoryFloor {
		t.Fatalf("want %s, got %v", CodeMemoryFloor, err)
	}
	if err := callExport(ctx, e, mod, Grants{MemoryBytes: 100 * pageSize}, "ok"); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	if _, err := e.Compile(ctx, "cap", "junk", manifest.RoleTool, []byte("not wasm")); errs.Code(err) != CodeCompile || !strings.Contains(err.Error(), "junk") {
		t.Fatalf("want %s naming the artifact, got %v", CodeCompile, err)
	}
}

func TestCompilationCacheOnDisk(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		e, _ := newEngine(t, WithCacheDir(dir))
		if _, err := e.Compile(ctx, "cap", "hostile", manifest.RoleTool, hostile.Encode()); err != nil {
			t.Fatal(err)
		}
		e.Close(ctx)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) == 0 {
		t.Fatal("nothing cached on disk")
	}
}

func TestMetricsSurviveReRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	if a.Traps != b.Traps || a.Denied != b.Denied {
		t.Fatal("second registration did not reuse the collectors")
	}
}

func TestCheckWorld(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	fn := func(export string) wasmtest.Func { return wasmtest.Func{Export: export, Body: wasmtest.Nop} }
	imp := func(mod string) wasmtest.Import { return wasmtest.Import{Module: mod, Name: "f"} }
	tests := []struct {
		name  string
		world string
		m     wasmtest.Module
		code  string
		says  string
	}{
		{"tool", "tool", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@0.1.0#run"), fn("cabi_realloc")}}, "", ""},
		{"tool with its imports", "tool", wasmtest.Module{Imports: []wasmtest.Import{imp("murmur:task/task@0.1.0"), imp("murmur:stream/events@0.1.0"), imp("capsulegate:http/outgoing@0.1.0")},
			Funcs: []wasmtest.Func{fn("murmur:tool/run@0.1.0#run")}}, "", ""},
		{"script", ScriptWorld, wasmtest.Module{Imports: []wasmtest.Import{imp("murmur:tool-registry/invoke@0.1.0")}, Funcs: []wasmtest.Func{fn("murmur:capsule/run@0.1.0#run")}}, "", ""},
		{"tool 0.2.0", "tool", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@0.2.0#run"), fn("cabi_realloc")}}, "", ""},
		{"tool of a later 0.1 patch", "tool", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@0.1.4#run")}}, "", ""},
		{"driver 0.2.0", "driver", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@0.2.0#run")}}, "", ""},
		{"unserved version", "tool", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@0.3.0#run")}}, CodeExportVersion, "serves murmur:tool/run 0.1.x and 0.2.x"},
		{"unserved major", "tool", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:tool/run@1.0.0#run")}}, CodeExportVersion, "version 1.0.0 of murmur:tool/run"},
		{"unserved script version", ScriptWorld, wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:capsule/run@0.2.0#run")}}, CodeExportVersion, "serves murmur:capsule/run 0.1.x)"},
		{"no run export", "driver", wasmtest.Module{Funcs: []wasmtest.Func{fn("cabi_realloc")}}, CodeExport, "murmur:tool/run"},
		{"import not in the world", "driver", wasmtest.Module{Imports: []wasmtest.Import{imp("murmur:task/task@0.1.0")}, Funcs: []wasmtest.Func{fn("murmur:tool/run@0.1.0#run")}}, CodeImport, "not offered to a driver"},
		{"import not served", "tool", wasmtest.Module{Imports: []wasmtest.Import{imp("murmur:task/task@9.9.9")}, Funcs: []wasmtest.Func{fn("murmur:tool/run@0.1.0#run")}}, CodeImport, "not served"},
		{"hook exporting no lifecycle function", "hook", wasmtest.Module{Funcs: []wasmtest.Func{fn("x")}}, CodeHookExport, "exports no function of murmur:hook/lifecycle"},
		{"hook of an unserved version", "hook", wasmtest.Module{Funcs: []wasmtest.Func{fn("murmur:hook/lifecycle@0.8.0#on-tool-call")}}, CodeExportVersion, "serves murmur:hook/lifecycle 0.9.x"},
		{"hook importing a host interface", "hook", wasmtest.Module{Imports: []wasmtest.Import{imp("murmur:stream/events@0.1.0")}, Funcs: []wasmtest.Func{fn("murmur:hook/lifecycle@0.9.0#on-tool-call")}}, CodeImport, "not offered to a hook"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mod, err := e.Compile(ctx, "cap", "a", manifest.RoleTool, tt.m.Encode())
			if err != nil {
				t.Fatal(err)
			}
			err = mod.CheckWorld(tt.world)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if mod.RunExport(tt.world) == "" {
					t.Error("no run export found")
				}
				return
			}
			if errs.Find(err, tt.code) == nil || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("want %s saying %q, got %v", tt.code, tt.says, err)
			}
		})
	}
}

// deref reads an optional string of a tool result.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
