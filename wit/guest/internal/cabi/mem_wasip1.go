//go:build wasip1

package cabi

import (
	"fmt"
	"sync"
	"unsafe"
)

// live holds every block handed to the host through cabi_realloc, keyed by address, so
// the garbage collector keeps it until the guest takes ownership of its contents.
var (
	mu      sync.Mutex
	live    = map[uint32][]byte{}
	pending = map[uint32]*Frame{}
)

// Addr is the linear-memory address of b's first byte (0 for an empty slice).
func Addr(b []byte) uint32 {
	if len(b) == 0 {
		return 0
	}
	return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

// Aligned returns a zeroed block of size bytes whose address is a multiple of align.
// The block is ordinary Go memory: the caller keeps it alive.
func Aligned(size, align uint32) (uint32, []byte) {
	if align == 0 || align&(align-1) != 0 {
		align = 8
	}
	buf := make([]byte, size+align)
	a := uint32(uintptr(unsafe.Pointer(unsafe.SliceData(buf))))
	off := (align - a%align) % align
	return a + off, buf[off : off+size : off+size]
}

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	if newSize == 0 {
		Free(oldPtr)
		if align == 0 {
			align = 1
		}
		return align // a non-null, aligned pointer to nothing
	}
	p, b := Aligned(newSize, align)
	mu.Lock()
	if old, ok := live[oldPtr]; ok && oldPtr != 0 {
		copy(b, old[:min(oldSize, uint32(len(old)))])
		delete(live, oldPtr)
	}
	live[p] = b
	mu.Unlock()
	return p
}

// Free unpins a block returned by cabi_realloc; unknown addresses are ignored.
func Free(p uint32) {
	mu.Lock()
	delete(live, p)
	mu.Unlock()
}

// Take transfers ownership of n bytes at p, which the host allocated through
// cabi_realloc, to the caller: the block is unpinned and returned without copying.
func Take(p, n uint32) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	mu.Lock()
	b, ok := live[p]
	delete(live, p)
	mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("cabi: address %#x was not allocated by cabi_realloc", p)
	}
	if uint32(len(b)) < n {
		return nil, fmt.Errorf("cabi: %d bytes at %#x exceed the %d-byte allocation", n, p, len(b))
	}
	return b[:n:n], nil
}

// TakeString is Take for a string.
func TakeString(p, n uint32) (string, error) {
	b, err := Take(p, n)
	if err != nil || len(b) == 0 {
		return "", err
	}
	return unsafe.String(&b[0], len(b)), nil
}

// TakeOptString lifts an option<string> from its flat form.
func TakeOptString(disc, p, n uint32) (*string, error) {
	switch disc {
	case 0:
		return nil, nil
	case 1:
		s, err := TakeString(p, n)
		return &s, err
	}
	return nil, fmt.Errorf("cabi: option discriminant %d", disc)
}

// TakeOptStringAt lifts an option<string> stored at off in b.
func TakeOptStringAt(b []byte, off uint32) (*string, error) {
	return TakeOptString(uint32(b[off]), U32(b, off+4), U32(b, off+8))
}

// TakeStrings lifts a list<string> from its flat (ptr, len).
func TakeStrings(p, n uint32) ([]string, error) {
	if n > 1<<24 {
		return nil, fmt.Errorf("cabi: list of %d strings", n)
	}
	b, err := Take(p, n*8)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		if out[i], err = TakeString(U32(b, uint32(i)*8), U32(b, uint32(i)*8+4)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TakePairs lifts a list<tuple<string, string>>.
func TakePairs(p, n uint32) ([][2]string, error) {
	if n == 0 {
		return nil, nil
	}
	if n > 1<<26 {
		return nil, fmt.Errorf("cabi: list of %d pairs", n)
	}
	b, err := Take(p, n*PairSize)
	if err != nil {
		return nil, err
	}
	out := make([][2]string, n)
	for i := range out {
		e := uint32(i) * PairSize
		if out[i][0], err = TakeString(U32(b, e), U32(b, e+4)); err != nil {
			return nil, err
		}
		if out[i][1], err = TakeString(U32(b, e+8), U32(b, e+12)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// A Frame keeps the Go memory behind lowered values alive while the host may read it:
// for the duration of an import call, or from an export's return until its cabi_post.
type Frame struct{ keep []any }

// String returns the flat (ptr, len) of s, keeping its bytes alive with the frame.
func (f *Frame) String(s string) (uint32, uint32) {
	if len(s) == 0 {
		return 0, 0
	}
	f.keep = append(f.keep, s)
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))), uint32(len(s))
}

// Bytes returns the flat (ptr, len) of b, keeping it alive with the frame.
func (f *Frame) Bytes(b []byte) (uint32, uint32) {
	if len(b) == 0 {
		return 0, 0
	}
	f.keep = append(f.keep, b)
	return Addr(b), uint32(len(b))
}

// OptString returns the flat (discriminant, ptr, len) of an option<string>.
func (f *Frame) OptString(s *string) (uint32, uint32, uint32) {
	if s == nil {
		return 0, 0, 0
	}
	p, n := f.String(*s)
	return 1, p, n
}

// PutOptString stores an option<string> at off in b.
func (f *Frame) PutOptString(b []byte, off uint32, s *string) {
	d, p, n := f.OptString(s)
	b[off] = byte(d)
	PutU32(b, off+4, p)
	PutU32(b, off+8, n)
}

// Alloc returns a zeroed block kept alive with the frame.
func (f *Frame) Alloc(size, align uint32) (uint32, []byte) {
	p, b := Aligned(size, align)
	f.keep = append(f.keep, b)
	return p, b
}

// Pairs lowers a list<tuple<string, string>> and returns its flat (ptr, len).
func (f *Frame) Pairs(kv [][2]string) (uint32, uint32) {
	if len(kv) == 0 {
		return 0, 0
	}
	p, b := f.Alloc(uint32(len(kv))*PairSize, 4)
	for i, e := range kv {
		off := uint32(i) * PairSize
		kp, kn := f.String(e[0])
		vp, vn := f.String(e[1])
		PutU32(b, off, kp)
		PutU32(b, off+4, kn)
		PutU32(b, off+8, vp)
		PutU32(b, off+12, vn)
	}
	return p, uint32(len(kv))
}

// Hold keeps f alive until Release(ret), which the export's cabi_post calls.
func Hold(ret uint32, f *Frame) {
	mu.Lock()
	pending[ret] = f
	mu.Unlock()
}

// ReleaseAll drops every held frame. Exports call it on entry: cabi_post is optional,
// and by the next call the host has finished reading the previous result.
func ReleaseAll() {
	mu.Lock()
	clear(pending)
	mu.Unlock()
}

// Release drops the frame held for ret.
func Release(ret uint32) {
	mu.Lock()
	delete(pending, ret)
	mu.Unlock()
}
