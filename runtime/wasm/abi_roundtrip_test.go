package wasm

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Round trips through internal/testkit/testguests/abiecho: the host lowers a value with
// wit/abi, the guest lifts it with its own implementation of the canonical ABI, lowers
// it back, and the host lifts the result, which must equal the value (floats by bits).

var (
	recType  = abi.Record(abi.F("a", abi.U32), abi.F("b", abi.String), abi.F("c", abi.OptionOf(abi.List(abi.U16))))
	abcType  = abi.VariantOf(abi.C("a", abi.U8), abi.C("b", abi.String), abi.C("c", nil))
	mixType  = abi.VariantOf(abi.C("i", abi.S64), abi.C("f", abi.Float32), abi.C("d", abi.Float64), abi.C("s", abi.String))
	flags10  = abi.Flags("f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9")
	manyArgs = []*abi.Type{abi.Bool, abi.U8, abi.U16, abi.U32, abi.U64, abi.S8, abi.S16, abi.S32, abi.S64,
		abi.Float32, abi.Float64, abi.Char, abi.String, abi.List(abi.U8), flags10, abi.OptionOf(abi.String), abcType}
)

// echoShape is one export of the abiecho guest.
type echoShape struct {
	name string // the export is "echo-" + name
	fn   *abi.Func
	many bool // parameters are manyArgs; the result is their tuple
}

func single(name string, t *abi.Type) echoShape {
	return echoShape{name: name, fn: abi.NewFunc([]*abi.Type{t}, []*abi.Type{t})}
}

var echoShapes = []echoShape{
	single("bool", abi.Bool),
	single("u8", abi.U8),
	single("u16", abi.U16),
	single("u32", abi.U32),
	single("u64", abi.U64),
	single("s8", abi.S8),
	single("s16", abi.S16),
	single("s32", abi.S32),
	single("s64", abi.S64),
	single("f32", abi.Float32),
	single("f64", abi.Float64),
	single("char", abi.Char),
	single("string", abi.String),
	single("list-u8", abi.List(abi.U8)),
	single("list-string", abi.List(abi.String)),
	single("rec", recType),
	single("list-rec", abi.List(recType)),
	single("tuple", abi.Tuple(abi.S64, abi.Float32, abi.Char)),
	single("option", abi.OptionOf(abi.String)),
	single("result", abi.ResultOf(abi.String, abi.U32)),
	single("enum", abi.Enum("red", "green", "blue")),
	single("variant", abcType),
	single("mix", mixType),
	single("flags", flags10),
	{name: "many", fn: abi.NewFunc(manyArgs, []*abi.Type{abi.Tuple(manyArgs...)}), many: true},
}

func (s echoShape) export() string { return "echo-" + s.name }

// args and want are the call's arguments and expected results for v: v itself for a
// single-parameter echo, v's elements (a []any of manyArgs) for echo-many.
func (s echoShape) args(v any) []any {
	if s.many {
		return v.([]any)
	}
	return []any{v}
}

// valueType is the type of one value of the shape.
func (s echoShape) valueType() *abi.Type {
	if s.many {
		return s.fn.Results()[0]
	}
	return s.fn.Params()[0]
}

// echoGuest is the abiecho module compiled on an engine.
type echoGuest struct {
	e   *Engine
	mod *Module
}

func newEchoGuest(tb testing.TB) *echoGuest {
	tb.Helper()
	wasm := guestbuild.Wasm(tb, "../../internal/testkit/testguests/abiecho")
	ctx := context.Background()
	e, err := NewEngine(ctx, WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(ctx) })
	mod, err := e.Compile(ctx, "abiecho", "abiecho", "tool", nil, wasm)
	if err != nil {
		tb.Fatal(err)
	}
	// The guest's core signatures must be exactly the flattening wit/abi computes.
	exports := mod.module.ExportedFunctions()
	for _, s := range echoShapes {
		def, ok := exports[s.export()]
		if !ok {
			tb.Fatalf("abiecho does not export %s", s.export())
		}
		params, results := s.fn.ExportSignature()
		if !bytes.Equal(def.ParamTypes(), valueTypes(params)) || !bytes.Equal(def.ResultTypes(), valueTypes(results)) {
			tb.Fatalf("%s: guest signature %v -> %v, wit/abi flattens to %v -> %v",
				s.export(), def.ParamTypes(), def.ResultTypes(), params, results)
		}
	}
	return &echoGuest{e: e, mod: mod}
}

