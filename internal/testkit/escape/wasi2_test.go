package escape

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// WASI 0.2 handle rows drive the wasip2 host directly, as a component's lowered imports
// reach it: the wasip2 package's own .wat test modules re-export every import, so a row
// can hand the host any handle and pointer a hostile component could. Each row gets a
// fresh host; a refusal must be a trap carrying its E-WASI2 code, after which the host
// still serves a well-formed call.

const (
	w2IO   = "../../../runtime/wasm/wasip2/testdata/io.wat"
	w2FS   = "../../../runtime/wasm/wasip2/testdata/fs.wat"
	w2Ret  = 8       // the return area
	w2Data = 0x10000 // where rows put strings and lists
)

// w2Guest is a .wat module on its own wazero runtime with a wasip2 host.
type w2Guest struct {
	t   *testing.T
	h   *wasip2.Host
	mod api.Module
}

func newW2Guest(t *testing.T, wat string, env wasip2.Env) *w2Guest {
	bin := watbuild.Wasm(t, wat)
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, bin)
	if err != nil {
		t.Fatal(err)
	}
	g := &w2Guest{t: t, h: wasip2.New(env)}
	t.Cleanup(func() { g.h.Close() })
	var b *wasip2.Binding
	// The canonical options are the guest's memory and realloc, bound once it exists.
	bind := func(api.Module) wasip2.Binding {
		if b == nil {
			v := wasip2.GuestBinding(g.mod)
			b = &v
		}
		return *b
	}
	if err := g.h.DefineImports(ctx, rt, cm.ImportedFunctions(), bind); err != nil {
		t.Fatal(err)
	}
	if g.mod, err = rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("guest")); err != nil {
		t.Fatal(err)
	}
	return g
}

func (g *w2Guest) call(name string, args ...uint64) ([]uint64, error) {
	f := g.mod.ExportedFunction(name)
	if f == nil {
		g.t.Fatalf("no export %s", name)
	}
	return f.Call(context.Background(), args...)
}

func (g *w2Guest) must(name string, args ...uint64) uint64 {
	res, err := g.call(name, args...)
	if err != nil {
		g.t.Fatalf("%s%v: %v", name, args, err)
	}
	if len(res) > 0 {
		return res[0]
	}
	return 0
}

func (g *w2Guest) write(ptr uint32, b []byte) {
	if !g.mod.Memory().Write(ptr, b) {
		g.t.Fatalf("write at %d", ptr)
	}
}

func (g *w2Guest) u8(ptr uint32) byte {
	b, _ := g.mod.Memory().ReadByte(ptr)
	return b
}

func (g *w2Guest) u32(ptr uint32) uint32 {
	v, _ := g.mod.Memory().ReadUint32Le(ptr)
	return v
}

func (g *w2Guest) str(s string) (uint64, uint64) {
	g.write(w2Data, []byte(s))
	return w2Data, uint64(len(s))
}

// trapClass names a host refusal: its E-WASI2 code, "+abi" when it also matches
// abi.ErrABI (the engine then classifies the call as reason abi).
func trapClass(err error) string {
	if err == nil {
		return "no trap"
	}
	c := errs.Code(err)
	if c == "" {
		return "trap without a code: " + err.Error()
	}
	if errors.Is(err, abi.ErrABI) {
		c += " abi"
	}
	return c
}

// ioAttack runs attack on a fresh io.wat guest; the host must trap, and then still
// answer check-write on a live stdout. An attack the host served instead of refusing
// is an escape (a forged, dropped or mistyped handle used, a bound crossed), and so is
// a handle table left past its bound.
func ioAttack(attack func(g *w2Guest) error) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		g := newW2Guest(t, w2IO, wasip2.Env{MaxHandles: 64})
		err := attack(g)
		class := trapClass(err)
		var escaped string
		if err == nil {
			escaped = "the host served the attack instead of refusing it"
		}
		if n := g.h.Handles(); n > 64 {
			escaped = join(escaped, fmt.Sprintf("%d handles live past the bound of 64", n))
		}
		so := g.must("get-stdout")
		g.must("check-write", so, w2Ret)
		if g.u8(w2Ret) != 0 {
			t.Errorf("the host no longer serves check-write after the refusal")
		}
		return outcome{class: class, escaped: escaped}
	}
}

// fsAttack2 runs attack on a fresh fs.wat guest whose only preopen is the suite's
// workdir, handing it the preopen's handle; nothing outside the workdir may change.
func fsAttack2(attack func(g *w2Guest, dir uint64, f *hostFiles) string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.hostFiles(t)
		gfs, err := guestfs.New(f.work)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { gfs.Close() })
		g := newW2Guest(t, w2FS, wasip2.Env{FS: gfs})
		g.must("get-directories", w2Ret)
		list, n := g.u32(w2Ret), g.u32(w2Ret+4)
		if n != 1 {
			t.Fatalf("%d preopens", n)
		}
		class := attack(g, uint64(g.u32(list)), f)
		return outcome{class: class, escaped: f.escaped()}
	}
}

