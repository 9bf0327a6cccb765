package abi

import (
	"fmt"
	"strings"
)

// Kind names the shape of a Type.
type Kind uint8

// The kinds of the component model's value types this package supports.
const (
	KindBool Kind = iota + 1
	KindU8
	KindU16
	KindU32
	KindU64
	KindS8
	KindS16
	KindS32
	KindS64
	KindF32
	KindF64
	KindChar
	KindString
	KindList
	KindRecord
	KindTuple
	KindOption
	KindResult
	KindEnum
	KindVariant
	KindFlags
	KindOwn    // own<R>: a resource handle the receiver takes over
	KindBorrow // borrow<R>: a resource handle lent for the call
)

// ValType is a core wasm value type. Its values are wasm's type codes, so it converts
// directly to wazero's api.ValueType.
type ValType byte

// Core value types.
const (
	I32 ValType = 0x7f
	I64 ValType = 0x7e
	F32 ValType = 0x7d
	F64 ValType = 0x7c
)

func (v ValType) String() string {
	switch v {
	case I32:
		return "i32"
	case I64:
		return "i64"
	case F32:
		return "f32"
	case F64:
		return "f64"
	}
	return fmt.Sprintf("valtype(0x%x)", byte(v))
}

// Spec limits on flattening (canonical ABI).
const (
	MaxFlatParams  = 16
	MaxFlatResults = 1
)

// MaxFlags is the most labels a flags type may have (the spec's current limit).
const MaxFlags = 32

// Field is one named field of a record.
type Field struct {
	Name string
	Type *Type
}

// Case is one case of a variant; Type is nil for a case without a payload.
type Case struct {
	Name string
	Type *Type
}

// F is shorthand for a record Field.
func F(name string, t *Type) Field { return Field{Name: name, Type: t} }

// C is shorthand for a variant Case; t may be nil.
func C(name string, t *Type) Case { return Case{Name: name, Type: t} }

// Type describes a component-model value type. Types are immutable once built; size,
// alignment and flattening are computed at construction. Constructors panic on a
// malformed description (nil element, no cases, too many flags): types are written by
// the host, never taken from a guest.
type Type struct {
	kind   Kind
	name   string  // set by Named
	res    string  // own, borrow: the resource's name
	elem   *Type   // list, option
	fields []Field // record, tuple (names "0", "1", …)
	cases  []Case  // variant, enum, result (ok, err), option (none, some)
	labels []string

	size, align uint32
	payloadOff  uint32 // variants: offset of the payload after the discriminant
	discSize    uint32 // variants: 1, 2 or 4
	flat        []ValType
}

func prim(k Kind, size uint32, flat ValType) *Type {
	return &Type{kind: k, size: size, align: size, flat: []ValType{flat}}
}

// Primitive types.
var (
	Bool   = prim(KindBool, 1, I32)
	U8     = prim(KindU8, 1, I32)
	U16    = prim(KindU16, 2, I32)
	U32    = prim(KindU32, 4, I32)
	U64    = prim(KindU64, 8, I64)
	S8     = prim(KindS8, 1, I32)
	S16    = prim(KindS16, 2, I32)
	S32    = prim(KindS32, 4, I32)
	S64    = prim(KindS64, 8, I64)
	Char   = prim(KindChar, 4, I32)
	String = &Type{kind: KindString, size: 8, align: 4, flat: []ValType{I32, I32}}

	// Float32 and Float64 are f32 and f64 (F32 and F64 name core value types).
	Float32 = prim(KindF32, 4, F32)
	Float64 = prim(KindF64, 8, F64)
)

// List is list<elem>.
func List(elem *Type) *Type {
	mustType("list element", elem)
	return &Type{kind: KindList, elem: elem, size: 8, align: 4, flat: []ValType{I32, I32}}
}

// Record is a record of the given fields, in order.
func Record(fields ...Field) *Type {
	for _, f := range fields {
		mustType("record field "+f.Name, f.Type)
	}
	t := &Type{kind: KindRecord, fields: append([]Field(nil), fields...)}
	t.layoutFields()
	return t
}