// roundTrip lowers v into inst, calls the echo and lifts what it returned.
func roundTrip(ctx context.Context, inst api.Module, s echoShape, v any) ([]any, error) {
	flat, err := s.fn.LowerParams(ctx, inst.Memory(), guestRealloc(inst), s.args(v))
	if err != nil {
		return nil, fmt.Errorf("lower: %w", err)
	}
	res, err := inst.ExportedFunction(s.export()).Call(ctx, flat...)
	if err != nil {
		return nil, fmt.Errorf("call %s: %w", s.export(), err)
	}
	got, err := s.fn.LiftResults(inst.Memory(), res)
	if err != nil {
		return nil, fmt.Errorf("lift: %w", err)
	}
	return got, nil
}

// checkRoundTrip round-trips v and compares.
func checkRoundTrip(ctx context.Context, inst api.Module, s echoShape, v any, stderr *bytes.Buffer) error {
	got, err := roundTrip(ctx, inst, s, v)
	if err != nil {
		return fmt.Errorf("%v\nguest stderr: %s", err, stderr)
	}
	if len(got) != 1 {
		return fmt.Errorf("%d results, want 1", len(got))
	}
	if err := sameValue(s.valueType(), v, got[0], ""); err != nil {
		return fmt.Errorf("%s: %v", s.export(), err)
	}
	return nil
}

