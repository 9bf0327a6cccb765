package wasmbin

import (
	"bytes"
	"testing"
)

func TestSigned(t *testing.T) {
	for _, v := range []int32{0, 1, -1, 63, 64, -64, -65, 1 << 20, -(1 << 20), 1<<31 - 1, -1 << 31} {
		b := AppendSigned(nil, int64(v))
		r := NewReader(b)
		if got := r.S32(); got != v || r.Bad() || len(r.Rest()) != 0 {
			t.Errorf("%d: encoded %x, read back %d (bad %v)", v, b, got, r.Bad())
		}
	}
	if r := NewReader([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}); r.S32() != 0 || !r.Bad() {
		t.Error("a 6-byte s32 was accepted")
	}
}

func TestSectionsAndRebuild(t *testing.T) {
	head := []byte("\x00asm\x01\x00\x00\x00")
	mod := append(append([]byte{}, head...), 1, 2, 0xaa, 0xbb, 7, 1, 0x00)
	secs, ok := Sections(mod)
	if !ok || len(secs) != 2 || secs[0].ID != 1 || !bytes.Equal(mod[secs[0].Start:secs[0].End], []byte{0xaa, 0xbb}) {
		t.Fatalf("sections %+v %v", secs, ok)
	}
	out := Rebuild(mod, secs, map[int][]byte{1: {1, 2, 3}})
	want := append(append([]byte{}, head...), 1, 2, 0xaa, 0xbb, 7, 3, 1, 2, 3)
	if !bytes.Equal(out, want) {
		t.Errorf("rebuilt %x, want %x", out, want)
	}
	for _, bad := range [][]byte{head[:7], append(append([]byte{}, head...), 1, 5, 0), append(append([]byte{}, head...), 1, 0x80)} {
		if _, ok := Sections(bad); ok {
			t.Errorf("%x read as sections", bad)
		}
	}
}

func TestReaderNeverPanics(t *testing.T) {
	r := NewReader([]byte{0x41})
	if err := r.SkipConstExpr(); err == nil || !r.Bad() {
		t.Error("a truncated constant expression was accepted")
	}
	r = NewReader([]byte{0x01})
	if r.Bytes(5) != nil || !r.Bad() || r.U() != 0 || r.Byte() != 0 || r.Rest() != nil {
		t.Error("reads past the end returned data")
	}
	if err := NewReader([]byte{0x41, 0x7f, 0x0b}).SkipConstExpr(); err != nil {
		t.Errorf("i32.const -1; end: %v", err)
	}
}

// TestInstr reads one instruction of each shape of immediates: each is consumed exactly,
// a call reports its function index, and anything unknown or cut short is an error.
func TestInstr(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		op   byte
		imm  uint64
		bad  bool
	}{
		{"nop", []byte{0x01}, 0x01, 0, false},
		{"block with a type index", []byte{0x02, 0x05}, 0x02, 0, false},
		{"loop with a value type", []byte{0x03, 0x7f}, 0x03, 0, false},
		{"br_table", []byte{0x0e, 0x02, 0x00, 0x01, 0x02}, 0x0e, 0, false},
		{"call", []byte{0x10, 0x80, 0x01}, 0x10, 128, false},
		{"call_indirect", []byte{0x11, 0x03, 0x00}, 0x11, 3, false},
		{"return_call", []byte{0x12, 0x07}, 0x12, 7, false},
		{"select with types", []byte{0x1c, 0x01, 0x7f}, 0x1c, 0, false},
		{"i32.load", []byte{0x28, 0x02, 0x10}, 0x28, 0, false},
		{"load with a memory index", []byte{0x28, 0x42, 0x01, 0x10}, 0x28, 0, false},
		{"i64.const", []byte{0x42, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00}, 0x42, 0, false},
		{"f64.const", []byte{0x44, 1, 2, 3, 4, 5, 6, 7, 8}, 0x44, 0, false},
		{"memory.copy", []byte{0xfc, 0x0a, 0x00, 0x00}, 0xfc, 0, false},
		{"table.fill", []byte{0xfc, 0x11, 0x00}, 0xfc, 0, false},
		{"v128.const", append([]byte{0xfd, 0x0c}, make([]byte, 16)...), 0xfd, 0, false},
		{"v128.load8_lane", []byte{0xfd, 0x54, 0x00, 0x00, 0x03}, 0xfd, 0, false},
		{"i8x16.extract_lane_s", []byte{0xfd, 0x15, 0x03}, 0xfd, 0, false},
		{"atomic.fence", []byte{0xfe, 0x03, 0x00}, 0xfe, 0, false},
		{"i32.atomic.rmw.add", []byte{0xfe, 0x1e, 0x02, 0x00}, 0xfe, 0, false},
		{"unknown opcode", []byte{0x06}, 0, 0, true},
		{"unknown 0xfc", []byte{0xfc, 0x12}, 0, 0, true},
		{"cut short", []byte{0x10}, 0, 0, true},
		{"v128.const cut short", []byte{0xfd, 0x0c, 0x00}, 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(append(append([]byte{}, tt.in...), 0x0b))
			op, imm, err := r.Instr()
			if tt.bad {
				if err == nil && len(r.Rest()) == 1 {
					t.Fatalf("read as op %#x", op)
				}
				return
			}
			if err != nil || op != tt.op || imm != tt.imm {
				t.Fatalf("op %#x imm %d err %v", op, imm, err)
			}
			if rest := r.Rest(); len(rest) != 1 || rest[0] != 0x0b {
				t.Fatalf("left %x unread", rest)
			}
		})
	}
}
