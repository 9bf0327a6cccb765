package abi

import (
	"encoding/binary"
	"math"
	"unicode/utf8"
)

// load lifts a value of type t stored in mem at ptr.
func load(mem Memory, t *Type, ptr uint32, lim limits) (any, error) {
	l := lifter{mem: mem, lim: lim.withDefaults()}
	return l.load(t, ptr)
}

// liftFlat lifts a value of type t from its flattened core values (len(t.flat) of
// them), reading strings and lists from mem.
func liftFlat(mem Memory, t *Type, flat []uint64, lim limits) (any, error) {
	if len(flat) != len(t.flat) {
		return nil, guestErr("%s: %d flat values, want %d", t, len(flat), len(t.flat))
	}
	l := lifter{mem: mem, lim: lim.withDefaults()}
	r := flatReader{vals: flat}
	return l.liftFlat(t, &r)
}

type lifter struct {
	mem  Memory
	lim  limits
	used uint64
}

// read returns n bytes at ptr after checking alignment and bounds.
func (l *lifter) read(what *Type, ptr uint32, n uint64, align uint32) ([]byte, error) {
	if ptr%align != 0 {
		return nil, guestErr("%s at ptr 0x%x: misaligned (alignment %d)", what, ptr, align)
	}
	size := l.mem.Size()
	if uint64(ptr)+n > uint64(size) {
		return nil, guestErr("%s at ptr 0x%x: %d bytes run past memory size %d", what, ptr, n, size)
	}
	if n == 0 {
		return nil, nil
	}
	b, ok := l.mem.Read(ptr, uint32(n))
	if !ok || uint64(len(b)) != n {
		return nil, guestErr("%s at ptr 0x%x: %d bytes not readable", what, ptr, n)
	}
	return b, nil
}

func (l *lifter) charge(what *Type, n uint64) error {
	l.used += n
	if l.used > l.lim.MaxTotal {
		return limitErr("%s: lifting needs more than the %d bytes allowed for one value", what, l.lim.MaxTotal)
	}
	return nil
}

func (l *lifter) load(t *Type, ptr uint32) (any, error) {
	b, err := l.read(t, ptr, uint64(t.size), t.align)
	if err != nil {
		return nil, err
	}
	return l.decode(t, b, ptr)
}

// decode lifts t from b, its t.size bytes read from ptr.
func (l *lifter) decode(t *Type, b []byte, ptr uint32) (any, error) {
	le := binary.LittleEndian
	switch t.kind {
	case KindBool:
		return b[0] != 0, nil
	case KindU8:
		return b[0], nil
	case KindS8:
		return int8(b[0]), nil
	case KindU16:
		return le.Uint16(b), nil
	case KindS16:
		return int16(le.Uint16(b)), nil
	case KindU32, KindOwn, KindBorrow:
		return le.Uint32(b), nil
	case KindS32:
		return int32(le.Uint32(b)), nil
	case KindU64:
		return le.Uint64(b), nil
	case KindS64:
		return int64(le.Uint64(b)), nil
	case KindF32:
		return math.Float32frombits(le.Uint32(b)), nil
	case KindF64:
		return math.Float64frombits(le.Uint64(b)), nil
	case KindChar:
		return liftChar(le.Uint32(b))
	case KindString:
		return l.string(le.Uint32(b), le.Uint32(b[4:]))
	case KindList:
		return l.list(t, le.Uint32(b), le.Uint32(b[4:]))
	case KindRecord, KindTuple:
		vals := make([]any, len(t.fields))
		var off uint32
		for i, f := range t.fields {
			off = alignTo(off, f.Type.align)
			v, err := l.decode(f.Type, b[off:], ptr+off)
			if err != nil {
				return nil, at(err, "."+f.Name)
			}
			vals[i] = v
			off += f.Type.size
		}
		return vals, nil
	case KindFlags:
		var v uint32
		switch t.size {
		case 1:
			v = uint32(b[0])
		case 2:
			v = uint32(le.Uint16(b))
		default:
			v = le.Uint32(b)
		}
		return v & flagMask(t), nil
	}
	// Variant-shaped kinds.
	var disc uint32
	switch t.discSize {
	case 1:
		disc = uint32(b[0])
	case 2:
		disc = uint32(le.Uint16(b))
	default:
		disc = le.Uint32(b)
	}
	if disc >= uint32(len(t.cases)) {
		return nil, guestErr("%s at ptr 0x%x: discriminant %d out of range (%d cases)", t, ptr, disc, len(t.cases))
	}
	var payload any
	if c := t.cases[disc]; c.Type != nil {
		v, err := l.decode(c.Type, b[t.payloadOff:], ptr+t.payloadOff)
		if err != nil {
			return nil, at(err, "."+c.Name)
		}
		payload = v
	}
	return variantValue(t, disc, payload), nil
}

