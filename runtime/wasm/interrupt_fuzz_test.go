package wasm

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Type indexes of generated modules.
const (
	tyRun   = 0 // (i32) -> i32: every generated function
	tyPair  = 1 // () -> (i32 i32): a multi-value block
	tyMerge = 2 // (i32 i32) -> i32: a block with parameters
	tyVoid  = 3 // () -> (): the start function
)

// modGen turns fuzz bytes into a valid module whose every run ends: loops count down
// from 1–4, a function calls only functions defined before it (directly or through the
// table), so the rewrite's result can be compared with the original's.
type modGen struct {
	src     []byte
	f       *gFunc
	callees []uint32 // what the current function may call directly
	reach   int      // table entries below reach may be called indirectly
	gA, gB  uint32   // mutable i32 and i64 globals
	gImp    int64    // imported immutable i32 global, -1 if none
	params  int      // of the current function: 1, or 0 in the start function
	budget  int
}

func (g *modGen) next(n int) int {
	if len(g.src) == 0 || n <= 0 {
		return 0
	}
	b := g.src[0]
	g.src = g.src[1:]
	return int(b) % n
}

func (g *modGen) local() int {
	g.f.locals = append(g.f.locals, tI32)
	return g.params + len(g.f.locals) - 1
}

// expr returns code pushing one i32.
func (g *modGen) expr(depth int) []byte {
	g.budget--
	if depth <= 0 || g.budget <= 0 {
		switch g.next(3) {
		case 0:
			return i32c(int32(g.next(256) - 128))
		case 1:
			if g.params == 0 {
				return i32c(int32(g.next(256)))
			}
			return op(0x20, 0) // the parameter
		default:
			if g.gImp >= 0 && g.next(2) == 0 {
				return op(0x23, int(g.gImp))
			}
			return op(0x23, int(g.gA))
		}
	}
	d := depth - 1
	switch g.next(16) {
	case 0: // binary operator; div_s and rem_u may trap
		ops := []byte{0x6a, 0x6b, 0x6c, 0x73, 0x71, 0x74, 0x77, 0x6d, 0x70, 0x4a}
		return cat(g.expr(d), g.expr(d), []byte{ops[g.next(len(ops))]})
	case 1: // direct call
		if len(g.callees) == 0 {
			return g.expr(0)
		}
		return cat(g.expr(d), op(0x10, int(g.callees[g.next(len(g.callees))])))
	case 2: // indirect call to an earlier function
		if g.reach == 0 {
			return g.expr(0)
		}
		return cat(g.expr(d), g.expr(d), i32c(int32(g.reach)), []byte{0x70}, op(0x11, tyRun, 0))
	case 3: // if with a result
		return cat(g.expr(d), []byte{0x04, tI32}, g.expr(d), []byte{0x05}, g.expr(d), []byte{0x0b})
	case 4: // multi-value block
		return cat([]byte{0x02, tyPair}, g.expr(d), g.expr(d), []byte{0x0b, 0x6b})
	case 5: // block with parameters, leaving by br_if
		return cat(g.expr(d), g.expr(d), []byte{0x02, tyMerge, 0x6a}, g.expr(d), op(0x0d, 0), []byte{0x0b})
	case 6: // br_table over three nested blocks
		tmp := g.local()
		return cat([]byte{0x02, 0x40, 0x02, 0x40, 0x02, 0x40}, g.expr(d), op(0x0e, 2, 0, 1, 2),
			[]byte{0x0b}, i32c(int32(g.next(100))), op(0x21, tmp), op(0x0c, 1),
			[]byte{0x0b}, i32c(int32(g.next(100))), op(0x21, tmp),
			[]byte{0x0b}, op(0x20, tmp))
	case 7: // counted loop with a parameter (i32 -> i32)
		c := g.local()
		return cat(g.expr(d), i32c(int32(1+g.next(4))), op(0x21, c),
			[]byte{0x03, tyRun}, g.expr(d), []byte{0x6a},
			op(0x20, c), i32c(1), []byte{0x6b}, op(0x22, c), op(0x0d, 0), []byte{0x0b})
	case 8: // counted loop of statements, then the global it changed
		c := g.local()
		return cat(i32c(int32(1+g.next(4))), op(0x21, c), []byte{0x03, 0x40}, g.stmt(d),
			op(0x20, c), i32c(1), []byte{0x6b}, op(0x22, c), op(0x0d, 0), []byte{0x0b}, op(0x23, int(g.gA)))
	case 9: // load
		return cat(g.expr(d), i32c(0xffc), []byte{0x71}, op(0x28, 2, 0))
	case 10: // select
		return cat(g.expr(d), g.expr(d), g.expr(d), []byte{0x1b})
	case 11: // a statement first
		return cat(g.stmt(d), g.expr(d))
	case 12: // i64 through the i64 global
		return cat(op(0x23, int(g.gB)), g.expr(d), []byte{0xac, 0x7c}, op(0x24, int(g.gB)), op(0x23, int(g.gB)), []byte{0xa7})
	case 13: // sign extension, a saturating truncation
		return cat(g.expr(d), []byte{0xc0, 0xb2}, op(0xfc, 0))
	case 14: // return early
		return cat(g.expr(d), []byte{0x04, 0x40}, g.expr(d), []byte{0x0f, 0x0b}, g.expr(d))
	default:
		return cat(g.expr(d), op(0x22, g.local()))
	}
}

