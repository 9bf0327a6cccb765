//go:build !wasip1

package guest_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// The host side below is test scaffolding written by hand from the canonical ABI; the
// gateway's real host ABI lives in wit/abi.

const (
	toolRun     = "murmur:tool/run@0.1.0#run"
	toolPost    = "cabi_post_murmur:tool/run@0.1.0#run"
	capsuleRun  = "murmur:capsule/run@0.1.0#run"
	invokeMod   = "murmur:tool-registry/invoke@0.1.0"
	resultSize  = 52
	pairSize    = 16
	testguests  = "../../internal/testkit/testguests/"
	wantImports = "wasi_snapshot_preview1"
)

type toolResult struct {
	status                  byte
	summary, data, dataPath *string
	truncated               bool
	metadata                [][2]string
}

// newRuntime shares guestbuild's on-disk compilation cache: compiling a Go guest takes
// seconds, and much longer under -race.
func newRuntime(t *testing.T) (context.Context, wazero.Runtime) {
	t.Helper()
	ctx := context.Background()
	r := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(guestbuild.CompilationCache(t)))
	t.Cleanup(func() { r.Close(ctx) })
	wasi_snapshot_preview1.MustInstantiate(ctx, r)
	return ctx, r
}

// instantiate runs _initialize through wazero's start functions: Go c-shared modules
// need it before any export (they trap with "call _initialize first" otherwise).
func instantiate(t *testing.T, ctx context.Context, r wazero.Runtime, wasm []byte, cfg wazero.ModuleConfig) api.Module {
	t.Helper()
	m, err := r.InstantiateWithConfig(ctx, wasm, cfg.WithStartFunctions("_initialize"))
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return m
}

