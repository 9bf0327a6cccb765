package murmur

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// newEngine is an engine serving Murmur's imports, closed when t ends.
func newEngine(t testing.TB, opts ...wasm.EngineOption) (*wasm.Engine, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	e, err := wasm.NewEngine(context.Background(), append([]wasm.EngineOption{Install()}, append(opts, wasm.WithMetrics(reg))...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e, reg
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
			mod, err := Compile(ctx, e, "cap", "a", manifest.RoleTool, tt.m.Encode())
			if err != nil {
				t.Fatal(err)
			}
			err = CheckWorld(mod, tt.world)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if RunExport(mod, tt.world) == "" {
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