// stmt returns code with no net effect on the stack.
func (g *modGen) stmt(depth int) []byte {
	switch g.next(5) {
	case 0:
		return cat(g.expr(depth), op(0x24, int(g.gA)))
	case 1: // store
		return cat(g.expr(depth), i32c(0xffc), []byte{0x71}, g.expr(depth), op(0x36, 2, 0))
	case 2: // trap on one value
		return cat(g.expr(depth), i32c(int32(g.next(8))), []byte{0x46, 0x04, 0x40, 0x00, 0x0b})
	case 3:
		return cat(g.expr(depth), []byte{0x1a})
	default:
		return cat(g.expr(depth), []byte{0x04, 0x40}, g.stmt(depth-1), []byte{0x05}, g.stmt(depth-1), []byte{0x0b})
	}
}

// generate builds a module from src.
func generate(src []byte) gModule {
	g := &modGen{src: src, gImp: -1}
	m := gModule{
		types:  []gType{{[]byte{tI32}, []byte{tI32}}, {nil, []byte{tI32, tI32}}, {[]byte{tI32, tI32}, []byte{tI32}}, {nil, nil}},
		memory: 1,
		start:  -1,
	}
	flags := g.next(256)
	var imported []uint32
	if flags&1 != 0 {
		m.imports = append(m.imports, gImport{module: "env", name: "f", kind: 0, typ: tyRun})
		imported = append(imported, 0)
	}
	nGlobals := 0
	if flags&2 != 0 {
		m.imports = append(m.imports, gImport{module: "env", name: "g", kind: 3, global: tI32})
		g.gImp, nGlobals = 0, 1
	}
	g.gA, g.gB = uint32(nGlobals), uint32(nGlobals+1)
	m.globals = []gGlobal{{tI32, true, int64(g.next(256))}, {tI64, true, -5}}
	m.noExport = flags&4 != 0
	base := uint32(len(imported))
	n := 1 + g.next(5)
	for i := range n {
		m.funcs = append(m.funcs, gFunc{typ: tyRun})
		g.f = &m.funcs[i]
		g.callees = append(append([]uint32(nil), imported...), m.table...)
		g.reach = len(m.table)
		g.budget, g.params = 40, 1
		g.f.body = append(g.expr(2+g.next(3)), 0x0b)
		m.table = append(m.table, base+uint32(i))
		if !m.noExport {
			m.exports = append(m.exports, gExport{fmt.Sprintf("f%d", i), 0, base + uint32(i)})
		}
	}
	if flags&8 != 0 { // a start function
		m.funcs = append(m.funcs, gFunc{typ: tyVoid})
		g.f = &m.funcs[len(m.funcs)-1]
		g.callees, g.reach, g.budget, g.params = nil, 0, 20, 0
		g.f.body = append(cat(g.stmt(2), i32c(int32(g.next(1000))), op(0x24, int(g.gA))), 0x0b)
		m.start = int64(base) + int64(len(m.funcs)-1)
	}
	if !m.noExport {
		m.exports = append(m.exports, gExport{"ga", 3, g.gA})
	}
	return m
}

// envModule is what generated modules import: f(x) = 3x+1 and g = 7.
var envModule = gModule{
	types:   []gType{{[]byte{tI32}, []byte{tI32}}},
	funcs:   []gFunc{{typ: 0, body: cat(op(0x20, 0), i32c(3), []byte{0x6c}, i32c(1), []byte{0x6a, 0x0b})}},
	globals: []gGlobal{{tI32, false, 7}},
	exports: []gExport{{"f", 0, 0}, {"g", 3, 0}},
	start:   -1,
}

