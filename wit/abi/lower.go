package abi

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// store lowers v, a value of type t, into mem at ptr (a guest-provided address, so it is
// checked like any other), allocating strings and lists through realloc.
func store(ctx context.Context, mem Memory, realloc Realloc, t *Type, ptr uint32, v any) error {
	w := lowerer{ctx: ctx, mem: mem, realloc: realloc}
	return w.store(t, ptr, v)
}

// lowerFlat lowers v, a value of type t, to its flattened core values, allocating
// strings and lists through realloc.
func lowerFlat(ctx context.Context, mem Memory, realloc Realloc, t *Type, v any) ([]uint64, error) {
	w := lowerer{ctx: ctx, mem: mem, realloc: realloc}
	return w.lowerFlat(t, v, make([]uint64, 0, len(t.flat)))
}

type lowerer struct {
	ctx     context.Context
	mem     Memory
	realloc Realloc
}

// alloc gets size bytes aligned to align from the guest and checks the pointer.
func (w *lowerer) alloc(what *Type, align, size uint32) (uint32, error) {
	if w.realloc == nil {
		return 0, guestErr("%s: %d bytes needed but the guest exports no cabi_realloc", what, size)
	}
	p, err := w.realloc(w.ctx, 0, 0, align, size)
	if err != nil {
		return 0, fmt.Errorf("abi: cabi_realloc(0, 0, %d, %d) for %s: %w", align, size, what.brief(), err)
	}
	if p == 0 && size > 0 {
		return 0, guestErr("cabi_realloc(0, 0, %d, %d) for %s returned 0", align, size, what)
	}
	if p%align != 0 {
		return 0, guestErr("cabi_realloc(0, 0, %d, %d) for %s returned misaligned ptr 0x%x", align, size, what, p)
	}
	if ms := w.mem.Size(); uint64(p)+uint64(size) > uint64(ms) {
		return 0, guestErr("cabi_realloc(0, 0, %d, %d) for %s returned ptr 0x%x past memory size %d", align, size, what, p, ms)
	}
	return p, nil
}

func (w *lowerer) write(what *Type, ptr uint32, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if !w.mem.Write(ptr, b) {
		return guestErr("%s at ptr 0x%x: %d bytes not writable (memory size %d)", what, ptr, len(b), w.mem.Size())
	}
	return nil
}

func (w *lowerer) store(t *Type, ptr uint32, v any) error {
	if ptr%t.align != 0 {
		return guestErr("%s at ptr 0x%x: misaligned (alignment %d)", t, ptr, t.align)
	}
	if ms := w.mem.Size(); uint64(ptr)+uint64(t.size) > uint64(ms) {
		return guestErr("%s at ptr 0x%x: %d bytes run past memory size %d", t, ptr, t.size, ms)
	}
	buf := make([]byte, t.size)
	if err := w.encode(t, v, buf); err != nil {
		return err
	}
	return w.write(t, ptr, buf)
}

// encode lowers v into b, t.size zeroed bytes.
func (w *lowerer) encode(t *Type, v any, b []byte) error {
	le := binary.LittleEndian
	switch t.kind {
	case KindBool, KindU8, KindS8, KindU16, KindS16:
		return encodeSmall(t, v, b)
	case KindU32, KindS32, KindF32, KindChar, KindOwn, KindBorrow:
		x, err := scalar32(t, v)
		if err != nil {
			return err
		}
		le.PutUint32(b, x)
		return nil
	case KindU64, KindS64, KindF64:
		x, err := scalar64(t, v)
		if err != nil {
			return err
		}
		le.PutUint64(b, x)
		return nil
	case KindString, KindList:
		p, n, err := w.lowerBuf(t, v)
		if err != nil {
			return err
		}
		le.PutUint32(b, p)
		le.PutUint32(b[4:], n)
		return nil
	case KindRecord, KindTuple:
		return w.encodeFields(t, v, b)
	}
	if t.kind == KindFlags {
		return encodeFlags(t, v, b)
	}
	return w.encodeVariant(t, v, b)
}

// encodeSmall lowers a bool or an 8- or 16-bit integer, which must arrive as exactly
// the Go type of its kind.
func encodeSmall(t *Type, v any, b []byte) error {
	le := binary.LittleEndian
	bad := func() error { return valueErr(t, "got %T", v) }
	switch t.kind {
	case KindBool:
		x, ok := v.(bool)
		if !ok {
			return bad()
		}
		if x {
			b[0] = 1
		}
		return nil
	case KindU8:
		x, ok := v.(uint8)
		if !ok {
			return bad()
		}
		b[0] = x
		return nil
	case KindS8:
		x, ok := v.(int8)
		if !ok {
			return bad()
		}
		b[0] = byte(x)
		return nil
	case KindU16:
		x, ok := v.(uint16)
		if !ok {
			return bad()
		}
		le.PutUint16(b, x)
		return nil
	}
	x, ok := v.(int16) // KindS16
	if !ok {
		return bad()
	}
	le.PutUint16(b, uint16(x))
	return nil
}

