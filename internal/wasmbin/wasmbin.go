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

// More section ids, for rewrites that add or move sections.
const (
	SectionCustom   = 0
	SectionType     = 1
	SectionFunction = 3
	SectionTable    = 4
	SectionMemory   = 5
	SectionStart    = 8
	SectionElement  = 9
	SectionCode     = 10
	SectionTag      = 13
)

// Order returns where a known section goes among the others (custom sections: -1), so
// a rewrite can insert a new section at its place.
func Order(id byte) int {
	switch id {
	case SectionCustom:
		return -1
	case SectionTag:
		return 55 // between memory (5) and global (6)
	case SectionDataCount:
		return 95 // between element (9) and code (10)
	}
	return int(id) * 10
}

// Opcodes the interrupt rewrite looks for.
const (
	OpUnreachable        = 0x00
	OpBlock              = 0x02
	OpLoop               = 0x03
	OpIf                 = 0x04
	OpEnd                = 0x0b
	OpCall               = 0x10
	OpCallIndirect       = 0x11
	OpReturnCall         = 0x12
	OpReturnCallIndirect = 0x13
	OpGlobalGet          = 0x23
)

// Instr reads one instruction of a function body — WebAssembly 2.0 (SIMD included),
// threads and tail calls — and returns its opcode and its first immediate (the function
// index of a call). It returns ErrMalformed for anything else, so a rewrite never
// passes over an instruction it cannot size.
func (r *Reader) Instr() (op byte, imm uint64, err error) {
	op = r.Byte()
	switch {
	case op == 0x02 || op == 0x03 || op == 0x04: // block type: 0x40, a value type or an s33 type index
		r.skipLEB()
	case op == 0x0c || op == 0x0d || op == 0x10 || op == 0x12 || (op >= 0x20 && op <= 0x26) || op == 0xd2:
		imm = r.U()
	case op == 0x0e: // br_table: the labels and the default
		n := r.U()
		for i := uint64(0); i <= n && !r.Bad(); i++ {
			r.U()
		}
	case op == 0x11 || op == 0x13: // type, table
		imm = r.U()
		r.U()
	case op == 0x1c: // select with types
		n := r.U()
		for i := uint64(0); i < n && !r.Bad(); i++ {
			r.Byte()
		}
	case op >= 0x28 && op <= 0x3e:
		r.memarg()
	case op == 0x3f || op == 0x40 || op == 0xd0:
		r.Byte()
	case op == 0x41 || op == 0x42:
		r.skipLEB()
	case op == 0x43:
		r.Bytes(4)
	case op == 0x44:
		r.Bytes(8)
	case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
		op >= 0x45 && op <= 0xc4, op == 0xd1:
	case op == 0xfc:
		err = r.prefixedFC()
	case op == 0xfd:
		err = r.prefixedSIMD()
	case op == 0xfe:
		if sub := r.U(); sub == 0x03 { // atomic.fence
			r.Byte()
		} else {
			r.memarg()
		}
	default:
		err = ErrMalformed
	}
	if err == nil && r.Bad() {
		err = ErrMalformed
	}
	return op, imm, err
}

// skipLEB skips one LEB128 number of any width and sign.
func (r *Reader) skipLEB() {
	for i := 0; i < 10; i++ {
		if r.Byte()&0x80 == 0 {
			return
		}
	}
	r.fail()
}

// memarg skips a memory argument: alignment (bit 6 set: a memory index follows) and offset.
func (r *Reader) memarg() {
	if r.U()&0x40 != 0 {
		r.U()
	}
	r.U()
}

func (r *Reader) prefixedFC() error {
	switch sub := r.U(); {
	case sub <= 7: // saturating truncations
	case sub == 8 || sub == 10 || sub == 12 || sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.U()
		r.U()
	case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.U()
	default:
		return ErrMalformed
	}
	return nil
}

func (r *Reader) prefixedSIMD() error {
	switch sub := r.U(); {
	case sub <= 11 || sub == 92 || sub == 93: // loads and stores
		r.memarg()
	case sub == 12 || sub == 13: // v128.const, i8x16.shuffle
		r.Bytes(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.Byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.memarg()
		r.Byte()
	case sub <= 255:
	default:
		return ErrMalformed
	}
	return nil
}
