package abi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// gen draws types and values from fuzzer bytes; past the end it reads zeros.
type gen struct {
	b []byte
	i int
}

func (g *gen) byte() byte {
	if g.i >= len(g.b) {
		return 0
	}
	c := g.b[g.i]
	g.i++
	return c
}

func (g *gen) u32() uint32 {
	return uint32(g.byte()) | uint32(g.byte())<<8 | uint32(g.byte())<<16 | uint32(g.byte())<<24
}

func (g *gen) u64() uint64 { return uint64(g.u32()) | uint64(g.u32())<<32 }

var prims = []*Type{Bool, U8, U16, U32, U64, S8, S16, S32, S64, Float32, Float64, Char, String}

func (g *gen) typ(depth int) *Type {
	k := int(g.byte()) % 21
	if depth <= 0 || k < len(prims) {
		return prims[k%len(prims)]
	}
	switch k {
	case 13:
		return List(g.typ(depth - 1))
	case 14:
		n := int(g.byte()) % 5
		fs := make([]Field, n)
		for i := range fs {
			fs[i] = F("f"+itoa(uint32(i)), g.typ(depth-1))
		}
		return Record(fs...)
	case 15:
		ts := make([]*Type, int(g.byte())%4)
		for i := range ts {
			ts[i] = g.typ(depth - 1)
		}
		return Tuple(ts...)
	case 16:
		return OptionOf(g.typ(depth - 1))
	case 17:
		var ok, bad *Type
		if g.byte()%2 == 0 {
			ok = g.typ(depth - 1)
		}
		if g.byte()%2 == 0 {
			bad = g.typ(depth - 1)
		}
		return ResultOf(ok, bad)
	case 18:
		return Enum(g.names()...)
	case 19:
		names := g.names()
		cs := make([]Case, len(names))
		for i, n := range names {
			if g.byte()%3 != 0 {
				cs[i] = C(n, g.typ(depth-1))
			} else {
				cs[i] = C(n, nil)
			}
		}
		return VariantOf(cs...)
	default:
		return Flags(g.namesN(1 + int(g.byte())%MaxFlags)...)
	}
}

func (g *gen) names() []string {
	c := g.byte()
	if c == 255 {
		return g.namesN(300) // a two-byte discriminant
	}
	return g.namesN(1 + int(c)%4)
}

func (g *gen) namesN(n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = "n" + itoa(uint32(i))
	}
	return s
}

func (g *gen) rune() rune {
	r := rune(g.u32() % 0x110000)
	if r >= 0xD800 && r <= 0xDFFF {
		r -= 0x800
	}
	return r
}

func (g *gen) value(t *Type) any {
	switch t.kind {
	case KindBool:
		return g.byte()%2 == 1
	case KindU8:
		return g.byte()
	case KindU16:
		return uint16(g.u32())
	case KindU32:
		return g.u32()
	case KindU64:
		return g.u64()
	case KindS8:
		return int8(g.byte())
	case KindS16:
		return int16(g.u32())
	case KindS32:
		return int32(g.u32())
	case KindS64:
		return int64(g.u64())
	case KindF32:
		return math.Float32frombits(g.u32())
	case KindF64:
		return math.Float64frombits(g.u64())
	case KindChar:
		return g.rune()
	case KindString:
		rs := make([]rune, int(g.byte())%6)
		for i := range rs {
			rs[i] = g.rune()
		}
		return string(rs)
	case KindList:
		n := int(g.byte()) % 4
		if t.elem.kind == KindU8 {
			b := make([]byte, n)
			for i := range b {
				b[i] = g.byte()
			}
			return b
		}
		vs := make([]any, n)
		for i := range vs {
			vs[i] = g.value(t.elem)
		}
		return vs
	case KindRecord, KindTuple:
		vs := make([]any, len(t.fields))
		for i, f := range t.fields {
			vs[i] = g.value(f.Type)
		}
		return vs
	case KindFlags:
		return g.u32() & flagMask(t)
	}
	c := uint32(g.byte()) % uint32(len(t.cases))
	var payload any
	if ct := t.cases[c].Type; ct != nil {
		payload = g.value(ct)
	}
	return variantValue(t, c, payload)
}

// equal compares values, floats by their bits.
func equal(a, b any) bool {
	switch x := a.(type) {
	case float32:
		y, ok := b.(float32)
		return ok && math.Float32bits(x) == math.Float32bits(y)
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equal(x[i], y[i]) {
				return false
			}
		}
		return true
	case Option:
		y, ok := b.(Option)
		return ok && x.Some == y.Some && equal(x.Value, y.Value)
	case Result:
		y, ok := b.(Result)
		return ok && x.Err == y.Err && equal(x.Value, y.Value)
	case Variant:
		y, ok := b.(Variant)
		return ok && x.Case == y.Case && equal(x.Value, y.Value)
	}
	return a == b
}