// encodeFields lowers a record or tuple, given as []any in field order, each field at
// its aligned offset.
func (w *lowerer) encodeFields(t *Type, v any, b []byte) error {
	vals, ok := v.([]any)
	if !ok || len(vals) != len(t.fields) {
		return valueErr(t, "want []any of %d fields, got %T", len(t.fields), v)
	}
	var off uint32
	for i, f := range t.fields {
		off = alignTo(off, f.Type.align)
		if err := w.encode(f.Type, vals[i], b[off:off+f.Type.size]); err != nil {
			return at(err, "."+f.Name)
		}
		off += f.Type.size
	}
	return nil
}

// encodeFlags lowers a flags value into the 1, 2 or 4 bytes its flag count needs.
func encodeFlags(t *Type, v any, b []byte) error {
	le := binary.LittleEndian
	x, err := flagsValue(t, v)
	if err != nil {
		return err
	}
	switch t.size {
	case 1:
		b[0] = byte(x)
	case 2:
		le.PutUint16(b, uint16(x))
	default:
		le.PutUint32(b, x)
	}
	return nil
}

// encodeVariant lowers a variant-shaped value (variant, enum, option, result): the
// discriminant in its size, then the case's payload, if it has one, at the payload offset.
func (w *lowerer) encodeVariant(t *Type, v any, b []byte) error {
	le := binary.LittleEndian
	disc, payload, err := variantParts(t, v)
	if err != nil {
		return err
	}
	switch t.discSize {
	case 1:
		b[0] = byte(disc)
	case 2:
		le.PutUint16(b, uint16(disc))
	default:
		le.PutUint32(b, disc)
	}
	if c := t.cases[disc]; c.Type != nil {
		if err := w.encode(c.Type, payload, b[t.payloadOff:t.payloadOff+c.Type.size]); err != nil {
			return at(err, "."+c.Name)
		}
	}
	return nil
}

// scalar32 converts an i32-or-f32-sized scalar to its bits.
func scalar32(t *Type, v any) (uint32, error) {
	switch t.kind {
	case KindU32, KindOwn, KindBorrow:
		if x, ok := v.(uint32); ok {
			return x, nil
		}
	case KindS32:
		if x, ok := v.(int32); ok {
			return uint32(x), nil
		}
	case KindF32:
		if x, ok := v.(float32); ok {
			return math.Float32bits(x), nil
		}
	case KindChar:
		if x, ok := v.(rune); ok {
			if x < 0 || x > utf8.MaxRune || (x >= 0xD800 && x <= 0xDFFF) {
				return 0, valueErr(t, "0x%x is not a Unicode scalar value", x)
			}
			return uint32(x), nil
		}
	}
	return 0, valueErr(t, "got %T", v)
}

func scalar64(t *Type, v any) (uint64, error) {
	switch t.kind {
	case KindU64:
		if x, ok := v.(uint64); ok {
			return x, nil
		}
	case KindS64:
		if x, ok := v.(int64); ok {
			return uint64(x), nil
		}
	case KindF64:
		if x, ok := v.(float64); ok {
			return math.Float64bits(x), nil
		}
	}
	return 0, valueErr(t, "got %T", v)
}

func flagsValue(t *Type, v any) (uint32, error) {
	x, ok := v.(uint32)
	if !ok {
		return 0, valueErr(t, "want uint32, got %T", v)
	}
	if x&^flagMask(t) != 0 {
		return 0, valueErr(t, "bits 0x%x set beyond its %d labels", x&^flagMask(t), len(t.labels))
	}
	return x, nil
}

// variantParts returns the case index and payload of a variant-shaped value.
func variantParts(t *Type, v any) (uint32, any, error) {
	var disc uint32
	var payload any
	switch t.kind {
	case KindOption:
		o, ok := v.(Option)
		if !ok {
			return 0, nil, valueErr(t, "want abi.Option, got %T", v)
		}
		if o.Some {
			disc = 1
		}
		payload = o.Value
	case KindResult:
		r, ok := v.(Result)
		if !ok {
			return 0, nil, valueErr(t, "want abi.Result, got %T", v)
		}
		if r.Err {
			disc = 1
		}
		payload = r.Value
	case KindEnum:
		x, ok := v.(uint32)
		if !ok {
			return 0, nil, valueErr(t, "want uint32, got %T", v)
		}
		disc = x
	case KindVariant:
		x, ok := v.(Variant)
		if !ok {
			return 0, nil, valueErr(t, "want abi.Variant, got %T", v)
		}
		disc, payload = x.Case, x.Value
	}
	if disc >= uint32(len(t.cases)) {
		return 0, nil, valueErr(t, "case %d out of range (%d cases)", disc, len(t.cases))
	}
	if t.cases[disc].Type == nil && payload != nil && t.kind != KindOption {
		return 0, nil, valueErr(t, "case %s has no payload, got %T", t.cases[disc].Name, payload)
	}
	return disc, payload, nil
}

