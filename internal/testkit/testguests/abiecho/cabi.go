//go:build wasip1

package main

// The guest half of the canonical ABI for the echo exports, written from the spec and
// independently of wit/abi and wit/guest: the allocator the host lowers into, taking
// ownership of what it wrote, and keeping lowered results alive until the next call.
//
// Beyond what the spec requires of a lifter, every take checks that the host allocated
// exactly the block the value needs (size and alignment), that every block it allocated
// is referenced exactly once by the arguments, and that flat values are in canonical
// form (zero-extended small integers, zeroed variant padding). A violation panics,
// which exits the guest with the message on stderr.

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
	"unsafe"
)

var le = binary.LittleEndian

type block struct {
	b     []byte
	align uint32
}

var (
	// live holds every block the host allocated through cabi_realloc and has not yet
	// been taken by an argument.
	live = map[uint32]block{}
	// held keeps the Go memory behind the last call's results alive until the next
	// call: by then the host has read them.
	held []any
)

func fail(format string, args ...any) {
	panic(fmt.Sprintf("abiecho: "+format, args...))
}

func addrOf(b []byte) uint32 { return uint32(uintptr(unsafe.Pointer(unsafe.SliceData(b)))) }

// aligned returns size zeroed bytes at an address that is a multiple of align.
func aligned(size, align uint32) (uint32, []byte) {
	buf := make([]byte, size+align)
	a := addrOf(buf)
	off := (align - a%align) % align
	return a + off, buf[off : off+size : off+size]
}

//go:wasmexport cabi_realloc
func cabiRealloc(oldPtr, oldSize, align, newSize uint32) uint32 {
	if align == 0 || align&(align-1) != 0 || align > 8 {
		fail("cabi_realloc: alignment %d", align)
	}
	var old []byte
	if oldPtr != 0 {
		blk, ok := live[oldPtr]
		if !ok {
			fail("cabi_realloc: old pointer %#x was not allocated here", oldPtr)
		}
		delete(live, oldPtr)
		old = blk.b[:min(oldSize, uint32(len(blk.b)))]
	}
	if newSize == 0 {
		return align // an aligned, non-null pointer to nothing
	}
	p, b := aligned(newSize, align)
	copy(b, old)
	live[p] = block{b: b, align: align}
	return p
}

// begin starts an export: the previous call's results are no longer needed.
func begin() {
	clear(held)
	held = held[:0]
}

// lifted ends the lifting of an export's arguments: every block the host allocated for
// them must have been taken.
func lifted() {
	if len(live) != 0 {
		n := len(live)
		clear(live)
		fail("%d host allocations not referenced by the arguments", n)
	}
}

// take returns the n-byte block the host allocated at p with alignment align, and
// forgets it. A zero-length value references no block.
func take(p, n, align uint32) []byte {
	if n == 0 {
		return nil
	}
	blk, ok := live[p]
	if !ok {
		fail("pointer %#x (len %d) was not allocated through cabi_realloc, or was used twice", p, n)
	}
	delete(live, p)
	if uint32(len(blk.b)) != n || blk.align != align {
		fail("block at %#x: %d bytes aligned %d, want %d aligned %d", p, len(blk.b), blk.align, n, align)
	}
	return blk.b
}

func takeString(p, n uint32) string {
	b := take(p, n, 1)
	if !utf8.Valid(b) {
		fail("string at %#x (len %d): invalid UTF-8", p, n)
	}
	return string(b)
}

func takeBytes(p, n uint32) []byte {
	return append([]byte(nil), take(p, n, 1)...)
}

// elems checks a list length against a sane bound and returns its byte size.
func elems(n, size uint32) uint32 {
	if n > 1<<26 {
		fail("list of %d elements", n)
	}
	return n * size
}

func keep(v any) { held = append(held, v) }

// area returns a zeroed block for lowering, kept alive until the next call.
func area(size, align uint32) (uint32, []byte) {
	p, b := aligned(size, align)
	keep(b)
	return p, b
}

func lowerString(s string) (uint32, uint32) {
	if s == "" {
		return 0, 0
	}
	keep(s)
	return uint32(uintptr(unsafe.Pointer(unsafe.StringData(s)))), uint32(len(s))
}

func lowerBytes(b []byte) (uint32, uint32) {
	if len(b) == 0 {
		return 0, 0
	}
	keep(b)
	return addrOf(b), uint32(len(b))
}

func put32(b []byte, off, v uint32)     { le.PutUint32(b[off:], v) }
func get32(b []byte, off uint32) uint32 { return le.Uint32(b[off:]) }

func putString(b []byte, off uint32, s string) {
	p, n := lowerString(s)
	put32(b, off, p)
	put32(b, off+4, n)
}

func getString(b []byte, off uint32) string { return takeString(get32(b, off), get32(b, off+4)) }

// Canonical-form checks of flat values.

func flatBool(x uint32) bool {
	if x > 1 {
		fail("bool lowered as %d", x)
	}
	return x == 1
}

func flatU8(x uint32) uint8 {
	if x > 0xff {
		fail("u8 lowered as %#x", x)
	}
	return uint8(x)
}

func flatU16(x uint32) uint16 {
	if x > 0xffff {
		fail("u16 lowered as %#x", x)
	}
	return uint16(x)
}

func flatS8(x uint32) int8 {
	if v := int32(x); v < -128 || v > 127 {
		fail("s8 lowered as %#x", x)
	}
	return int8(x)
}

func flatS16(x uint32) int16 {
	if v := int32(x); v < -32768 || v > 32767 {
		fail("s16 lowered as %#x", x)
	}
	return int16(x)
}

func validChar(c uint32) rune {
	if c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF) {
		fail("char %#x is not a Unicode scalar value", c)
	}
	return rune(c)
}

func zero(what string, xs ...uint64) {
	for _, x := range xs {
		if x != 0 {
			fail("%s: padding slot lowered as %#x, want 0", what, x)
		}
	}
}

func disc(what string, d, n uint32) uint32 {
	if d >= n {
		fail("%s: discriminant %d of %d cases", what, d, n)
	}
	return d
}

func memBool(b byte) bool {
	if b > 1 {
		fail("bool stored as %d", b)
	}
	return b == 1
}
