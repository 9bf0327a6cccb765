package abi

import (
	"context"
	"errors"
	"math"
	"testing"
)

// mem is a growable fake linear memory.
type mem struct{ b []byte }

func newMem(size int) *mem { return &mem{b: make([]byte, size)} }

func (m *mem) Size() uint32 { return uint32(len(m.b)) }

func (m *mem) Read(off, n uint32) ([]byte, bool) {
	if uint64(off)+uint64(n) > uint64(len(m.b)) {
		return nil, false
	}
	return m.b[off : off+n : off+n], true
}

func (m *mem) Write(off uint32, v []byte) bool {
	if uint64(off)+uint64(len(v)) > uint64(len(m.b)) {
		return false
	}
	copy(m.b[off:], v)
	return true
}

// bump is a bump allocator over m, growing it as a guest's memory.grow would.
type bump struct {
	m     *mem
	next  uint32
	calls int
}

func newBump(m *mem, start uint32) *bump { return &bump{m: m, next: start} }

func (a *bump) realloc(_ context.Context, _, _, align, size uint32) (uint32, error) {
	a.calls++
	p := alignTo(a.next, align)
	if p == 0 {
		p = align
	}
	end := uint64(p) + uint64(size)
	if end > math.MaxUint32 {
		return 0, errors.New("out of memory")
	}
	for uint64(len(a.m.b)) < end {
		a.m.b = append(a.m.b, make([]byte, 65536)...)
	}
	a.next = uint32(end)
	return p, nil
}

func fixedRealloc(p uint32) Realloc {
	return func(context.Context, uint32, uint32, uint32, uint32) (uint32, error) { return p, nil }
}

func mustABI(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("want an ABI error, got nil")
	}
	if !errors.Is(err, ErrABI) {
		t.Fatalf("want ErrABI, got %v", err)
	}
}

func ptr(s string) *string { return &s }
