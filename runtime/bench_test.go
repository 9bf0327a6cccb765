package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Benchmarks of one guest module, internal/testkit/testguests/benchtool (a Go tool guest that
// uppercases its input). Compare with bench/ (wasmtime-go, a separate module because it
// needs cgo): run both with the same -benchtime in one sitting; see bench/README.md.

const benchInput = "hello, capsulegate: uppercase me"

func benchToolWasm(b *testing.B) []byte {
	b.Helper()
	return guestbuild.Wasm(b, "../internal/testkit/testguests/benchtool")
}

func checkBenchResult(b *testing.B, data *string, md [][2]string) {
	if data == nil || *data != strings.ToUpper(benchInput) || len(md) != 1 || md[0] != [2]string{"len", fmt.Sprint(len(benchInput))} {
		b.Fatalf("unexpected result: data %v metadata %v", data, md)
	}
}

// BenchmarkRawWazeroCall is the floor: wazero with the engine's compiler configuration
// and a warm compilation cache, WASI, and per op a fresh instance, _initialize, the
// tool-input lowered with wit/abi, run, the result lifted, close.
func BenchmarkRawWazeroCall(b *testing.B) {
	ctx := context.Background()
	wasm := benchToolWasm(b)
	cache, err := wazero.NewCompilationCacheWithDir(filepath.Join(b.TempDir(), "cache"))
	if err != nil {
		b.Fatal(err)
	}
	defer cache.Close(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().
		WithCompilationCache(cache).WithCloseOnContextDone(true))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions()
	data := benchInput
	in := abi.ToolInput{Data: &data}.Value()

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m, err := rt.InstantiateModule(ctx, compiled, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := m.ExportedFunction(abi.ExportInitialize).Call(ctx); err != nil {
			b.Fatal(err)
		}
		realloc := m.ExportedFunction(abi.ExportRealloc)
		flat, err := abi.ToolRun01.LowerParams(ctx, m.Memory(), func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error) {
			res, err := realloc.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
			if err != nil {
				return 0, err
			}
			return api.DecodeU32(res[0]), nil
		}, []any{in})
		if err != nil {
			b.Fatal(err)
		}
		res, err := m.ExportedFunction(abi.ExportToolRun01).Call(ctx, flat...)
		if err != nil {
			b.Fatal(err)
		}
		vals, err := abi.ToolRun01.LiftResults(m.Memory(), res)
		if err != nil {
			b.Fatal(err)
		}
		out, err := abi.ToToolResult(vals[0])
		if err != nil {
			b.Fatal(err)
		}
		checkBenchResult(b, out.Data, out.Metadata)
		m.Close(ctx)
	}
}

// BenchmarkToolCall is the product's full call: the guest environment built from the
// manifest's policy, a guestfs root, the memory limit and deadline, a fresh instance,
// the canonical ABI both ways, cabi_post, classification and metrics.
// "snapshot" starts a fresh instance from the init snapshot in every call
// (wasm.WithoutInstanceReuse); "initialize" runs _initialize in every call
// (wasm.WithoutInitSnapshots); "reuse" resets a warm instance to what a fresh one from the
// snapshot would be instead of instantiating (the default).
func BenchmarkToolCall(b *testing.B) {
	b.Run("snapshot", func(b *testing.B) { benchToolCall(b, wasm.WithoutInstanceReuse()) })
	b.Run("initialize", func(b *testing.B) { benchToolCall(b, wasm.WithoutInitSnapshots()) })
	b.Run("reuse", func(b *testing.B) { benchToolCall(b) })
}