var fuzzLimits = limits{MaxString: 1 << 16, MaxList: 1 << 16, MaxTotal: 1 << 20}

// FuzzLift lifts a random type from random memory and flat values: it must never
// panic, fail only with ErrABI, and whatever it lifts must lower back as a valid value.
func FuzzLift(f *testing.F) {
	f.Add([]byte{14, 3, 12, 13, 12, 16, 0}, []byte("\x10\x00\x00\x00\x05\x00\x00\x00hello, world"), uint32(0), []byte{16, 0, 0, 0, 0, 0, 0, 0, 5})
	f.Fuzz(func(t *testing.T, typeSeed, memory []byte, ptr uint32, flatSeed []byte) {
		g := &gen{b: typeSeed}
		ty := g.typ(4)
		m := &mem{b: memory}
		check := func(v any, err error) {
			if err != nil {
				if !errors.Is(err, ErrABI) {
					t.Fatalf("%s: error not ErrABI: %v", ty, err)
				}
				return
			}
			m2 := newMem(0)
			if _, err := lowerFlat(context.Background(), m2, newBump(m2, 8).realloc, ty, v); err != nil {
				t.Fatalf("%s: lifted value %#v does not lower: %v", ty, v, err)
			}
		}
		check(load(m, ty, ptr, fuzzLimits))
		fg := &gen{b: flatSeed}
		flat := make([]uint64, len(ty.flat))
		for i := range flat {
			flat[i] = fg.u64()
			if fg.byte()%2 == 0 && len(memory) > 0 { // often a plausible pointer or length
				flat[i] %= uint64(len(memory))
			}
		}
		check(liftFlat(m, ty, flat, fuzzLimits))
	})
}

// FuzzRoundTrip lowers a random value of a random type through memory, flat values
// and a function call, and lifts it back unchanged.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{14, 3, 12, 13, 12, 16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Fuzz(func(t *testing.T, seed []byte) {
		ctx := context.Background()
		g := &gen{b: seed}
		ty := g.typ(4)
		v := g.value(ty)
		m := newMem(1 << 16)
		a := newBump(m, 8)

		p, _ := a.realloc(ctx, 0, 0, ty.align, ty.size)
		if err := store(ctx, m, a.realloc, ty, p, v); err != nil {
			t.Fatalf("%s: store(%#v): %v", ty, v, err)
		}
		got, err := load(m, ty, p, limits{})
		if err != nil || !equal(got, v) {
			t.Fatalf("%s: load = %#v, %v; want %#v", ty, got, err, v)
		}

		flat, err := lowerFlat(ctx, m, a.realloc, ty, v)
		if err != nil {
			t.Fatalf("%s: lowerFlat(%#v): %v", ty, v, err)
		}
		got, err = liftFlat(m, ty, flat, limits{})
		if err != nil || !equal(got, v) {
			t.Fatalf("%s: liftFlat = %#v, %v; want %#v", ty, got, err, v)
		}

		// Three copies of the value as params (often spilling), one as result.
		fn := NewFunc([]*Type{ty, ty, ty}, []*Type{ty})
		args := []any{v, v, v}
		flat, err = fn.LowerParams(ctx, m, a.realloc, args)
		if err != nil {
			t.Fatalf("%s: LowerParams: %v", ty, err)
		}
		if ip, _ := fn.ImportSignature(); len(ip) > len(flat) {
			flat = append(flat, 0)
		}
		gotArgs, err := fn.LiftParams(m, flat)
		if err != nil || !equal(gotArgs, args) {
			t.Fatalf("%s: LiftParams = %#v, %v; want %#v", ty, gotArgs, err, args)
		}
		ret, _ := a.realloc(ctx, 0, 0, ty.align, ty.size)
		rflat, err := fn.LowerResults(ctx, m, a.realloc, []any{v}, ret)
		if err != nil {
			t.Fatalf("%s: LowerResults: %v", ty, err)
		}
		if rflat == nil {
			rflat = []uint64{uint64(ret)}
		}
		res, err := fn.LiftResults(m, rflat)
		if err != nil || !equal(res, []any{v}) {
			t.Fatalf("%s: LiftResults = %#v, %v; want %#v", ty, res, err, v)
		}
	})
}

func TestGenDeterministic(t *testing.T) {
	seed := []byte{19, 2, 1, 3, 0, 9, 9, 9, 9}
	a, b := (&gen{b: seed}).typ(4), (&gen{b: seed}).typ(4)
	if a.String() != b.String() {
		t.Fatal("type generation is not deterministic")
	}
	var buf [8]byte
	binary.LittleEndian.PutUint64(buf[:], 7)
	if (&gen{b: buf[:]}).u64() != 7 {
		t.Fatal("u64")
	}
}