func call(t *testing.T, ctx context.Context, m api.Module, name string, args ...uint64) []uint64 {
	t.Helper()
	res, err := m.ExportedFunction(name).Call(ctx, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func guestAlloc(ctx context.Context, m api.Module, size, align uint32) uint32 {
	res, err := m.ExportedFunction("cabi_realloc").Call(ctx, 0, 0, uint64(align), uint64(size))
	if err != nil {
		panic(err)
	}
	return uint32(res[0])
}

// lowerString copies s into a fresh guest allocation and returns its flat (ptr, len).
func lowerString(ctx context.Context, m api.Module, s string) (uint32, uint32) {
	if s == "" {
		return 0, 0
	}
	p := guestAlloc(ctx, m, uint32(len(s)), 1)
	if !m.Memory().WriteString(p, s) {
		panic("write out of range")
	}
	return p, uint32(len(s))
}

func readString(t *testing.T, m api.Module, p, n uint32) string {
	t.Helper()
	b, ok := m.Memory().Read(p, n)
	if !ok {
		t.Fatalf("string (%#x, %d) out of range", p, n)
	}
	return string(b)
}

func readOpt(t *testing.T, m api.Module, b []byte) *string {
	t.Helper()
	switch b[0] {
	case 0:
		return nil
	case 1:
		s := readString(t, m, le(b[4:]), le(b[8:]))
		return &s
	}
	t.Fatalf("option discriminant %d", b[0])
	return nil
}

func le(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

func readToolResult(t *testing.T, m api.Module, ret uint32) toolResult {
	t.Helper()
	b, ok := m.Memory().Read(ret, resultSize)
	if !ok || ret%4 != 0 {
		t.Fatalf("return area %#x not in memory or misaligned", ret)
	}
	r := toolResult{status: b[0], summary: readOpt(t, m, b[4:]), data: readOpt(t, m, b[16:]),
		dataPath: readOpt(t, m, b[28:]), truncated: b[40] != 0}
	lp, ln := le(b[44:]), le(b[48:])
	list, ok := m.Memory().Read(lp, ln*pairSize)
	if !ok {
		t.Fatalf("metadata list out of range")
	}
	for i := uint32(0); i < ln; i++ {
		e := list[i*pairSize:]
		r.metadata = append(r.metadata, [2]string{readString(t, m, le(e), le(e[4:])), readString(t, m, le(e[8:]), le(e[12:]))})
	}
	return r
}

func imports(t *testing.T, ctx context.Context, r wazero.Runtime, wasm []byte) []string {
	t.Helper()
	cm, err := r.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		if mod != wantImports {
			out = append(out, mod+"#"+name)
		}
	}
	return out
}

// callTool lowers a tool-input, calls the tool export, lifts its result and posts it.
func callTool(t *testing.T, ctx context.Context, m api.Module, data *string) toolResult {
	t.Helper()
	var disc, p, n uint32
	if data != nil {
		disc = 1
		p, n = lowerString(ctx, m, *data)
	}
	lp, ln := lowerString(ctx, m, "/logs/x.log")
	ret := uint32(call(t, ctx, m, toolRun, uint64(disc), uint64(p), uint64(n), 1, uint64(lp), uint64(ln))[0])
	res := readToolResult(t, m, ret)
	call(t, ctx, m, toolPost, uint64(ret))
	return res
}

func TestEchoTool(t *testing.T) {
	t.Parallel()
	wasm := guestbuild.Wasm(t, testguests+"echo")
	ctx, r := newRuntime(t)
	if got := imports(t, ctx, r, wasm); len(got) != 0 {
		t.Errorf("echo imports %v beyond WASI; unused SDK imports must be dropped", got)
	}
	var stderr bytes.Buffer
	m := instantiate(t, ctx, r, wasm, wazero.NewModuleConfig().WithStderr(&stderr))

	run := func(data *string) toolResult { return callTool(t, ctx, m, data) }

	for _, in := range []string{"héllo wörld", "", strings.Repeat("x", 1<<20)} {
		res := run(&in)
		if res.status != 0 || res.summary == nil || *res.summary != "echo" || res.data == nil || *res.data != in ||
			res.dataPath != nil || res.truncated {
			t.Fatalf("echo(%.20q) = %+v", in, res)
		}
		if want := [][2]string{{"len", strconv.Itoa(len(in))}}; len(res.metadata) != 1 || res.metadata[0] != want[0] {
			t.Fatalf("metadata = %q, want %q", res.metadata, want)
		}
	}
	if res := run(nil); res.status != 0 || res.data != nil || res.metadata[0][1] != "0" {
		t.Fatalf("echo(none) = %+v", res)
	}
	// Many calls with garbage collection in between must not corrupt held results.
	for i := 0; i < 300; i++ {
		in := strings.Repeat("ab", i)
		if res := run(&in); res.data == nil || *res.data != in {
			t.Fatalf("call %d: data = %v", i, res.data)
		}
	}
	panicIn := "panic"
	res := run(&panicIn)
	if res.status != 2 || res.summary == nil || !strings.Contains(*res.summary, "panic: asked to") {
		t.Fatalf("panicking handler: %+v", res)
	}
}

// fakeInvoke serves murmur:tool-registry/invoke@0.1.0#invoke: the tool "echo" answers
// with its input data; any other name is err("no such tool: <name>").
func fakeInvoke(t *testing.T, calls *[]string) api.GoModuleFunc {
	return func(ctx context.Context, m api.Module, stack []uint64) {
		a := make([]uint32, 9)
		for i := range a {
			a[i] = uint32(stack[i])
		}
		name := readString(t, m, a[0], a[1])
		var data *string
		if a[2] == 1 {
			s := readString(t, m, a[3], a[4])
			data = &s
		}
		*calls = append(*calls, name+"("+derefOr(data, "<none>")+")")
		ret := a[8]
		area := make([]byte, 56)
		if name != "echo" {
			area[0] = 1
			p, n := lowerString(ctx, m, "no such tool: "+name)
			binary.LittleEndian.PutUint32(area[4:], p)
			binary.LittleEndian.PutUint32(area[8:], n)
		} else {
			// result ok at 0, tool-result at 4: status passed, summary none, data.
			if data != nil {
				area[4+16] = 1
				p, n := lowerString(ctx, m, *data)
				binary.LittleEndian.PutUint32(area[4+20:], p)
				binary.LittleEndian.PutUint32(area[4+24:], n)
			}
			list := guestAlloc(ctx, m, pairSize, 4)
			kp, kn := lowerString(ctx, m, "len")
			vp, vn := lowerString(ctx, m, strconv.Itoa(len(derefOr(data, ""))))
			e := binary.LittleEndian.AppendUint32(nil, kp)
			e = binary.LittleEndian.AppendUint32(e, kn)
			e = binary.LittleEndian.AppendUint32(e, vp)
			e = binary.LittleEndian.AppendUint32(e, vn)
			m.Memory().Write(list, e)
			binary.LittleEndian.PutUint32(area[4+44:], list)
			binary.LittleEndian.PutUint32(area[4+48:], 1)
		}
		if !m.Memory().Write(ret, area) {
			panic("return area out of range")
		}
	}
}

func derefOr(s *string, def string) string {
	if s == nil {
		return def
	}
	return *s
}

func runScript(t *testing.T, wasm []byte, invokeName string) (workdir, stderr string, calls []string, err error) {
	t.Helper()
	ctx, r := newRuntime(t)
	i32 := api.ValueTypeI32
	_, err = r.NewHostModuleBuilder(invokeMod).NewFunctionBuilder().
		WithGoModuleFunction(fakeInvoke(t, &calls), []api.ValueType{i32, i32, i32, i32, i32, i32, i32, i32, i32}, nil).
		Export("invoke").Instantiate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	workdir = t.TempDir()
	var errBuf bytes.Buffer
	cfg := wazero.NewModuleConfig().WithStderr(&errBuf).
		WithFSConfig(wazero.NewFSConfig().WithDirMount(workdir, "/")).
		WithEnv("TESTGUEST_TOOL", invokeName)
	m := instantiate(t, ctx, r, wasm, cfg)
	_, err = m.ExportedFunction(capsuleRun).Call(ctx)
	return workdir, errBuf.String(), calls, err
}

func TestScriptCapsule(t *testing.T) {
	t.Parallel()
	wasm := guestbuild.Wasm(t, testguests+"script")
	ctx, r := newRuntime(t)
	if got := imports(t, ctx, r, wasm); len(got) != 1 || got[0] != invokeMod+"#invoke" {
		t.Errorf("script imports %v beyond WASI, want only %s#invoke", got, invokeMod)
	}

	workdir, stderr, calls, err := runScript(t, wasm, "")
	if err != nil {
		t.Fatalf("run: %v\nstderr: %s", err, stderr)
	}
	if len(calls) != 1 || calls[0] != "echo(hello)" {
		t.Errorf("invoke calls = %q, want [echo(hello)]", calls)
	}
	got, err := os.ReadFile(filepath.Join(workdir, "out", "result.txt"))
	if err != nil || string(got) != "hello" {
		t.Fatalf("out/result.txt = %q, %v; want hello", got, err)
	}

	// An err from invoke reaches the guest as an error; the capsule traps with it.
	workdir, stderr, _, err = runScript(t, wasm, "missing")
	if err == nil || !strings.Contains(stderr, "capsule: no such tool: missing") {
		t.Fatalf("run with a missing tool: err %v, stderr %q", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(workdir, "out", "result.txt")); !os.IsNotExist(err) {
		t.Fatalf("result written despite the error: %v", err)
	}
}