// sameValue compares two values of t in wit/abi's representation, floats by bits.
func sameValue(t *abi.Type, want, got any, path string) error {
	mismatch := func() error {
		return fmt.Errorf("at %q: sent %s, got back %s", path, brief(want), brief(got))
	}
	switch t.Kind() {
	case abi.KindF32:
		w, ok1 := want.(float32)
		g, ok2 := got.(float32)
		if !ok1 || !ok2 || math.Float32bits(w) != math.Float32bits(g) {
			return mismatch()
		}
		return nil
	case abi.KindF64:
		w, ok1 := want.(float64)
		g, ok2 := got.(float64)
		if !ok1 || !ok2 || math.Float64bits(w) != math.Float64bits(g) {
			return mismatch()
		}
		return nil
	case abi.KindList:
		if t.Elem().Kind() == abi.KindU8 {
			w, ok1 := want.([]byte)
			g, ok2 := got.([]byte)
			if !ok1 || !ok2 || !bytes.Equal(w, g) {
				return mismatch()
			}
			return nil
		}
		w, ok1 := want.([]any)
		g, ok2 := got.([]any)
		if !ok1 || !ok2 || len(w) != len(g) {
			return mismatch()
		}
		for i := range w {
			if err := sameValue(t.Elem(), w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case abi.KindRecord, abi.KindTuple:
		w, ok1 := want.([]any)
		g, ok2 := got.([]any)
		if !ok1 || !ok2 || len(w) != len(t.Fields()) || len(g) != len(w) {
			return mismatch()
		}
		for i, f := range t.Fields() {
			if err := sameValue(f.Type, w[i], g[i], path+"."+f.Name); err != nil {
				return err
			}
		}
		return nil
	case abi.KindOption:
		w, ok1 := want.(abi.Option)
		g, ok2 := got.(abi.Option)
		if !ok1 || !ok2 || w.Some != g.Some || (!w.Some && g.Value != nil) {
			return mismatch()
		}
		if w.Some {
			return sameValue(t.Elem(), w.Value, g.Value, path+"?")
		}
		return nil
	case abi.KindResult:
		w, ok1 := want.(abi.Result)
		g, ok2 := got.(abi.Result)
		if !ok1 || !ok2 || w.Err != g.Err {
			return mismatch()
		}
		c := t.Cases()[0]
		if w.Err {
			c = t.Cases()[1]
		}
		return samePayload(c, w.Value, g.Value, path)
	case abi.KindVariant:
		w, ok1 := want.(abi.Variant)
		g, ok2 := got.(abi.Variant)
		if !ok1 || !ok2 || w.Case != g.Case {
			return mismatch()
		}
		return samePayload(t.Cases()[w.Case], w.Value, g.Value, path)
	}
	if want != got { // scalars, strings, enums and flags: same dynamic type and value
		return mismatch()
	}
	return nil
}

func samePayload(c abi.Case, want, got any, path string) error {
	if c.Type == nil {
		if want != nil || got != nil {
			return fmt.Errorf("at %q: case %s has no payload: sent %s, got back %s", path, c.Name, brief(want), brief(got))
		}
		return nil
	}
	return sameValue(c.Type, want, got, path+"."+c.Name)
}

func brief(v any) string {
	switch x := v.(type) {
	case float32:
		return fmt.Sprintf("%v (bits %#08x)", x, math.Float32bits(x))
	case float64:
		return fmt.Sprintf("%v (bits %#016x)", x, math.Float64bits(x))
	}
	s := fmt.Sprintf("%#v", v)
	if len(s) > 200 {
		s = s[:200] + fmt.Sprintf("... (%d chars)", len(s))
	}
	return s
}

// valueSource draws values from fuzzer bytes; past the end it reads zeros.
type valueSource struct {
	b []byte
	i int
}

func (s *valueSource) byte() byte {
	if s.i >= len(s.b) {
		return 0
	}
	c := s.b[s.i]
	s.i++
	return c
}

func (s *valueSource) u16() uint16 { return uint16(s.byte()) | uint16(s.byte())<<8 }
func (s *valueSource) u32() uint32 { return uint32(s.u16()) | uint32(s.u16())<<16 }
func (s *valueSource) u64() uint64 { return uint64(s.u32()) | uint64(s.u32())<<32 }

// char maps any u32 to a Unicode scalar value, covering the whole range.
func (s *valueSource) char() rune {
	c := s.u32() % 0x110000
	if c >= 0xD800 && c <= 0xDFFF {
		c += 0x800 // into 0xE000-0xE7FF
	}
	return rune(c)
}

func (s *valueSource) string() string {
	var b strings.Builder
	n := int(s.byte())
	repeat := 1
	if n >= 0xF0 { // a long string: a short pattern repeated, up to 64 KiB
		n = int(n-0xF0) + 1
		repeat = (int(s.byte())%64 + 1) * 16
	} else {
		n %= 48
	}
	for range n {
		if c := s.byte(); c < 0xC0 {
			b.WriteByte(c & 0x7f)
		} else {
			b.WriteRune(s.char())
		}
	}
	return strings.Repeat(b.String(), repeat)
}

// value draws a value of t.
func (s *valueSource) value(t *abi.Type) any {
	switch t.Kind() {
	case abi.KindBool:
		return s.byte()&1 == 1
	case abi.KindU8:
		return s.byte()
	case abi.KindU16:
		return s.u16()
	case abi.KindU32:
		return s.u32()
	case abi.KindU64:
		return s.u64()
	case abi.KindS8:
		return int8(s.byte())
	case abi.KindS16:
		return int16(s.u16())
	case abi.KindS32:
		return int32(s.u32())
	case abi.KindS64:
		return int64(s.u64())
	case abi.KindF32:
		return math.Float32frombits(s.u32())
	case abi.KindF64:
		return math.Float64frombits(s.u64())
	case abi.KindChar:
		return s.char()
	case abi.KindString:
		return s.string()
	case abi.KindList:
		if t.Elem().Kind() == abi.KindU8 {
			n := int(s.byte())
			if n == 0xFF {
				n = int(s.u32() % (1 << 16)) // 1 MiB lists are in TestGuestRoundTrip
			}
			b := make([]byte, n)
			for i := range b {
				b[i] = s.byte()
			}
			return b
		}
		vals := make([]any, int(s.byte())%12)
		for i := range vals {
			vals[i] = s.value(t.Elem())
		}
		return vals
	case abi.KindRecord, abi.KindTuple:
		vals := make([]any, len(t.Fields()))
		for i, f := range t.Fields() {
			vals[i] = s.value(f.Type)
		}
		return vals
	case abi.KindOption:
		if s.byte()&1 == 0 {
			return abi.Option{}
		}
		return abi.Option{Some: true, Value: s.value(t.Elem())}
	case abi.KindResult:
		r := abi.Result{Err: s.byte()&1 == 1}
		c := t.Cases()[0]
		if r.Err {
			c = t.Cases()[1]
		}
		if c.Type != nil {
			r.Value = s.value(c.Type)
		}
		return r
	case abi.KindEnum:
		return uint32(s.byte()) % uint32(len(t.Cases()))
	case abi.KindVariant:
		v := abi.Variant{Case: uint32(s.byte()) % uint32(len(t.Cases()))}
		if c := t.Cases()[v.Case]; c.Type != nil {
			v.Value = s.value(c.Type)
		}
		return v
	case abi.KindFlags:
		n := len(t.Labels())
		if n >= 32 {
			return s.u32()
		}
		return s.u32() & (1<<n - 1)
	}
	panic("valueSource: unsupported kind " + t.String())
}

// openEcho instantiates the guest directly on the engine's runtime (no per-call
// deadline), so a fuzz process reuses one instance for every input.
func (g *echoGuest) open(ctx context.Context, stderr *bytes.Buffer) (api.Module, error) {
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().WithStderr(stderr)
	ctx = experimental.WithMemoryAllocator(ctx, g.mod.allocator(1<<32))
	inst, err := g.e.rt.InstantiateModule(ctx, g.mod.module, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := inst.ExportedFunction("_initialize").Call(ctx); err != nil {
		inst.Close(ctx)
		return nil, fmt.Errorf("_initialize: %w\nguest stderr: %s", err, stderr)
	}
	return inst, nil
}

// fuzzGuestMemory is the linear memory past which FuzzGuestRoundTrip replaces its
// instance.
const fuzzGuestMemory = 512 << 20

func FuzzGuestRoundTrip(f *testing.F) {
	for i := range echoShapes {
		f.Add([]byte{byte(i)})
		f.Add([]byte{byte(i), 0xff, 0x7f, 0x80, 0x01, 0xc3, 0xfe, 0x00, 0xd8, 0x10, 0x00, 0x41, 0xe2})
	}
	g := newEchoGuest(f)
	ctx := context.Background()
	var (
		inst   api.Module
		stderr bytes.Buffer
	)
	f.Cleanup(func() {
		if inst != nil {
			inst.Close(ctx)
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		// A wasm memory never shrinks: an instance kept across inputs is replaced once
		// it has grown past fuzzGuestMemory, so no input meets a guest that earlier
		// inputs' large values left near the end of its address space.
		if inst != nil && inst.Memory().Size() > fuzzGuestMemory {
			inst.Close(ctx)
			inst = nil
		}
		if inst == nil {
			stderr.Reset()
			var err error
			if inst, err = g.open(ctx, &stderr); err != nil {
				t.Fatal(err)
			}
		}
		src := &valueSource{b: data}
		s := echoShapes[int(src.byte())%len(echoShapes)]
		val := src.value(s.valueType())
		if err := checkRoundTrip(ctx, inst, s, val, &stderr); err != nil {
			inst.Close(ctx)
			inst = nil
			t.Fatal(err)
		}
	})
}

// echoEdges are edge values of every shape.
func echoEdges() map[string][]any {
	str1M := strings.Repeat("ab\u20ac\U0001D11E\x00\u00ff", 1<<20/12) // 12 bytes a pattern: just under 1 MiB
	bytes1M := make([]byte, 1<<20)
	for i := range bytes1M {
		bytes1M[i] = byte(i * 7)
	}
	manyStrs := make([]any, 1000)
	for i := range manyStrs {
		manyStrs[i] = strings.Repeat("x", i%7)
	}
	f32 := func(bits uint32) any { return math.Float32frombits(bits) }
	f64 := func(bits uint64) any { return math.Float64frombits(bits) }
	some := func(v any) abi.Option { return abi.Option{Some: true, Value: v} }
	rec := func(a uint32, b string, c abi.Option) any { return []any{a, b, c} }
	u16s := func(xs ...uint16) []any {
		out := make([]any, len(xs))
		for i, x := range xs {
			out[i] = x
		}
		return out
	}
	f32s := []any{f32(0), f32(0x80000000), float32(1.5), f32(0x7f800000), f32(0xff800000), f32(1),
		f32(0x7fc00000), f32(0x7f800001), f32(0xffffffff), f32(0x7fffffff), f32(0xffc00001), float32(math.MaxFloat32)}
	f64s := []any{f64(0), f64(1 << 63), 1.5, math.Inf(1), math.Inf(-1), f64(1), f64(0x7ff8000000000000),
		f64(0x7ff0000000000001), f64(0xfff8000000000000), f64(0x7ff4000000000123), f64(math.MaxUint64), math.MaxFloat64}
	chars := []any{rune(0), rune(0x7f), rune(0x80), rune(0x7ff), rune(0x800), rune(0xD7FF), rune(0xE000),
		rune(0xFFFD), rune(0xFFFF), rune(0x10000), rune(0x10FFFF)}
	strs := []any{"", "a", "h\u00e9llo \u2713 \U0001D11E", "\x00", str1M}
	abcs := []any{abi.Variant{Case: 0, Value: uint8(0)}, abi.Variant{Case: 0, Value: uint8(255)},
		abi.Variant{Case: 1, Value: ""}, abi.Variant{Case: 1, Value: "str"}, abi.Variant{Case: 2}}
	recs := []any{rec(0, "", abi.Option{}), rec(math.MaxUint32, "x", some([]any{})),
		rec(1, "long\U0010FFFF", some(u16s(0, 0xffff, 0x8000, 1)))}
	edges := map[string][]any{
		"bool":        {false, true},
		"u8":          {uint8(0), uint8(1), uint8(0x7f), uint8(0x80), uint8(0xff)},
		"u16":         {uint16(0), uint16(0x8000), uint16(0xffff)},
		"u32":         {uint32(0), uint32(1 << 31), uint32(math.MaxUint32)},
		"u64":         {uint64(0), uint64(1 << 63), uint64(math.MaxUint64)},
		"s8":          {int8(math.MinInt8), int8(-1), int8(0), int8(math.MaxInt8)},
		"s16":         {int16(math.MinInt16), int16(-1), int16(0), int16(math.MaxInt16)},
		"s32":         {int32(math.MinInt32), int32(-1), int32(0), int32(math.MaxInt32)},
		"s64":         {int64(math.MinInt64), int64(-1), int64(0), int64(math.MaxInt64)},
		"f32":         f32s,
		"f64":         f64s,
		"char":        chars,
		"string":      strs,
		"list-u8":     {[]byte{}, []byte{0}, []byte{0xff, 0, 0x80}, bytes1M},
		"list-string": {[]any{}, []any{""}, []any{"a", "", "\U0001D11E"}, manyStrs, []any{str1M, ""}},
		"rec":         recs,
		"list-rec":    {[]any{}, recs},
		"tuple": {[]any{int64(math.MinInt64), f32(0x7f800001), rune(0x10FFFF)}, []any{int64(0), f32(0x80000000), rune(0)},
			[]any{int64(math.MaxInt64), float32(-2.5), rune(0xE000)}},
		"option":  {abi.Option{}, some(""), some("x"), some(str1M)},
		"result":  {abi.Result{Value: ""}, abi.Result{Value: "ok"}, abi.Result{Err: true, Value: uint32(0)}, abi.Result{Err: true, Value: uint32(math.MaxUint32)}},
		"enum":    {uint32(0), uint32(1), uint32(2)},
		"variant": abcs,
		"mix": {abi.Variant{Case: 0, Value: int64(math.MinInt64)}, abi.Variant{Case: 0, Value: int64(-1)},
			abi.Variant{Case: 1, Value: f32(0x7f800001)}, abi.Variant{Case: 1, Value: f32(0x80000000)}, abi.Variant{Case: 1, Value: f32(0xffffffff)},
			abi.Variant{Case: 2, Value: f64(0x7ff4000000000123)}, abi.Variant{Case: 2, Value: math.MaxFloat64},
			abi.Variant{Case: 3, Value: ""}, abi.Variant{Case: 3, Value: "ok"}},
		"flags": {uint32(0), uint32(1), uint32(0x200), uint32(0x3ff)},
	}
	zeros := []any{false, uint8(0), uint16(0), uint32(0), uint64(0), int8(0), int16(0), int32(0), int64(0),
		float32(0), float64(0), rune(0), "", []byte{}, uint32(0), abi.Option{}, abi.Variant{Case: 2}}
	maxes := []any{true, uint8(0xff), uint16(0xffff), uint32(math.MaxUint32), uint64(math.MaxUint64),
		int8(math.MinInt8), int16(math.MinInt16), int32(math.MinInt32), int64(math.MinInt64),
		f32(0x7f800001), f64(0x7ff0000000000001), rune(0x10FFFF), str1M, bytes1M, uint32(0x3ff), some("opt"), abi.Variant{Case: 1, Value: "v"}}
	mixed := []any{true, uint8(1), uint16(0x8000), uint32(1), uint64(1 << 63), int8(-1), int16(-1), int32(-1), int64(-1),
		float32(-0.5), -0.25, rune(0xE000), "s", []byte{1, 2, 3}, uint32(0x155), some(""), abi.Variant{Case: 0, Value: uint8(0x80)}}
	edges["many"] = []any{zeros, maxes, mixed}
	return edges
}

// TestGuestRoundTrip round-trips edge values of every shape through one instance made
// by Engine.Call (the product's path: memory limit, deadline, fresh instance).
func TestGuestRoundTrip(t *testing.T) {
	g := newEchoGuest(t)
	ctx := context.Background()
	edges := echoEdges()
	var stderr bytes.Buffer
	grants := Grants{MemoryBytes: 512 << 20, Deadline: 60 * time.Second, Stderr: &stderr}
	err := g.e.Call(ctx, g.mod, grants, func(ctx context.Context, inst *Instance) error {
		for _, s := range echoShapes {
			vals := edges[s.name]
			if len(vals) == 0 {
				t.Errorf("no edge values for %s", s.name)
			}
			for i, v := range vals {
				if err := checkRoundTrip(ctx, inst, s, v, &stderr); err != nil {
					t.Errorf("%s #%d: %v", s.name, i, err)
				}
			}
		}
		// Random values of every shape, a few hundred each, in the same instance.
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 256)
		for range 100 {
			for _, s := range echoShapes {
				for i := range buf {
					buf[i] = byte(rng.Uint32())
				}
				src := &valueSource{b: buf}
				if err := checkRoundTrip(ctx, inst, s, src.value(s.valueType()), &stderr); err != nil {
					return err
				}
			}
		}
		// Strings of about 28 KB in every shape that holds one, 200 times over in the
		// same instance: the size of the string a FuzzGuestRoundTrip run once stopped
		// on, inside the guest's cabi_realloc (its input was not kept).
		byShape := func(str string) map[string]any {
			return map[string]any{"string": str, "list-string": []any{str, "", str}, "option": abi.Option{Some: true, Value: str},
				"result": abi.Result{Value: str}, "variant": abi.Variant{Case: 1, Value: str}, "mix": abi.Variant{Case: 3, Value: str},
				"rec": []any{uint32(7), str, abi.Option{}}}
		}
		for round := range 200 {
			str := strings.Repeat("ab\u20ac\U0001D11E", 3111) + strings.Repeat("x", 1+round%8*4) // 28 000 bytes and more
			vals := byShape(str)
			for _, s := range echoShapes {
				if v, ok := vals[s.name]; ok {
					if err := checkRoundTrip(ctx, inst, s, v, &stderr); err != nil {
						return fmt.Errorf("a %d-byte string, round %d: %w", len(str), round, err)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