// Tuple is tuple<elems...>; it is laid out as a record.
func Tuple(elems ...*Type) *Type {
	fields := make([]Field, len(elems))
	for i, e := range elems {
		mustType("tuple element", e)
		fields[i] = Field{Name: fmt.Sprint(i), Type: e}
	}
	t := &Type{kind: KindTuple, fields: fields}
	t.layoutFields()
	return t
}

// OptionOf is option<t>, laid out as variant { none, some(t) }.
func OptionOf(t *Type) *Type {
	mustType("option element", t)
	o := &Type{kind: KindOption, elem: t, cases: []Case{{"none", nil}, {"some", t}}}
	o.layoutVariant()
	return o
}

// ResultOf is result<ok, err>; either may be nil for a side without a payload.
func ResultOf(ok, err *Type) *Type {
	r := &Type{kind: KindResult, cases: []Case{{"ok", ok}, {"error", err}}}
	r.layoutVariant()
	return r
}

// Enum is an enum of the given case names; its value is the case index.
func Enum(names ...string) *Type {
	if len(names) == 0 {
		panic("abi: enum without cases")
	}
	cases := make([]Case, len(names))
	for i, n := range names {
		cases[i] = Case{Name: n}
	}
	t := &Type{kind: KindEnum, cases: cases}
	t.layoutVariant()
	return t
}

// VariantOf is a variant of the given cases.
func VariantOf(cases ...Case) *Type {
	if len(cases) == 0 {
		panic("abi: variant without cases")
	}
	t := &Type{kind: KindVariant, cases: append([]Case(nil), cases...)}
	t.layoutVariant()
	return t
}

// Flags is a flags type of 1 to MaxFlags labels; its value is a uint32 bit set, bit i
// for label i.
func Flags(labels ...string) *Type {
	if len(labels) == 0 || len(labels) > MaxFlags {
		panic(fmt.Sprintf("abi: flags needs 1 to %d labels, got %d", MaxFlags, len(labels)))
	}
	t := &Type{kind: KindFlags, labels: append([]string(nil), labels...), flat: []ValType{I32}}
	switch {
	case len(labels) <= 8:
		t.size = 1
	case len(labels) <= 16:
		t.size = 2
	default:
		t.size = 4
	}
	t.align = t.size
	return t
}

// Own is own<resource>, a handle the receiver takes over; its value is the uint32 handle
// index (which table it indexes is the caller's business) and it flattens to one i32.
func Own(resource string) *Type {
	return &Type{kind: KindOwn, res: resource, size: 4, align: 4, flat: []ValType{I32}}
}

// Borrow is borrow<resource>, a handle lent for one call; laid out like Own.
func Borrow(resource string) *Type {
	return &Type{kind: KindBorrow, res: resource, size: 4, align: 4, flat: []ValType{I32}}
}

func mustType(what string, t *Type) {
	if t == nil {
		panic("abi: nil type for " + what)
	}
}

func alignTo(n, a uint32) uint32 { return (n + a - 1) / a * a }

func (t *Type) layoutFields() {
	t.align = 1
	var s uint32
	for _, f := range t.fields {
		s = alignTo(s, f.Type.align) + f.Type.size
		t.align = max(t.align, f.Type.align)
		t.flat = append(t.flat, f.Type.flat...)
	}
	t.size = alignTo(s, t.align)
}

func (t *Type) layoutVariant() {
	n := len(t.cases)
	switch {
	case n <= 1<<8:
		t.discSize = 1
	case n <= 1<<16:
		t.discSize = 2
	default:
		t.discSize = 4
	}
	caseAlign, caseSize := uint32(1), uint32(0)
	var flat []ValType
	for _, c := range t.cases {
		if c.Type == nil {
			continue
		}
		caseAlign = max(caseAlign, c.Type.align)
		caseSize = max(caseSize, c.Type.size)
		for i, ft := range c.Type.flat {
			if i < len(flat) {
				flat[i] = join(flat[i], ft)
			} else {
				flat = append(flat, ft)
			}
		}
	}
	t.align = max(t.discSize, caseAlign)
	t.payloadOff = alignTo(t.discSize, caseAlign)
	t.size = alignTo(t.payloadOff+caseSize, t.align)
	t.flat = append([]ValType{I32}, flat...)
}

