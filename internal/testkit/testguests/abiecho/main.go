//go:build wasip1

// Command abiecho is a guest exporting one echo function per WIT type shape: each lifts
// its argument into Go values following the canonical ABI, then lowers the same value
// back as its result (through a return area when the result spills). Host tests lower
// random values with wit/abi, call the echo and lift the result: a second, independent
// implementation of the layout on the other side checks both directions.
//
// Exports, by WIT signature (all named echo-<shape>):
//
//	bool u8 u16 u32 u64 s8 s16 s32 s64 f32 f64 char   func(x: T) -> T
//	string list-u8 list-string                        func(x: T) -> T
//	rec      record rec { a: u32, b: string, c: option<list<u16>> }
//	list-rec list<rec>
//	tuple    tuple<s64, f32, char>
//	option   option<string>
//	result   result<string, u32>
//	enum     enum { red, green, blue }
//	variant  variant abc { a(u8), b(string), c }
//	mix      variant mix { i(s64), f(f32), d(f64), s(string) }
//	flags    flags with 10 labels
//	many     func(17 params: bool u8 u16 u32 u64 s8 s16 s32 s64 f32 f64 char string
//	         list<u8> flags10 option<string> abc) -> tuple<the same 17>
package main

import "math"

// Scalars: flat in, flat out.

//go:wasmexport echo-bool
func echoBool(x uint32) uint32 {
	begin()
	v := flatBool(x)
	lifted()
	if v {
		return 1
	}
	return 0
}

//go:wasmexport echo-u8
func echoU8(x uint32) uint32 { begin(); v := flatU8(x); lifted(); return uint32(v) }

//go:wasmexport echo-u16
func echoU16(x uint32) uint32 { begin(); v := flatU16(x); lifted(); return uint32(v) }

//go:wasmexport echo-u32
func echoU32(x uint32) uint32 { begin(); lifted(); return x }

//go:wasmexport echo-u64
func echoU64(x uint64) uint64 { begin(); lifted(); return x }

//go:wasmexport echo-s8
func echoS8(x uint32) uint32 { begin(); v := flatS8(x); lifted(); return uint32(int32(v)) }

//go:wasmexport echo-s16
func echoS16(x uint32) uint32 { begin(); v := flatS16(x); lifted(); return uint32(int32(v)) }

//go:wasmexport echo-s32
func echoS32(x int32) int32 { begin(); lifted(); return x }

//go:wasmexport echo-s64
func echoS64(x int64) int64 { begin(); lifted(); return x }

//go:wasmexport echo-f32
func echoF32(x float32) float32 {
	begin()
	bits := math.Float32bits(x)
	lifted()
	return math.Float32frombits(bits)
}

//go:wasmexport echo-f64
func echoF64(x float64) float64 {
	begin()
	bits := math.Float64bits(x)
	lifted()
	return math.Float64frombits(bits)
}

//go:wasmexport echo-char
func echoChar(x uint32) uint32 { begin(); c := validChar(x); lifted(); return uint32(c) }

// Strings and lists: (ptr, len) in, a return area of (ptr, len) out.

//go:wasmexport echo-string
func echoString(p, n uint32) uint32 {
	begin()
	s := takeString(p, n)
	lifted()
	ret, b := area(8, 4)
	putString(b, 0, s)
	return ret
}

//go:wasmexport echo-list-u8
func echoListU8(p, n uint32) uint32 {
	begin()
	v := takeBytes(p, n)
	lifted()
	ret, b := area(8, 4)
	vp, vn := lowerBytes(v)
	put32(b, 0, vp)
	put32(b, 4, vn)
	return ret
}

//go:wasmexport echo-list-string
func echoListString(p, n uint32) uint32 {
	begin()
	v := liftStrings(p, n)
	lifted()
	ret, b := area(8, 4)
	lp, ln := lowerStrings(v)
	put32(b, 0, lp)
	put32(b, 4, ln)
	return ret
}

// list<string>: elements of 8 bytes, (ptr, len), aligned 4.
func liftStrings(p, n uint32) []string {
	blk := take(p, elems(n, 8), 4)
	out := make([]string, n)
	for i := range out {
		out[i] = getString(blk, uint32(i)*8)
	}
	return out
}

func lowerStrings(v []string) (uint32, uint32) {
	if len(v) == 0 {
		return 0, 0
	}
	p, b := area(uint32(len(v))*8, 4)
	for i, s := range v {
		putString(b, uint32(i)*8, s)
	}
	return p, uint32(len(v))
}

// list<u16>: elements of 2 bytes, aligned 2.
func liftU16s(p, n uint32) []uint16 {
	blk := take(p, elems(n, 2), 2)
	out := make([]uint16, n)
	for i := range out {
		out[i] = le.Uint16(blk[i*2:])
	}
	return out
}

func lowerU16s(v []uint16) (uint32, uint32) {
	if len(v) == 0 {
		return 0, 0
	}
	p, b := area(uint32(len(v))*2, 2)
	for i, x := range v {
		le.PutUint16(b[i*2:], x)
	}
	return p, uint32(len(v))
}

