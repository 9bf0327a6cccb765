// Package wasmbin reads and writes the few parts of the WebAssembly binary format that
// the engine's module rewrites and the test module builder need: the section list,
// LEB128 numbers and constant expressions. Every reader is bounds-checked: malformed
// input makes it report failure, never panic.
package wasmbin

import (
	"encoding/binary"
	"errors"
)

// Section ids the rewrites look at.
const (
	SectionImport    = 2
	SectionGlobal    = 6
	SectionExport    = 7
	SectionData      = 11
	SectionDataCount = 12
)

// ErrMalformed is what a reader reports for input it cannot read.
var ErrMalformed = errors.New("wasmbin: unexpected module encoding")

// Section is one section of a module: mod[Header:End] is the whole section, mod[Start:End]
// its content.
type Section struct {
	ID                 byte
	Header, Start, End int
}

// Sections splits a module (magic and version included) into its sections; ok is false
// when a section header or size does not fit.
func Sections(mod []byte) (secs []Section, ok bool) {
	if len(mod) < 8 {
		return nil, false
	}
	for p := 8; p < len(mod); {
		size, n := binary.Uvarint(mod[p+1:])
		if n <= 0 || size > uint64(len(mod)) {
			return nil, false
		}
		start := p + 1 + n
		end := start + int(size)
		if end > len(mod) {
			return nil, false
		}
		secs = append(secs, Section{ID: mod[p], Header: p, Start: start, End: end})
		p = end
	}
	return secs, true
}

// Rebuild returns mod with the content of the sections whose index is in replace
// replaced; every other section is copied as it is.
func Rebuild(mod []byte, secs []Section, replace map[int][]byte) []byte {
	out := make([]byte, 0, len(mod))
	out = append(out, mod[:8]...)
	for i, s := range secs {
		content, ok := replace[i]
		if !ok {
			out = append(out, mod[s.Header:s.End]...)
			continue
		}
		out = append(out, s.ID)
		out = binary.AppendUvarint(out, uint64(len(content)))
		out = append(out, content...)
	}
	return out
}

// AppendSigned appends v as a signed LEB128 number.
func AppendSigned(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Reader reads a section's content. After any read past the end, Bad reports true and
// every further read returns zero.
type Reader struct {
	b []byte
	p int
}

// NewReader reads b from its start.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Bad reports whether a read went past the end or met a malformed number.
func (r *Reader) Bad() bool { return r.p > len(r.b) }

// Rest returns what is left unread.
func (r *Reader) Rest() []byte {
	if r.Bad() {
		return nil
	}
	return r.b[r.p:]
}

func (r *Reader) fail() { r.p = len(r.b) + 1 }

// U reads an unsigned LEB128 number.
func (r *Reader) U() uint64 {
	if r.Bad() {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.p:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.p += n
	return v
}

// S32 reads a signed LEB128 number of at most 32 bits (5 bytes).
func (r *Reader) S32() int32 {
	var result int64
	var shift uint
	for i := 0; i < 5; i++ {
		c := r.Byte()
		if r.Bad() {
			return 0
		}
		result |= int64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if shift < 64 && c&0x40 != 0 {
				result |= -1 << shift
			}
			return int32(result)
		}
	}
	r.fail()
	return 0
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.p >= len(r.b) {
		r.fail()
		return 0
	}
	r.p++
	return r.b[r.p-1]
}

// Bytes reads n bytes.
func (r *Reader) Bytes(n uint64) []byte {
	if r.Bad() || n > uint64(len(r.b)-r.p) {
		r.fail()
		return nil
	}
	out := r.b[r.p : r.p+int(n)]
	r.p += int(n)
	return out
}

// Limits skips a table's or memory's limits.
func (r *Reader) Limits() {
	flags := r.Byte()
	r.U()
	if flags&1 != 0 {
		r.U()
	}
}

// SkipConstExpr skips a constant expression up to and including its end opcode.
func (r *Reader) SkipConstExpr() error {
	for !r.Bad() {
		switch op := r.Byte(); op {
		case 0x0b:
			return nil
		case 0x41, 0x42, 0x23, 0xd2: // i32.const, i64.const (LEB), global.get, ref.func
			r.U()
		case 0x43:
			r.Bytes(4)
		case 0x44:
			r.Bytes(8)
		case 0xd0:
			r.Byte()
		case 0x6a, 0x6b, 0x6c, 0x7c, 0x7d, 0x7e: // extended-const arithmetic
		default:
			return ErrMalformed
		}
	}
	return ErrMalformed
}