// openAt opens path below dir for reading and names the outcome: "opened" or
// "error-code <n>" (wasi:filesystem's error-code case).
func openAt(g *w2Guest, dir uint64, path string, write bool) string {
	p, n := g.str(path)
	openFlags, descFlags := uint64(0), uint64(1) // read
	if write {
		openFlags, descFlags = 1, 2 // create, write
	}
	g.must("open-at", dir, 1, p, n, openFlags, descFlags, w2Ret)
	if g.u8(w2Ret) == 0 {
		return "opened"
	}
	return fmt.Sprintf("error-code %d", g.u8(w2Ret+4))
}

// wasi:filesystem error-code cases the rows expect.
const (
	ecNotPermitted = "error-code 31"
)

func wasi2HandleRows() []row {
	io := func(id, attack, want string, f func(g *w2Guest) error) row {
		return row{id: id, surface: WASI2Handle, attack: attack, want: want, run: ioAttack(f)}
	}
	rows := []row{
		io("W2-01", "check-write on a forged stream handle (999)", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			_, err := g.call("check-write", 999, w2Ret)
			return err
		}),
		io("W2-02", "write through handle 0", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			_, err := g.call("write", 0, w2Data, 1, w2Ret)
			return err
		}),
		io("W2-03", "use a stream handle after dropping it", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			h := g.must("get-stdout")
			g.must("drop-output-stream", h)
			_, err := g.call("check-write", h, w2Ret)
			return err
		}),
		io("W2-04", "drop a stream handle twice", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			h := g.must("get-stdout")
			g.must("drop-output-stream", h)
			_, err := g.call("drop-output-stream", h)
			return err
		}),
		io("W2-05", "use an input stream as an output stream", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			_, err := g.call("check-write", g.must("get-stdin"), w2Ret)
			return err
		}),
		io("W2-06", "drop an output stream as an input stream", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			_, err := g.call("drop-input-stream", g.must("get-stdout"))
			return err
		}),
		io("W2-07", "drop a stream while its pollable lives", wasip2.CodeChildren+" abi", func(g *w2Guest) error {
			so := g.must("get-stdout")
			g.must("output-subscribe", so)
			_, err := g.call("drop-output-stream", so)
			return err
		}),
		io("W2-08", "poll a list holding a forged pollable", wasip2.CodeHandle+" abi", func(g *w2Guest) error {
			pl := g.must("subscribe-duration", 1)
			g.write(w2Data, []byte{byte(pl), 0, 0, 0, 0xff, 0xff, 0, 0})
			_, err := g.call("poll", w2Data, 2, w2Ret)
			return err
		}),
		io("W2-09", "poll a list of 2^30 pollables", wasip2.CodePoll, func(g *w2Guest) error {
			_, err := g.call("poll", w2Data, 1<<30, w2Ret)
			return err
		}),
		io("W2-10", "poll an empty list", wasip2.CodePoll, func(g *w2Guest) error {
			_, err := g.call("poll", w2Data, 0, w2Ret)
			return err
		}),
		io("W2-11", "write a list past the end of memory", wasip2.CodeABI+" abi", func(g *w2Guest) error {
			_, err := g.call("write", g.must("get-stdout"), 0xFFFFFFF0, 0x20, w2Ret)
			return err
		}),
		io("W2-12", "write a list whose length overflows", wasip2.CodeABI+" abi", func(g *w2Guest) error {
			_, err := g.call("write", g.must("get-stdout"), w2Data, 0xFFFFFFFF, w2Ret)
			return err
		}),
		io("W2-13", "a return area past the end of memory", wasip2.CodeABI+" abi", func(g *w2Guest) error {
			_, err := g.call("check-write", g.must("get-stdout"), 0xFFFFFFF8)
			return err
		}),
		io("W2-14", "a misaligned return area", wasip2.CodeABI+" abi", func(g *w2Guest) error {
			_, err := g.call("check-write", g.must("get-stdout"), 9)
			return err
		}),
		io("W2-15", "write more than check-write granted", wasip2.CodeStream, func(g *w2Guest) error {
			_, err := g.call("write", g.must("get-stdout"), w2Data, wasip2.DefaultMaxWrite+1, w2Ret)
			return err
		}),
		io("W2-16", "write-zeroes of 2^40 bytes", wasip2.CodeStream, func(g *w2Guest) error {
			_, err := g.call("write-zeroes", g.must("get-stdout"), 1<<40, w2Ret)
			return err
		}),
		io("W2-17", "subscribe without end to exhaust the host's handle table", wasip2.CodeLimit, func(g *w2Guest) error {
			_, err := g.call("flood")
			if n := g.h.Handles(); n > 64 {
				return fmt.Errorf("%d handles live past the bound of 64", n)
			}
			// Free the table again (a wrong handle just traps), so the host can be seen
			// serving the next call.
			for h := range uint64(256) {
				g.call("drop-pollable", h)
			}
			return err
		}),
	}
	fs := func(id, attack, want string, f func(g *w2Guest, dir uint64, hf *hostFiles) string) row {
		return row{id: id, surface: WASI2Handle, attack: attack, want: want, run: fsAttack2(f)}
	}
	return append(rows,
		fs("W2-20", "stat a forged descriptor handle (4242)", wasip2.CodeHandle+" abi", func(g *w2Guest, _ uint64, _ *hostFiles) string {
			_, err := g.call("stat", 4242, w2Ret)
			return trapClass(err)
		}),
		fs("W2-21", "open-at with a path pointer past memory", wasip2.CodeABI+" abi", func(g *w2Guest, dir uint64, _ *hostFiles) string {
			_, err := g.call("open-at", dir, 0, 0xFFFFFFF0, 100, 0, 1, w2Ret)
			return trapClass(err)
		}),
		fs("W2-22", "open-at a stream handle as a descriptor", wasip2.CodeHandle+" abi", func(g *w2Guest, dir uint64, _ *hostFiles) string {
			p, n := g.str("x")
			_, err := g.call("open-at", dir+100, 1, p, n, 0, 1, w2Ret)
			return trapClass(err)
		}),
		fs("W2-23", "open-at ../outside/secret.txt from the preopen", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "../outside/secret.txt", false)
		}),
		fs("W2-24", "open-at the secret's absolute host path", ecNotPermitted, func(g *w2Guest, dir uint64, f *hostFiles) string {
			return openAt(g, dir, filepath.Join(f.outside, "secret.txt"), false)
		}),
		fs("W2-25", "open-at through a planted absolute link", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "secretlink", false)
		}),
		fs("W2-26", "open-at through a planted folder link", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "link/secret.txt", false)
		}),
		fs("W2-27", "open-at sub/../../ climbing out after a name", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "sub/../../outside/secret.txt", false)
		}),
		fs("W2-28", "create a file outside by ../", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "../outside/created.txt", true)
		}),
		fs("W2-29", "create through a dangling planted link", ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			return openAt(g, dir, "dangling", true)
		}),
		fs("W2-30", "create-directory-at ../made outside", "refused "+ecNotPermitted, func(g *w2Guest, dir uint64, _ *hostFiles) string {
			p, n := g.str("../made")
			g.must("create-directory-at", dir, p, n, w2Ret)
			if g.u8(w2Ret) == 0 {
				return "created"
			}
			return fmt.Sprintf("refused error-code %d", g.u8(w2Ret+1))
		}),
	)
}