// record rec { a: u32, b: string, c: option<list<u16>> }
//
// Memory: a @0, b @4 (ptr, len), c @12 (disc u8 @12, ptr @16, len @20); size 24, align 4.
// Flat: a, b.ptr, b.len, c.disc, c.ptr, c.len.
type rec struct {
	a     uint32
	b     string
	cSome bool
	c     []uint16
}

const recSize = 24

func liftOptU16s(what string, d, p, n uint32) (bool, []uint16) {
	switch disc(what, d, 2) {
	case 0:
		zero(what, uint64(p), uint64(n))
		return false, nil
	}
	return true, liftU16s(p, n)
}

func liftRecMem(b []byte) rec {
	if len(b) < recSize {
		fail("rec: %d bytes", len(b))
	}
	r := rec{a: get32(b, 0), b: getString(b, 4)}
	switch disc("rec.c", uint32(b[12]), 2) {
	case 1:
		r.cSome = true
		r.c = liftU16s(get32(b, 16), get32(b, 20))
	}
	return r
}

func storeRec(b []byte, r rec) {
	put32(b, 0, r.a)
	putString(b, 4, r.b)
	if r.cSome {
		b[12] = 1
		p, n := lowerU16s(r.c)
		put32(b, 16, p)
		put32(b, 20, n)
	}
}

//go:wasmexport echo-rec
func echoRec(a, bp, bn, cd, cp, cn uint32) uint32 {
	begin()
	r := rec{a: a, b: takeString(bp, bn)}
	r.cSome, r.c = liftOptU16s("rec.c", cd, cp, cn)
	lifted()
	ret, b := area(recSize, 4)
	storeRec(b, r)
	return ret
}

//go:wasmexport echo-list-rec
func echoListRec(p, n uint32) uint32 {
	begin()
	blk := take(p, elems(n, recSize), 4)
	v := make([]rec, n)
	for i := range v {
		v[i] = liftRecMem(blk[i*recSize:])
	}
	lifted()
	ret, b := area(8, 4)
	if len(v) > 0 {
		lp, lb := area(uint32(len(v))*recSize, 4)
		for i, r := range v {
			storeRec(lb[i*recSize:], r)
		}
		put32(b, 0, lp)
		put32(b, 4, uint32(len(v)))
	}
	return ret
}

// tuple<s64, f32, char>. Memory: s64 @0, f32 @8, char @12; size 16, align 8.
//
//go:wasmexport echo-tuple
func echoTuple(a int64, f float32, c uint32) uint32 {
	begin()
	fb := math.Float32bits(f)
	ch := validChar(c)
	lifted()
	ret, b := area(16, 8)
	le.PutUint64(b, uint64(a))
	put32(b, 8, fb)
	put32(b, 12, uint32(ch))
	return ret
}

// option<string>. Memory: disc u8 @0, ptr @4, len @8; size 12, align 4.
//
//go:wasmexport echo-option
func echoOption(d, p, n uint32) uint32 {
	begin()
	var s *string
	if disc("option", d, 2) == 1 {
		v := takeString(p, n)
		s = &v
	} else {
		zero("option none", uint64(p), uint64(n))
	}
	lifted()
	ret, b := area(12, 4)
	if s != nil {
		b[0] = 1
		putString(b, 4, *s)
	}
	return ret
}

// result<string, u32>. Memory: disc u8 @0, payload @4 (string ptr, len; or u32);
// size 12, align 4. Flat: disc, then the joined payload (i32, i32).
//
//go:wasmexport echo-result
func echoResult(d, x, y uint32) uint32 {
	begin()
	var (
		isErr bool
		ok    string
		code  uint32
	)
	if disc("result", d, 2) == 0 {
		ok = takeString(x, y)
	} else {
		isErr, code = true, x
		zero("result err", uint64(y))
	}
	lifted()
	ret, b := area(12, 4)
	if isErr {
		b[0] = 1
		put32(b, 4, code)
	} else {
		putString(b, 4, ok)
	}
	return ret
}

// enum { red, green, blue }: flat i32 case index.
//
//go:wasmexport echo-enum
func echoEnum(d uint32) uint32 { begin(); v := disc("enum", d, 3); lifted(); return v }

// flags with 10 labels: flat i32, bit i for label i.
//
//go:wasmexport echo-flags
func echoFlags(x uint32) uint32 {
	begin()
	if x>>10 != 0 {
		fail("flags10 lowered as %#x", x)
	}
	lifted()
	return x
}

// variant abc { a(u8), b(string), c }. Memory: disc u8 @0, payload @4 (u8; or string
// ptr, len); size 12, align 4. Flat: disc, (i32, i32).
type abc struct {
	c uint8
	a uint8
	b string
}

func liftAbcFlat(d, x, y uint32) abc {
	v := abc{c: uint8(disc("abc", d, 3))}
	switch v.c {
	case 0:
		v.a = flatU8(x)
		zero("abc.a", uint64(y))
	case 1:
		v.b = takeString(x, y)
	case 2:
		zero("abc.c", uint64(x), uint64(y))
	}
	return v
}

