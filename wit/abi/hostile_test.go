package abi

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

// put writes little-endian u32s at off.
func put(m *mem, off uint32, vs ...uint32) {
	for i, v := range vs {
		binary.LittleEndian.PutUint32(m.b[off+uint32(i)*4:], v)
	}
}

func TestLoadHostile(t *testing.T) {
	const size = 1 << 16
	tests := []struct {
		name  string
		typ   *Type
		ptr   uint32
		setup func(m *mem)
		lim   limits
		limit bool   // also ErrLimit
		msg   string // part of the message
	}{
		{"value past end", U64, size, nil, limits{}, false, "past memory size"},
		{"value ptr 0xFFFFFFF8 overflows", U64, 0xFFFFFFF8, nil, limits{}, false, "past memory size"},
		{"misaligned u32", U32, 2, nil, limits{}, false, "misaligned"},
		{"misaligned record", ToolInputType, 6, nil, limits{}, false, "misaligned"},
		{"string ptr past end", String, 0, func(m *mem) { put(m, 0, size, 1) }, limits{}, false, "ptr 0x10000"},
		{"string len 0xFFFFFFFF", String, 0, func(m *mem) { put(m, 0, 16, 0xFFFFFFFF) }, limits{}, true, "length 4294967295"},
		{"string len 0xFFFFFFFF uncapped", String, 0, func(m *mem) { put(m, 0, 16, 0xFFFFFFFF) }, limits{MaxString: math.MaxUint32, MaxTotal: math.MaxUint64}, false, "past memory size"},
		{"string offset+len overflows", String, 0, func(m *mem) { put(m, 0, 0xFFFFFFF0, 0x20) }, limits{}, false, "past memory size"},
		{"string invalid utf-8", String, 0, func(m *mem) { put(m, 0, 16, 2); m.b[16], m.b[17] = 0xff, 0xfe }, limits{}, false, "invalid UTF-8"},
		{"string truncated utf-8", String, 0, func(m *mem) { put(m, 0, 16, 1); m.b[16] = 0xe4 }, limits{}, false, "invalid UTF-8"},
		{"string encoded surrogate", String, 0, func(m *mem) { put(m, 0, 16, 3); copy(m.b[16:], "\xed\xa0\x80") }, limits{}, false, "invalid UTF-8"},
		{"list len*size overflows uint32", List(U64), 0, func(m *mem) { put(m, 0, 8, 0x20000000) }, limits{MaxList: math.MaxUint32, MaxTotal: math.MaxUint64}, false, "past memory size"},
		{"list len 0xFFFFFFFF", List(U8), 0, func(m *mem) { put(m, 0, 8, 0xFFFFFFFF) }, limits{}, true, "length 4294967295"},
		{"list of empty tuples len 0xFFFFFFFF", List(Tuple()), 0, func(m *mem) { put(m, 0, 8, 0xFFFFFFFF) }, limits{}, true, "length 4294967295"},
		{"list misaligned", List(U32), 0, func(m *mem) { put(m, 0, 10, 1) }, limits{}, false, "misaligned"},
		{"list element invalid", List(String), 0, func(m *mem) { put(m, 0, 8, 2, 64, 0, size, 5) }, limits{}, false, "[1]"},
		{"aliased strings exceed total", List(String), 0, func(m *mem) {
			put(m, 0, 8, 1000)
			for i := range uint32(1000) {
				put(m, 8+8*i, 0x4000, 40000)
			}
			copy(m.b[0x4000:], strings.Repeat("a", 40000))
		}, limits{MaxTotal: 1 << 20}, true, "allowed for one value"},
		{"option discriminant 2", OptionOf(U8), 0, func(m *mem) { m.b[0] = 2 }, limits{}, false, "discriminant 2"},
		{"result discriminant 2", ResultOf(U8, nil), 0, func(m *mem) { m.b[0] = 2 }, limits{}, false, "discriminant 2"},
		{"enum discriminant 3", StatusType, 0, func(m *mem) { m.b[0] = 3 }, limits{}, false, "discriminant 3"},
		{"variant discriminant 255", VariantOf(C("a", nil), C("b", U8)), 0, func(m *mem) { m.b[0] = 255 }, limits{}, false, "discriminant 255"},
		{"u16 discriminant", Enum(strings.Split(strings.Repeat("x,", 299)+"x", ",")...), 0, func(m *mem) { m.b[0], m.b[1] = 0x2c, 0x01 }, limits{}, false, "discriminant 300"},
		{"surrogate char D800", Char, 0, func(m *mem) { put(m, 0, 0xD800) }, limits{}, false, "0xd800"},
		{"surrogate char DFFF", Char, 0, func(m *mem) { put(m, 0, 0xDFFF) }, limits{}, false, "0xdfff"},
		{"char past 10FFFF", Char, 0, func(m *mem) { put(m, 0, 0x110000) }, limits{}, false, "0x110000"},
		{"nested field named", ToolResultType, 0, func(m *mem) { put(m, 4, 1, 0xFFFFFF00, 4) }, limits{}, false, "summary.some"},
		{"metadata tuple named", ToolResultType, 0, func(m *mem) { put(m, 44, 64, 1); put(m, 64, 0, 0, size, 1) }, limits{}, false, "metadata[0].1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(size)
			if tt.setup != nil {
				tt.setup(m)
			}
			_, err := load(m, tt.typ, tt.ptr, tt.lim)
			mustABI(t, err)
			if got := errors.Is(err, ErrLimit); got != tt.limit {
				t.Errorf("errors.Is(err, ErrLimit) = %v, want %v (%v)", got, tt.limit, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestLiftFlatHostile(t *testing.T) {
	tests := []struct {
		name string
		typ  *Type
		flat []uint64
		msg  string
	}{
		{"too few values", String, []uint64{0}, "1 flat values, want 2"},
		{"too many values", U8, []uint64{0, 0}, "2 flat values, want 1"},
		{"option discriminant", OptionOf(String), []uint64{2, 0, 0}, "discriminant 2"},
		{"result discriminant", ResultOf(nil, String), []uint64{7, 0, 0}, "discriminant 7"},
		{"enum discriminant", StatusType, []uint64{3}, "discriminant 3"},
		{"variant discriminant", VariantOf(C("a", U64)), []uint64{1 << 32, 0}, "discriminant 0"},
		{"surrogate", Char, []uint64{0xDBFF}, "0xdbff"},
		{"char too big", Char, []uint64{0xFFFFFFFF}, "0xffffffff"},
		{"string past end", String, []uint64{0xFFFF, 2}, "past memory size"},
		{"string overflow", String, []uint64{0xFFFFFFFF, 2}, "past memory size"},
		{"list misaligned", List(U16), []uint64{1, 1}, "misaligned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := liftFlat(newMem(1<<16), tt.typ, tt.flat, limits{})
			if tt.name == "variant discriminant" {
				// i32 values are taken modulo 2^32, as the spec wraps: case 0 is fine.
				if err != nil {
					t.Fatalf("got %v", err)
				}
				return
			}
			mustABI(t, err)
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestFuncHostile(t *testing.T) {
	ctx := context.Background()
	m := newMem(1 << 16)
	tests := []struct {
		name string
		call func() error
		msg  string
	}{
		{"results retptr past end", func() error { _, err := ToolRun01.LiftResults(m, []uint64{1<<16 - 8}); return err }, "past memory size"},
		{"results retptr misaligned", func() error { _, err := ToolRun01.LiftResults(m, []uint64{2}); return err }, "misaligned"},
		{"results wrong count", func() error { _, err := ToolRun01.LiftResults(m, []uint64{}); return err }, "0 core results"},
		{"flat results wrong count", func() error { _, err := NewFunc(nil, []*Type{U32}).LiftResults(m, nil); return err }, "0 core results, want 1"},
		{"params wrong count", func() error { _, err := Invoke.LiftParams(m, []uint64{1, 2}); return err }, "2 core params, want 9"},
		{"spilled params ptr past end", func() error {
			f := NewFunc([]*Type{String, String, String, String, String, String, String, String, String}, nil)
			_, err := f.LiftParams(m, []uint64{0xFFFFFFFC})
			return err
		}, "past memory size"},
		{"lower results to bad retptr", func() error {
			_, err := RequestIn.LowerResults(ctx, m, newBump(m, 8).realloc, []any{"x"}, 0xFFFFFFFC)
			return err
		}, "past memory size"},
		{"lower results to misaligned retptr", func() error {
			_, err := RequestIn.LowerResults(ctx, m, newBump(m, 8).realloc, []any{"x"}, 3)
			return err
		}, "misaligned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			mustABI(t, err)
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not mention %q", err, tt.msg)
			}
		})
	}
}

func TestReallocHostile(t *testing.T) {
	ctx := context.Background()
	guestFault := errors.New("guest trapped")
	tests := []struct {
		name    string
		realloc Realloc
		abi     bool
		msg     string
	}{
		{"returns 0", fixedRealloc(0), true, "returned 0"},
		{"out of range", fixedRealloc(1<<16 - 4), true, "past memory size"},
		{"wraps around", fixedRealloc(0xFFFFFFFC), true, "past memory size"},
		{"misaligned", fixedRealloc(3), true, "misaligned"},
		{"missing", nil, true, "no cabi_realloc"},
		{"traps", func(context.Context, uint32, uint32, uint32, uint32) (uint32, error) { return 0, guestFault }, false, "guest trapped"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(1 << 16)
			// list<u32> needs alignment 4; "hello" needs 5 bytes.
			for _, c := range []struct {
				typ *Type
				val any
			}{{String, "hello"}, {List(U32), []any{uint32(1), uint32(2)}}} {
				_, err := lowerFlat(ctx, m, tt.realloc, c.typ, c.val)
				if tt.name == "misaligned" && c.typ == String {
					if err != nil {
						t.Errorf("string alignment is 1, got %v", err)
					}
					continue
				}
				if err == nil {
					t.Fatalf("%s: no error", c.typ)
				}
				if errors.Is(err, ErrABI) != tt.abi {
					t.Errorf("%s: errors.Is(err, ErrABI) = %v, want %v (%v)", c.typ, !tt.abi, tt.abi, err)
				}
				if !tt.abi && !errors.Is(err, guestFault) {
					t.Errorf("%s: guest error not wrapped: %v", c.typ, err)
				}
				if !strings.Contains(err.Error(), tt.msg) {
					t.Errorf("%s: error %q does not mention %q", c.typ, err, tt.msg)
				}
			}
			// Spilled params allocate too.
			_, err := NewFunc([]*Type{Tuple(U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64, U64)}, nil).
				LowerParams(ctx, m, tt.realloc, []any{make17()})
			if err == nil {
				t.Error("spilled params: no error")
			}
		})
	}
}

func make17() []any {
	v := make([]any, 17)
	for i := range v {
		v[i] = uint64(i)
	}
	return v
}

func TestZeroSizeAllocationMayReturnZero(t *testing.T) {
	flat, err := lowerFlat(context.Background(), newMem(16), fixedRealloc(0), String, "")
	if err != nil || flat[0] != 0 || flat[1] != 0 {
		t.Errorf("lowerFlat(\"\") = %v, %v", flat, err)
	}
}

func TestBadHostValues(t *testing.T) {
	ctx := context.Background()
	m := newMem(1 << 16)
	a := newBump(m, 8)
	tests := []struct {
		name string
		typ  *Type
		val  any
	}{
		{"int for u8", U8, 1},
		{"string for list", List(String), "x"},
		{"invalid utf-8", String, "\xff"},
		{"surrogate rune", Char, rune(0xD800)},
		{"negative rune", Char, rune(-1)},
		{"short record", ToolInputType, []any{Option{}}},
		{"enum out of range", StatusType, uint32(3)},
		{"variant case out of range", VariantOf(C("a", nil)), Variant{Case: 1}},
		{"payload for empty case", ResultOf(nil, String), Result{Value: "x"}},
		{"flags beyond labels", Flags("a", "b"), uint32(4)},
		{"option payload wrong type", OptionOf(U32), Option{Some: true, Value: "x"}},
		{"nil", Bool, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := lowerFlat(ctx, m, a.realloc, tt.typ, tt.val)
			if !errors.Is(err, ErrValue) || errors.Is(err, ErrABI) {
				t.Errorf("lowerFlat: want ErrValue only, got %v", err)
			}
			err = store(ctx, m, a.realloc, tt.typ, 0, tt.val)
			if !errors.Is(err, ErrValue) || errors.Is(err, ErrABI) {
				t.Errorf("store: want ErrValue only, got %v", err)
			}
		})
	}
	if _, err := ToolRun01.LowerParams(ctx, m, a.realloc, nil); !errors.Is(err, ErrValue) {
		t.Errorf("LowerParams with no args: %v", err)
	}
	if _, err := RequestIn.LowerResults(ctx, m, a.realloc, nil, 0); !errors.Is(err, ErrValue) {
		t.Errorf("LowerResults with no results: %v", err)
	}
}