func join(a, b ValType) ValType {
	if a == b {
		return a
	}
	if (a == I32 && b == F32) || (a == F32 && b == I32) {
		return I32
	}
	return I64
}

// Kind reports the type's kind.
func (t *Type) Kind() Kind { return t.kind }

// Elem is the element type of a list or option, else nil.
func (t *Type) Elem() *Type { return t.elem }

// Fields are the fields of a record or tuple; the caller must not modify them.
func (t *Type) Fields() []Field { return t.fields }

// Cases are the cases of a variant, enum, option or result; the caller must not modify
// them.
func (t *Type) Cases() []Case { return t.cases }

// Labels are the labels of a flags type; the caller must not modify them.
func (t *Type) Labels() []string { return t.labels }

// Resource is the resource name of an own or borrow handle, else "".
func (t *Type) Resource() string { return t.res }

// Named returns t under a name, which String and error messages use instead of its
// structure (e.g. "tool-result"); layout and values are unchanged.
func (t *Type) Named(name string) *Type {
	n := *t
	n.name = name
	return &n
}

// String renders the type in WIT-like syntax, or as its name if it has one.
func (t *Type) String() string {
	var b strings.Builder
	t.write(&b)
	return b.String()
}

var primNames = map[Kind]string{
	KindBool: "bool", KindU8: "u8", KindU16: "u16", KindU32: "u32", KindU64: "u64",
	KindS8: "s8", KindS16: "s16", KindS32: "s32", KindS64: "s64", KindF32: "f32",
	KindF64: "f64", KindChar: "char", KindString: "string",
}

func (t *Type) write(b *strings.Builder) {
	if t.name != "" {
		b.WriteString(t.name)
		return
	}
	if n, ok := primNames[t.kind]; ok {
		b.WriteString(n)
		return
	}
	switch t.kind {
	case KindList:
		b.WriteString("list<")
		t.elem.write(b)
		b.WriteString(">")
	case KindOption:
		b.WriteString("option<")
		t.elem.write(b)
		b.WriteString(">")
	case KindResult:
		b.WriteString("result<")
		writeOr(b, t.cases[0].Type)
		b.WriteString(", ")
		writeOr(b, t.cases[1].Type)
		b.WriteString(">")
	case KindTuple:
		b.WriteString("tuple<")
		for i, f := range t.fields {
			if i > 0 {
				b.WriteString(", ")
			}
			f.Type.write(b)
		}
		b.WriteString(">")
	case KindRecord:
		b.WriteString("record{")
		for i, f := range t.fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(f.Name + ": ")
			f.Type.write(b)
		}
		b.WriteString("}")
	case KindEnum:
		b.WriteString("enum{")
		for i, c := range t.cases {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.Name)
		}
		b.WriteString("}")
	case KindVariant:
		b.WriteString("variant{")
		for i, c := range t.cases {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.Name)
			if c.Type != nil {
				b.WriteString("(")
				c.Type.write(b)
				b.WriteString(")")
			}
		}
		b.WriteString("}")
	case KindFlags:
		b.WriteString("flags{" + strings.Join(t.labels, ", ") + "}")
	case KindOwn:
		b.WriteString("own<" + t.res + ">")
	case KindBorrow:
		b.WriteString("borrow<" + t.res + ">")
	}
}

func writeOr(b *strings.Builder, t *Type) {
	if t == nil {
		b.WriteString("_")
		return
	}
	t.write(b)
}

// brief is String cut to a length fit for an error message.
func (t *Type) brief() string {
	s := t.String()
	if len(s) > 96 {
		s = s[:93] + "..."
	}
	return s
}