var (
	fuzzRTOnce sync.Once
	fuzzRT     wazero.Runtime
)

// comparisonRuntime is one runtime, with env, for all comparisons of a process. It stops
// on a context's end itself, so a generated program slower than the time allowed is cut
// off in the original and the rewrite alike.
func comparisonRuntime(tb testing.TB) wazero.Runtime {
	fuzzRTOnce.Do(func() {
		ctx := context.Background()
		fuzzRT = wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true))
		if _, err := fuzzRT.InstantiateWithConfig(ctx, envModule.encode(), wazero.NewModuleConfig().WithName("env")); err != nil {
			panic(err)
		}
	})
	return fuzzRT
}

// outcome is what a run of a module showed: each exported function's results or trap, for
// each argument, then its exported globals and a hash of its memory.
type outcome []string

// runModule instantiates wasm, runs its start function if it was moved, and calls every
// exported function taking i32s with each argument in args. ok is false when the run
// took too long to compare.
func runModule(tb testing.TB, rt wazero.Runtime, wasm []byte, movedStart bool, args []uint64) (out outcome, ok bool) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		tb.Fatalf("compile: %v", err)
	}
	defer cm.Close(ctx)
	m, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		if ctx.Err() != nil {
			return nil, false
		}
		return outcome{"instantiate: trap"}, true
	}
	defer m.Close(context.Background())
	if movedStart {
		if _, err := m.ExportedFunction(startExport).Call(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, false
			}
			return outcome{"instantiate: trap"}, true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cm.ExportedFunctions())) {
		if strings.HasPrefix(name, "\x00capsulegate:") {
			continue // added by the rewrite
		}
		def := cm.ExportedFunctions()[name]
		params := def.ParamTypes()
		allI32 := true
		for _, p := range params {
			allI32 = allI32 && p == api.ValueTypeI32
		}
		if !allI32 || len(params) > 4 {
			continue
		}
		for _, a := range args {
			in := make([]uint64, len(params))
			for i := range in {
				in[i] = a
			}
			res, err := m.ExportedFunction(name).Call(ctx, in...)
			switch {
			case ctx.Err() != nil:
				return nil, false
			case err != nil:
				out = append(out, fmt.Sprintf("%s(%d): trap", name, a))
			default:
				out = append(out, fmt.Sprintf("%s(%d) = %v", name, a, res))
			}
		}
	}
	if g := m.ExportedGlobal("ga"); g != nil {
		out = append(out, fmt.Sprintf("ga = %d", g.Get()))
	}
	// Memory returns a typed nil when the module has none; the rewrite adds an empty one
	// to a module without memory.
	if mem := m.Memory(); mem != nil && !reflect.ValueOf(mem).IsNil() && mem.Size() > 0 {
		buf, _ := mem.Read(0, mem.Size())
		h := fnv.New64a()
		h.Write(buf)
		out = append(out, fmt.Sprintf("memory %x", h.Sum64()))
	}
	return out, true
}

// compareRewrite checks that the rewrite of wasm compiles and computes what wasm does.
func compareRewrite(t *testing.T, wasm []byte) {
	rt := comparisonRuntime(t)
	ctx := context.Background()
	if cm, err := rt.CompileModule(ctx, wasm); err != nil {
		t.Fatalf("the original does not compile: %v", err) // the generator's bug
	} else {
		cm.Close(ctx)
	}
	rewritten, moved, err := addInterrupts(wasm)
	if err != nil {
		t.Fatalf("rewrite: %v", err)
	}
	args := []uint64{0, 1, 5, 0xffffffff}
	want, ok := runModule(t, rt, wasm, false, args)
	if !ok {
		return
	}
	got, ok := runModule(t, rt, rewritten, moved, args)
	if !ok {
		t.Fatalf("the rewrite took too long where the original did not")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rewrite computes\n%v\nthe original\n%v", got, want)
	}
}

// FuzzInterruptRewrite generates valid modules (nested and multi-value blocks, loops with
// parameters, br_table, direct and indirect calls, imported functions and globals, a
// start function, memory, i64 and saturating operators) and checks that the interrupt
// rewrite of each compiles and computes the same results, traps, globals and memory.
func FuzzInterruptRewrite(f *testing.F) {
	f.Add([]byte{0xff, 7, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0x0b, 4, 2, 7, 7, 7, 8, 8, 8, 6, 6, 6, 5, 5, 5, 4, 4, 4})
	f.Add([]byte{0x00})
	f.Fuzz(func(t *testing.T, src []byte) {
		compareRewrite(t, generate(src).encode())
	})
}