func variantValue(t *Type, disc uint32, payload any) any {
	switch t.kind {
	case KindOption:
		return Option{Some: disc == 1, Value: payload}
	case KindResult:
		return Result{Err: disc == 1, Value: payload}
	case KindEnum:
		return disc
	}
	return Variant{Case: disc, Value: payload}
}

func flagMask(t *Type) uint32 {
	if len(t.labels) >= 32 {
		return math.MaxUint32
	}
	return 1<<len(t.labels) - 1
}

func liftChar(c uint32) (any, error) {
	if c > utf8.MaxRune || (c >= 0xD800 && c <= 0xDFFF) {
		return nil, guestErr("char: 0x%x is not a Unicode scalar value", c)
	}
	return rune(c), nil
}

func (l *lifter) string(ptr, n uint32) (any, error) {
	if n > l.lim.MaxString {
		return nil, limitErr("string at ptr 0x%x: length %d over the limit of %d bytes", ptr, n, l.lim.MaxString)
	}
	if err := l.charge(String, uint64(n)); err != nil {
		return nil, err
	}
	b, err := l.read(String, ptr, uint64(n), 1)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, guestErr("string at ptr 0x%x (len %d): invalid UTF-8", ptr, n)
	}
	return string(b), nil
}

func (l *lifter) list(t *Type, ptr, n uint32) (any, error) {
	if n > l.lim.MaxList {
		return nil, limitErr("%s at ptr 0x%x: length %d over the limit of %d elements", t, ptr, n, l.lim.MaxList)
	}
	elem := t.elem
	cost := uint64(n) * 16
	if elem.kind == KindU8 {
		cost = uint64(n)
	}
	if err := l.charge(t, cost); err != nil {
		return nil, err
	}
	b, err := l.read(t, ptr, uint64(n)*uint64(elem.size), elem.align)
	if err != nil {
		return nil, err
	}
	if elem.kind == KindU8 {
		return append(make([]byte, 0, n), b...), nil
	}
	vals := make([]any, n)
	for i := range n {
		off := i * elem.size
		v, err := l.decode(elem, b[off:], ptr+off)
		if err != nil {
			return nil, at(err, "["+itoa(i)+"]")
		}
		vals[i] = v
	}
	return vals, nil
}

type flatReader struct {
	vals []uint64
	i    int
}

// next returns the next flat value; callers check the count up front, so running out
// only happens on a bug and yields zero rather than a panic.
func (r *flatReader) next() uint64 {
	if r.i >= len(r.vals) {
		return 0
	}
	v := r.vals[r.i]
	r.i++
	return v
}

// liftFlat lifts t from flat values. Values joined into a wider slot (variants) are
// narrowed by the truncating conversions below, as the spec's coercions require.
func (l *lifter) liftFlat(t *Type, r *flatReader) (any, error) {
	switch t.kind {
	case KindBool:
		return uint32(r.next()) != 0, nil
	case KindU8:
		return uint8(r.next()), nil
	case KindS8:
		return int8(r.next()), nil
	case KindU16:
		return uint16(r.next()), nil
	case KindS16:
		return int16(r.next()), nil
	case KindU32, KindOwn, KindBorrow:
		return uint32(r.next()), nil
	case KindS32:
		return int32(r.next()), nil
	case KindU64:
		return r.next(), nil
	case KindS64:
		return int64(r.next()), nil
	case KindF32:
		return math.Float32frombits(uint32(r.next())), nil
	case KindF64:
		return math.Float64frombits(r.next()), nil
	case KindChar:
		return liftChar(uint32(r.next()))
	case KindString:
		p, n := uint32(r.next()), uint32(r.next())
		return l.string(p, n)
	case KindList:
		p, n := uint32(r.next()), uint32(r.next())
		return l.list(t, p, n)
	case KindRecord, KindTuple:
		vals := make([]any, len(t.fields))
		for i, f := range t.fields {
			v, err := l.liftFlat(f.Type, r)
			if err != nil {
				return nil, at(err, "."+f.Name)
			}
			vals[i] = v
		}
		return vals, nil
	case KindFlags:
		return uint32(r.next()) & flagMask(t), nil
	}
	disc := uint32(r.next())
	if disc >= uint32(len(t.cases)) {
		return nil, guestErr("%s: discriminant %d out of range (%d cases)", t, disc, len(t.cases))
	}
	width := len(t.flat) - 1
	end := min(r.i+width, len(r.vals))
	var payload any
	if c := t.cases[disc]; c.Type != nil {
		sub := flatReader{vals: r.vals[r.i:end]}
		v, err := l.liftFlat(c.Type, &sub)
		if err != nil {
			return nil, at(err, "."+c.Name)
		}
		payload = v
	}
	r.i = end
	return variantValue(t, disc, payload), nil
}

func itoa(i uint32) string {
	var buf [10]byte
	n := len(buf)
	for {
		n--
		buf[n] = byte('0' + i%10)
		i /= 10
		if i == 0 {
			return string(buf[n:])
		}
	}
}
