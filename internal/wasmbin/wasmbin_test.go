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