// w2ComponentRows attack the same host through the engine's component path: the
// hand-written component internal/testkit/testguests/hostile-w2 (a murmur tool importing
// wasi:io/streams and wasi:cli/stdout), compiled by murmur.Compile and called with
// murmur.CallTool as the gateway calls a tool, hands the lowered imports forged, dropped
// and out-of-bounds handles and pointers. Each call must end classified, move only its
// reason's trap counter, and leave the module answering the next well-formed call.
func w2ComponentRows() []row {
	cases := []struct{ input, attack, want string }{
		{"f", "write to a forged stream handle (0x7777)", "E-RUN-003 abi E-WASI2-002"},
		{"z", "write through handle 0", "E-RUN-003 abi E-WASI2-002"},
		{"u", "write to its stdout stream after dropping it", "E-RUN-003 abi E-WASI2-002"},
		{"d", "drop its stdout stream twice", "E-RUN-003 abi E-WASI2-002"},
		{"p", "write a list lying past the end of memory", "E-RUN-003 abi E-WASI2-007"},
		{"l", "write a list 2 GiB long", "E-RUN-003 abi E-WASI2-007"},
		{"r", "write with a return area past the end of memory", "E-RUN-003 abi E-WASI2-007"},
		{"n", "take its stdout stream 2,000,000 times, dropping none", "E-RUN-003 trap E-WASI2-003"},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("W2-%02d", 40+i), surface: WASI2Handle, attack: "a component through the engine: " + c.attack,
			want: c.want, run: trapAttackOn(hostileW2, false, c.input, nil, 0, 0)})
	}
	return rows
}

// hostileW2 is the hostile-w2 component compiled once as a tool.
func hostileW2(t *testing.T, s *suite) *wasm.Module {
	const key = "hostile-w2.wat/tool"
	if m := s.mods[key]; m != nil {
		return m
	}
	bin := watbuild.Wasm(t, "../testguests/hostile-w2/hostile-w2.wat")
	mod, err := murmur.Compile(context.Background(), s.wasmEngine(t), capsuleName, "hostile-w2", manifest.RoleTool, bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := murmur.CheckWorld(mod, string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	s.mods[key] = mod
	return mod
}