// lowerBuf copies a string or list into a fresh guest allocation.
func (w *lowerer) lowerBuf(t *Type, v any) (ptr, n uint32, err error) {
	if t.kind == KindString {
		s, ok := v.(string)
		if !ok {
			return 0, 0, valueErr(t, "got %T", v)
		}
		if !utf8.ValidString(s) {
			return 0, 0, valueErr(t, "invalid UTF-8")
		}
		if len(s) > math.MaxInt32 {
			return 0, 0, valueErr(t, "%d bytes, more than a string may hold", len(s))
		}
		p, err := w.alloc(t, 1, uint32(len(s)))
		if err != nil {
			return 0, 0, err
		}
		return p, uint32(len(s)), w.write(t, p, []byte(s))
	}
	elem := t.elem
	if bs, ok := v.([]byte); ok && elem.kind == KindU8 {
		if uint64(len(bs)) > math.MaxUint32 {
			return 0, 0, valueErr(t, "%d bytes, more than a list may hold", len(bs))
		}
		p, err := w.alloc(t, 1, uint32(len(bs)))
		if err != nil {
			return 0, 0, err
		}
		return p, uint32(len(bs)), w.write(t, p, bs)
	}
	vals, ok := v.([]any)
	if !ok {
		return 0, 0, valueErr(t, "got %T", v)
	}
	total := uint64(len(vals)) * uint64(elem.size)
	if total > math.MaxUint32 || uint64(len(vals)) > math.MaxUint32 {
		return 0, 0, valueErr(t, "%d elements, more than a list may hold", len(vals))
	}
	p, err := w.alloc(t, elem.align, uint32(total))
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, total)
	for i, x := range vals {
		off := uint32(i) * elem.size
		if err := w.encode(elem, x, buf[off:off+elem.size]); err != nil {
			return 0, 0, at(err, "["+itoa(uint32(i))+"]")
		}
	}
	return p, uint32(len(vals)), w.write(t, p, buf)
}

// lowerFlat appends the flattening of v to out. A variant's payload is padded with
// zeros to the variant's width; with every value kept as uint64 (i32 zero-extended,
// floats as their bits) the spec's widening coercions are the identity.
func (w *lowerer) lowerFlat(t *Type, v any, out []uint64) ([]uint64, error) {
	bad := func() error { return valueErr(t, "got %T", v) }
	switch t.kind {
	case KindBool:
		x, ok := v.(bool)
		if !ok {
			return nil, bad()
		}
		if x {
			return append(out, 1), nil
		}
		return append(out, 0), nil
	case KindU8:
		x, ok := v.(uint8)
		if !ok {
			return nil, bad()
		}
		return append(out, uint64(x)), nil
	case KindS8:
		x, ok := v.(int8)
		if !ok {
			return nil, bad()
		}
		return append(out, uint64(uint32(int32(x)))), nil
	case KindU16:
		x, ok := v.(uint16)
		if !ok {
			return nil, bad()
		}
		return append(out, uint64(x)), nil
	case KindS16:
		x, ok := v.(int16)
		if !ok {
			return nil, bad()
		}
		return append(out, uint64(uint32(int32(x)))), nil
	case KindU32, KindS32, KindF32, KindChar, KindOwn, KindBorrow:
		x, err := scalar32(t, v)
		if err != nil {
			return nil, err
		}
		return append(out, uint64(x)), nil
	case KindU64, KindS64, KindF64:
		x, err := scalar64(t, v)
		if err != nil {
			return nil, err
		}
		return append(out, x), nil
	case KindString, KindList:
		p, n, err := w.lowerBuf(t, v)
		if err != nil {
			return nil, err
		}
		return append(out, uint64(p), uint64(n)), nil
	case KindRecord, KindTuple:
		vals, ok := v.([]any)
		if !ok || len(vals) != len(t.fields) {
			return nil, valueErr(t, "want []any of %d fields, got %T", len(t.fields), v)
		}
		for i, f := range t.fields {
			var err error
			if out, err = w.lowerFlat(f.Type, vals[i], out); err != nil {
				return nil, at(err, "."+f.Name)
			}
		}
		return out, nil
	case KindFlags:
		x, err := flagsValue(t, v)
		if err != nil {
			return nil, err
		}
		return append(out, uint64(x)), nil
	}
	disc, payload, err := variantParts(t, v)
	if err != nil {
		return nil, err
	}
	out = append(out, uint64(disc))
	end := len(out) + len(t.flat) - 1
	if c := t.cases[disc]; c.Type != nil {
		if out, err = w.lowerFlat(c.Type, payload, out); err != nil {
			return nil, at(err, "."+c.Name)
		}
	}
	for len(out) < end {
		out = append(out, 0)
	}
	return out, nil
}