func liftAbcMem(b []byte) abc {
	v := abc{c: uint8(disc("abc", uint32(b[0]), 3))}
	switch v.c {
	case 0:
		v.a = b[4]
	case 1:
		v.b = getString(b, 4)
	}
	return v
}

func storeAbc(b []byte, v abc) {
	b[0] = v.c
	switch v.c {
	case 0:
		b[4] = v.a
	case 1:
		putString(b, 4, v.b)
	}
}

//go:wasmexport echo-variant
func echoVariant(d, x, y uint32) uint32 {
	begin()
	v := liftAbcFlat(d, x, y)
	lifted()
	ret, b := area(12, 4)
	storeAbc(b, v)
	return ret
}

// variant mix { i(s64), f(f32), d(f64), s(string) }: its payloads join to flat
// (i64, i32): an f32 travels as its bits zero-extended in the i64 slot, an f64 as its
// bits, a string's pointer zero-extended. Memory: disc u8 @0, payload @8; size 16,
// align 8.
//
//go:wasmexport echo-mix
func echoMix(d uint32, x uint64, y uint32) uint32 {
	begin()
	c := uint8(disc("mix", d, 4))
	var (
		payload uint64 // s64, f32 bits or f64 bits
		s       string
	)
	switch c {
	case 0, 2:
		payload = x
		zero("mix", uint64(y))
	case 1:
		if x>>32 != 0 {
			fail("mix.f: f32 in an i64 slot lowered as %#x", x)
		}
		payload = uint64(math.Float32bits(math.Float32frombits(uint32(x))))
		zero("mix.f", uint64(y))
	case 3:
		if x>>32 != 0 {
			fail("mix.s: pointer in an i64 slot lowered as %#x", x)
		}
		s = takeString(uint32(x), y)
	}
	lifted()
	ret, b := area(16, 8)
	b[0] = c
	switch c {
	case 0, 2:
		le.PutUint64(b[8:], payload)
	case 1:
		put32(b, 8, uint32(payload))
	case 3:
		putString(b, 8, s)
	}
	return ret
}

// echo-many: 17 parameters flatten to 21 core values, over 16, so the host passes a
// pointer to them stored as a tuple; the result tuple returns through a return area.
//
// Tuple layout (size 96, align 8):
//
//	bool @0  u8 @1  u16 @2  u32 @4  u64 @8  s8 @16  s16 @18  s32 @20  s64 @24
//	f32 @32  f64 @40  char @48  string @52  list<u8> @60  flags10 (u16) @68
//	option<string> @72 (disc @72, ptr @76, len @80)  abc @84 (disc @84, payload @88)
type many struct {
	b   bool
	u8  uint8
	u16 uint16
	u32 uint32
	u64 uint64
	s8  int8
	s16 int16
	s32 int32
	s64 int64
	f32 uint32 // bits
	f64 uint64 // bits
	ch  rune
	str string
	buf []byte
	fl  uint16
	opt *string
	abc abc
}

const manySize = 96

func liftMany(b []byte) many {
	m := many{
		b:   memBool(b[0]),
		u8:  b[1],
		u16: le.Uint16(b[2:]),
		u32: get32(b, 4),
		u64: le.Uint64(b[8:]),
		s8:  int8(b[16]),
		s16: int16(le.Uint16(b[18:])),
		s32: int32(get32(b, 20)),
		s64: int64(le.Uint64(b[24:])),
		f32: get32(b, 32),
		f64: le.Uint64(b[40:]),
		ch:  validChar(get32(b, 48)),
		str: getString(b, 52),
		buf: takeBytes(get32(b, 60), get32(b, 64)),
		fl:  le.Uint16(b[68:]),
		abc: liftAbcMem(b[84:]),
	}
	if m.fl>>10 != 0 {
		fail("many.flags stored as %#x", m.fl)
	}
	if disc("many.option", uint32(b[72]), 2) == 1 {
		s := getString(b, 76)
		m.opt = &s
	}
	return m
}

func storeMany(b []byte, m many) {
	if m.b {
		b[0] = 1
	}
	b[1] = m.u8
	le.PutUint16(b[2:], m.u16)
	put32(b, 4, m.u32)
	le.PutUint64(b[8:], m.u64)
	b[16] = byte(m.s8)
	le.PutUint16(b[18:], uint16(m.s16))
	put32(b, 20, uint32(m.s32))
	le.PutUint64(b[24:], uint64(m.s64))
	put32(b, 32, m.f32)
	le.PutUint64(b[40:], m.f64)
	put32(b, 48, uint32(m.ch))
	putString(b, 52, m.str)
	p, n := lowerBytes(m.buf)
	put32(b, 60, p)
	put32(b, 64, n)
	le.PutUint16(b[68:], m.fl)
	if m.opt != nil {
		b[72] = 1
		putString(b, 76, *m.opt)
	}
	storeAbc(b[84:], m.abc)
}

//go:wasmexport echo-many
func echoMany(p uint32) uint32 {
	begin()
	m := liftMany(take(p, manySize, 8))
	lifted()
	ret, b := area(manySize, 8)
	storeMany(b, m)
	return ret
}

func main() {}