func benchToolCall(b *testing.B, opts ...wasm.EngineOption) {
	ctx := context.Background()
	code := benchToolWasm(b)
	e, err := wasm.NewEngine(ctx, append([]wasm.EngineOption{murmur.Install(), wasm.WithCacheDir(filepath.Join(b.TempDir(), "cache")), wasm.WithMetrics(prometheus.NewRegistry())}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	mod, err := murmur.Compile(ctx, e, "bench", "benchtool", manifest.RoleTool, code)
	if err != nil {
		b.Fatal(err)
	}
	if err := murmur.CheckWorld(mod, string(manifest.RoleTool)); err != nil {
		b.Fatal(err)
	}
	work := b.TempDir()
	gfs, err := guestfs.New(work)
	if err != nil {
		b.Fatal(err)
	}
	defer gfs.Close()
	m := &manifest.Manifest{Name: "bench", Version: "1.0.0"}
	m.Capabilities.Env.Allow = []string{"LANG", "TZ", "AWS_SECRET_ACCESS_KEY"}
	hostEnv := map[string]string{"LANG": "C.UTF-8", "AWS_SECRET_ACCESS_KEY": "x"}
	lookup := func(k string) (string, bool) { v, ok := hostEnv[k]; return v, ok }
	own := RuntimeEnv(m, "ses_bench", "http://127.0.0.1:8080/capsules/bench")
	host := &murmur.Imports{Who: "benchtool"}
	data := benchInput
	in := abi.ToolInput{Data: &data}

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		g := wasm.Grants{
			FS:          gfs,
			Env:         GuestEnv(m, lookup, own),
			MemoryBytes: manifest.DefaultMemoryBytes,
			Deadline:    30 * time.Second,
		}
		out, err := murmur.CallTool(ctx, e, mod, g, host, in)
		if err != nil {
			b.Fatal(err)
		}
		checkBenchResult(b, out.Data, out.Metadata)
	}
}

// publishBenchTool packs and publishes a wasm tool artifact into reg.
func publishBenchTool(b *testing.B, reg *registry.Local, name string, wasm []byte) {
	b.Helper()
	dir := filepath.Join(b.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	art := fmt.Sprintf("name: %s\nversion: 1.0.0\nruntime: tool\ndescription: bench tool %s\n", name, name)
	if err := os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(art), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".wasm"), wasm, 0o644); err != nil {
		b.Fatal(err)
	}
	data, _, err := registry.Pack(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := reg.Publish(context.Background(), data, ""); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStageThreeArtifacts stages a script capsule naming three wasm tool artifacts
// (three different Go guests, about 2.5 MB each) from a local registry, on a warm compilation
// cache: per op, verify against the lock, read each archive, compile (a cache hit) and
// check its world and memory floor. "engine" reuses the engine (a config reload);
// "restart" starts a new engine on the warm on-disk cache per op (a process restart,
// the engine's start included).
func BenchmarkStageThreeArtifacts(b *testing.B) {
	ctx := context.Background()
	reg := registry.NewLocal(filepath.Join(b.TempDir(), "reg"))
	for _, name := range []string{"benchtool", "echo", "imports"} {
		publishBenchTool(b, reg, name, guestbuild.Wasm(b, "../internal/testkit/testguests/"+name))
	}
	dir := b.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	mf := "name: bench\nversion: 1.0.0\nartifacts:\n" +
		"  - {name: benchtool, version: 1.0.0}\n  - {name: echo, version: 1.0.0}\n  - {name: imports, version: 1.0.0}\n"
	if err := os.WriteFile(mpath, []byte(mf), 0o644); err != nil {
		b.Fatal(err)
	}
	// A script capsule: its own (tiny) module beside the manifest.
	script := wasmtest.Module{Imports: []wasmtest.Import{{Module: abi.ModuleRegistry, Name: abi.ImportInvoke}},
		Funcs: []wasmtest.Func{{Export: abi.ExportCapsuleRun, Body: wasmtest.Nop}}}.Encode()
	if err := os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644); err != nil {
		b.Fatal(err)
	}
	m, err := manifest.Load(mpath)
	if err != nil {
		b.Fatal(err)
	}
	cacheDir := filepath.Join(b.TempDir(), "cache")
	stage := func(r *Runtime) {
		s, err := r.Stage(ctx, m, StageOptions{Registry: reg})
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Modules) != 3 {
			b.Fatalf("staged %d modules, want 3", len(s.Modules))
		}
	}
	newEngine := func() *Runtime {
		e, err := New(ctx, wasm.WithCacheDir(cacheDir))
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	// Warm the on-disk cache and write the lock.
	warm := newEngine()
	stage(warm)
	warm.Close(ctx)

	b.Run("engine", func(b *testing.B) {
		e := newEngine()
		defer e.Close(ctx)
		stage(e)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			stage(e)
		}
	})
	b.Run("restart", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			e := newEngine()
			stage(e)
			e.Close(ctx)
		}
	})
	// "new-engine" is the stage alone on a freshly started engine (warm on-disk cache):
	// the restart case without the engine's own start.
	b.Run("new-engine", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			e := newEngine()
			b.StartTimer()
			stage(e)
			b.StopTimer()
			e.Close(ctx)
			b.StartTimer()
		}
	})
}
