package wasip2_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// guest is a .wat test module instantiated on a plain wazero runtime, its WASI 0.2
// imports served by one Host.
type guest struct {
	t   testing.TB
	h   *wasip2.Host
	mod api.Module
	ctx context.Context
}

func newGuest(t testing.TB, wat string, env wasip2.Env) *guest {
	t.Helper()
	bin := watbuild.Wasm(t, wat)
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	h := wasip2.New(env)
	t.Cleanup(func() { h.Close() })
	g := &guest{t: t, h: h, ctx: ctx}
	// The canon options are bound to the guest module, whoever the caller is (the
	// re-exported imports are called from Go).
	var b *wasip2.Binding
	bind := func(api.Module) wasip2.Binding {
		if b == nil {
			v := wasip2.GuestBinding(g.mod)
			b = &v
		}
		return *b
	}
	if err := h.DefineImports(ctx, rt, cm.ImportedFunctions(), bind); err != nil {
		t.Fatal(err)
	}
	if g.mod, err = rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("guest")); err != nil {
		t.Fatal(err)
	}
	return g
}

// call calls an export of the guest.
func (g *guest) call(name string, args ...uint64) ([]uint64, error) {
	return g.callCtx(g.ctx, name, args...)
}

func (g *guest) callCtx(ctx context.Context, name string, args ...uint64) ([]uint64, error) {
	g.t.Helper()
	f := g.mod.ExportedFunction(name)
	if f == nil {
		g.t.Fatalf("no export %s", name)
	}
	return f.Call(ctx, args...)
}

func (g *guest) must(name string, args ...uint64) []uint64 {
	g.t.Helper()
	res, err := g.call(name, args...)
	if err != nil {
		g.t.Fatalf("%s%v: %v", name, args, err)
	}
	return res
}

// handle calls a function returning a handle.
func (g *guest) handle(name string, args ...uint64) uint64 {
	g.t.Helper()
	return g.must(name, args...)[0]
}

func (g *guest) write(ptr uint32, b []byte) {
	g.t.Helper()
	if !g.mod.Memory().Write(ptr, b) {
		g.t.Fatalf("write at %d", ptr)
	}
}

func (g *guest) bytes(ptr, n uint32) []byte {
	g.t.Helper()
	b, ok := g.mod.Memory().Read(ptr, n)
	if !ok {
		g.t.Fatalf("read %d at %d", n, ptr)
	}
	return append([]byte(nil), b...)
}

func (g *guest) u8(ptr uint32) byte    { return g.bytes(ptr, 1)[0] }
func (g *guest) u32(ptr uint32) uint32 { return binary.LittleEndian.Uint32(g.bytes(ptr, 4)) }
func (g *guest) u64(ptr uint32) uint64 { return binary.LittleEndian.Uint64(g.bytes(ptr, 8)) }

// list reads a (ptr, len) pair at p as bytes.
func (g *guest) list(p uint32) []byte { return g.bytes(g.u32(p), g.u32(p+4)) }

// str writes s at ptr and returns (ptr, len) as flat arguments.
func (g *guest) str(ptr uint32, s string) (uint64, uint64) {
	g.write(ptr, []byte(s))
	return uint64(ptr), uint64(len(s))
}

// wantTrap checks err is a trap carrying code.
func wantTrap(t testing.TB, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no trap; want %s", code)
	}
	if errs.Find(err, code) == nil {
		t.Fatalf("trap %v; want code %s", err, code)
	}
}

const (
	ret  = 8       // the return area the tests use
	data = 0x10000 // where the tests put lists and strings
)
