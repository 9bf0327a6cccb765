package component

import (
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// TypeKind names the shape of a component-level Type.
type TypeKind uint8

// Kinds of component types: the value types first, then the other definitions.
const (
	KindBool TypeKind = iota + 1
	KindS8
	KindU8
	KindS16
	KindU16
	KindS32
	KindU32
	KindS64
	KindU64
	KindF32
	KindF64
	KindChar
	KindString
	KindRecord
	KindVariant
	KindList
	KindTuple
	KindFlags
	KindEnum
	KindOption
	KindResult
	KindOwn
	KindBorrow
	KindFunc      // a function type
	KindInstance  // an instance type
	KindComponent // a component type
	KindResource  // a resource type (imported, exported or defined)
)

var primByCode = map[byte]TypeKind{
	0x7f: KindBool, 0x7e: KindS8, 0x7d: KindU8, 0x7c: KindS16, 0x7b: KindU16,
	0x7a: KindS32, 0x79: KindU32, 0x78: KindS64, 0x77: KindU64, 0x76: KindF32,
	0x75: KindF64, 0x74: KindChar, 0x73: KindString,
}

var primNames = [...]string{
	KindBool: "bool", KindS8: "s8", KindU8: "u8", KindS16: "s16", KindU16: "u16",
	KindS32: "s32", KindU32: "u32", KindS64: "s64", KindU64: "u64", KindF32: "f32",
	KindF64: "f64", KindChar: "char", KindString: "string",
}

// primTypes are shared, never renamed (Named copies).
var primTypes = func() map[TypeKind]*Type {
	m := map[TypeKind]*Type{}
	for k := KindBool; k <= KindString; k++ {
		m[k] = &Type{Kind: k, size: 1, flat: 1}
	}
	m[KindString].flat, m[KindString].buffer = 2, true
	return m
}()

// Field is a named record field or function parameter.
type Field struct {
	Name string
	Type *Type
}

// Case is a variant case; Type is nil for a case without payload.
type Case struct {
	Name string
	Type *Type
}

// Extern is one import or export of an instance or component type (or of a component).
type Extern struct {
	Name string
	Sort Sort
	Type *Type // func, instance, component or (for SortType) the type itself; nil for core modules
}

// Resource is one resource type. Imported resources are named by the import that
// brings them (Interface, e.g. "wasi:io/streams@0.2.6") and their export name there;
// a resource the component defines has Defined set.
type Resource struct {
	Name      string // e.g. "output-stream"
	Interface string // the import (instance) that provides it; "" for a defined or directly imported one
	Defined   bool   // defined by the component (resource.new and resource.rep apply)
	Dtor      int    // defined: core func index of the destructor in the defining component, or -1
	abstract  bool   // declared (sub resource) inside a type: stands for whatever is supplied later
}

// Type is a component-level type: a value type, a function, instance, component or
// resource type. Types are shared between index spaces and never modified after Parse.
type Type struct {
	Kind TypeKind
	// Name is the name the type was exported under ("stream-error", "tool-input"), used
	// when it is rendered inside another type; "" for an anonymous type.
	Name string

	Elem     *Type    // list, option
	Fields   []Field  // record; func params
	Cases    []Case   // variant
	Elems    []*Type  // tuple
	Labels   []string // flags, enum
	OK, Err  *Type    // result (either may be nil)
	Target   *Type    // own, borrow: the resource type
	Resource *Resource
	Result   *Type // func: the result, nil for none

	Imports []Extern // component type
	Exports []Extern // instance, component type

	size   int  // nodes when expanded as a tree (capped), which bounds rendering and ABI conversion
	flat   int  // core values a value flattens to (capped like size)
	borrow bool // holds a borrow handle
	buffer bool // holds a string or list (lives partly in linear memory)
}

// maxTypeSize caps a type's expanded size: types built from shared parts can grow
// exponentially, and rendering or converting them must stay bounded.
const maxTypeSize = 10_000

// IsValue reports whether t is a value type.
func (t *Type) IsValue() bool { return t != nil && t.Kind >= KindBool && t.Kind <= KindBorrow }

// named returns a copy of t carrying name (what an export with (eq i) makes).
func (t *Type) named(name string) *Type {
	c := *t
	c.Name = name
	return &c
}

// WIT renders the type in WIT syntax: a named type as its name, others by structure,
// e.g. "func(self: borrow<output-stream>, contents: list<u8>) -> result<_, stream-error>".
// Handles are written out in full (own<error>, not WIT's bare "error").
func (t *Type) WIT() string {
	var b strings.Builder
	t.write(&b, true)
	return b.String()
}

// Definition renders the type's own structure even when it has a name, e.g.
// "variant { last-operation-failed(own<error>), closed }" for stream-error.
func (t *Type) Definition() string {
	var b strings.Builder
	t.write(&b, false)
	return b.String()
}

// String is WIT.
func (t *Type) String() string { return t.WIT() }

func (t *Type) write(b *strings.Builder, useName bool) {
	if t == nil {
		b.WriteString("_")
		return
	}
	if useName && t.Name != "" {
		b.WriteString(t.Name)
		return
	}
	if t.Kind >= KindBool && t.Kind <= KindString {
		b.WriteString(primNames[t.Kind])
		return
	}
	list := func(open, close string, n int, item func(i int)) {
		b.WriteString(open)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteString(", ")
			}
			item(i)
		}
		b.WriteString(close)
	}
	switch t.Kind {
	case KindList:
		b.WriteString("list<")
		t.Elem.write(b, true)
		b.WriteString(">")
	case KindOption:
		b.WriteString("option<")
		t.Elem.write(b, true)
		b.WriteString(">")
	case KindResult:
		switch {
		case t.OK == nil && t.Err == nil:
			b.WriteString("result")
		case t.Err == nil:
			b.WriteString("result<")
			t.OK.write(b, true)
			b.WriteString(">")
		default:
			b.WriteString("result<")
			t.OK.write(b, true)
			b.WriteString(", ")
			t.Err.write(b, true)
			b.WriteString(">")
		}
	case KindTuple:
		list("tuple<", ">", len(t.Elems), func(i int) { t.Elems[i].write(b, true) })
	case KindRecord:
		list("record { ", " }", len(t.Fields), func(i int) {
			b.WriteString(t.Fields[i].Name + ": ")
			t.Fields[i].Type.write(b, true)
		})
	case KindVariant:
		list("variant { ", " }", len(t.Cases), func(i int) {
			b.WriteString(t.Cases[i].Name)
			if t.Cases[i].Type != nil {
				b.WriteString("(")
				t.Cases[i].Type.write(b, true)
				b.WriteString(")")
			}
		})
	case KindEnum:
		b.WriteString("enum { " + strings.Join(t.Labels, ", ") + " }")
	case KindFlags:
		b.WriteString("flags { " + strings.Join(t.Labels, ", ") + " }")
	case KindOwn, KindBorrow:
		if t.Kind == KindOwn {
			b.WriteString("own<")
		} else {
			b.WriteString("borrow<")
		}
		b.WriteString(t.Target.resourceName())
		b.WriteString(">")
	case KindResource:
		b.WriteString("resource " + t.resourceName())
	case KindFunc:
		list("func(", ")", len(t.Fields), func(i int) {
			b.WriteString(t.Fields[i].Name + ": ")
			t.Fields[i].Type.write(b, true)
		})
		if t.Result != nil {
			b.WriteString(" -> ")
			t.Result.write(b, true)
		}
	case KindInstance, KindComponent:
		if t.Kind == KindInstance {
			b.WriteString("instance { ")
		} else {
			b.WriteString("component { ")
			for _, e := range t.Imports {
				b.WriteString("import " + e.Name + ": " + e.describe() + "; ")
			}
		}
		for _, e := range t.Exports {
			b.WriteString("export " + e.Name + ": " + e.describe() + "; ")
		}
		b.WriteString("}")
	default:
		fmt.Fprintf(b, "kind(%d)", t.Kind)
	}
}

func (t *Type) resourceName() string {
	if t == nil {
		return "?"
	}
	if t.Name != "" {
		return t.Name
	}
	if t.Resource != nil && t.Resource.Name != "" {
		return t.Resource.Name
	}
	return "resource"
}

// describe renders an extern's type the way a WIT world would list it.
func (e Extern) describe() string {
	switch e.Sort {
	case SortType:
		if e.Type != nil && e.Type.Kind == KindResource {
			return "resource"
		}
		return "type " + e.Type.Definition()
	case SortCoreModule:
		return "core module"
	}
	return e.Type.WIT()
}

// ABI converts a value type to its canonical ABI description. Handles become
// abi.Own/abi.Borrow named after their resource. Parse bounds every type it accepts,
// so a value type of a parsed component always converts.
func (t *Type) ABI() (*abi.Type, error) {
	if !t.IsValue() {
		return nil, fmt.Errorf("component: %s is not a value type", t.WIT())
	}
	return t.abi(), nil
}

// abi converts a value type checked by Parse (non-empty cases, at most 32 flags, no
// nil elements), which are exactly what abi's constructors demand.
func (t *Type) abi() *abi.Type {
	var a *abi.Type
	switch t.Kind {
	case KindBool:
		a = abi.Bool
	case KindS8:
		a = abi.S8
	case KindU8:
		a = abi.U8
	case KindS16:
		a = abi.S16
	case KindU16:
		a = abi.U16
	case KindS32:
		a = abi.S32
	case KindU32:
		a = abi.U32
	case KindS64:
		a = abi.S64
	case KindU64:
		a = abi.U64
	case KindF32:
		a = abi.Float32
	case KindF64:
		a = abi.Float64
	case KindChar:
		a = abi.Char
	case KindString:
		a = abi.String
	case KindList:
		a = abi.List(t.Elem.abi())
	case KindOption:
		a = abi.OptionOf(t.Elem.abi())
	case KindResult:
		var ok, e *abi.Type
		if t.OK != nil {
			ok = t.OK.abi()
		}
		if t.Err != nil {
			e = t.Err.abi()
		}
		a = abi.ResultOf(ok, e)
	case KindTuple:
		elems := make([]*abi.Type, len(t.Elems))
		for i, e := range t.Elems {
			elems[i] = e.abi()
		}
		a = abi.Tuple(elems...)
	case KindRecord:
		fields := make([]abi.Field, len(t.Fields))
		for i, f := range t.Fields {
			fields[i] = abi.F(f.Name, f.Type.abi())
		}
		a = abi.Record(fields...)
	case KindVariant:
		cases := make([]abi.Case, len(t.Cases))
		for i, c := range t.Cases {
			var ct *abi.Type
			if c.Type != nil {
				ct = c.Type.abi()
			}
			cases[i] = abi.C(c.Name, ct)
		}
		a = abi.VariantOf(cases...)
	case KindEnum:
		a = abi.Enum(t.Labels...)
	case KindFlags:
		a = abi.Flags(t.Labels...)
	case KindOwn:
		a = abi.Own(t.Target.resourceName())
	case KindBorrow:
		a = abi.Borrow(t.Target.resourceName())
	}
	if t.Name != "" {
		a = a.Named(t.Name)
	}
	return a
}

// Func converts a function type to its canonical ABI description.
func (t *Type) Func() (*abi.Func, error) {
	if t == nil || t.Kind != KindFunc {
		return nil, fmt.Errorf("component: %s is not a function type", t.WIT())
	}
	params := make([]*abi.Type, len(t.Fields))
	for i, f := range t.Fields {
		params[i] = f.Type.abi()
	}
	var results []*abi.Type
	if t.Result != nil {
		results = []*abi.Type{t.Result.abi()}
	}
	return abi.NewFunc(params, results), nil
}

// Equal reports whether a and b are the same type structurally: names given by exports
// are ignored, labels and resource identity are not.
func Equal(a, b *Type) bool {
	return equal(a, b, map[[2]*Type]bool{})
}

func equal(a, b *Type, seen map[[2]*Type]bool) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil || a.Kind != b.Kind {
		return false
	}
	k := [2]*Type{a, b}
	if v, ok := seen[k]; ok {
		return v
	}
	seen[k] = true // instance and component types can be compared while being compared
	r := equalShape(a, b, seen)
	seen[k] = r
	return r
}

func equalShape(a, b *Type, seen map[[2]*Type]bool) bool {
	switch a.Kind {
	case KindList, KindOption:
		return equal(a.Elem, b.Elem, seen)
	case KindResult:
		return equal(a.OK, b.OK, seen) && equal(a.Err, b.Err, seen)
	case KindTuple:
		if len(a.Elems) != len(b.Elems) {
			return false
		}
		for i := range a.Elems {
			if !equal(a.Elems[i], b.Elems[i], seen) {
				return false
			}
		}
		return true
	case KindRecord, KindFunc:
		if len(a.Fields) != len(b.Fields) || !equal(a.Result, b.Result, seen) {
			return false
		}
		for i := range a.Fields {
			if a.Fields[i].Name != b.Fields[i].Name || !equal(a.Fields[i].Type, b.Fields[i].Type, seen) {
				return false
			}
		}
		return true
	case KindVariant:
		if len(a.Cases) != len(b.Cases) {
			return false
		}
		for i := range a.Cases {
			if a.Cases[i].Name != b.Cases[i].Name || !equal(a.Cases[i].Type, b.Cases[i].Type, seen) {
				return false
			}
		}
		return true
	case KindEnum, KindFlags:
		return strings.Join(a.Labels, ",") == strings.Join(b.Labels, ",") && len(a.Labels) == len(b.Labels)
	case KindOwn, KindBorrow:
		return equal(a.Target, b.Target, seen)
	case KindResource:
		return a.Resource == b.Resource
	case KindInstance, KindComponent:
		return equalExterns(a.Imports, b.Imports, seen) && equalExterns(a.Exports, b.Exports, seen)
	}
	return true // primitives
}

func equalExterns(a, b []Extern, seen map[[2]*Type]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Sort != b[i].Sort || !equal(a[i].Type, b[i].Type, seen) {
			return false
		}
	}
	return true
}

// substitute returns t with resources replaced as m says, sharing every part that
// does not change.
func substitute(t *Type, m map[*Resource]*Resource, memo map[*Type]*Type) *Type {
	if t == nil || len(m) == 0 {
		return t
	}
	if r, ok := memo[t]; ok {
		return r
	}
	memo[t] = t // a cycle cannot occur (indices only point back), but stay safe
	c := *t
	changed := false
	sub := func(x *Type) *Type {
		y := substitute(x, m, memo)
		changed = changed || y != x
		return y
	}
	switch t.Kind {
	case KindResource:
		if r, ok := m[t.Resource]; ok {
			c.Resource = r
			changed = true
		}
	case KindList, KindOption:
		c.Elem = sub(t.Elem)
	case KindResult:
		c.OK, c.Err = sub(t.OK), sub(t.Err)
	case KindOwn, KindBorrow:
		c.Target = sub(t.Target)
	case KindTuple:
		c.Elems = make([]*Type, len(t.Elems))
		for i, e := range t.Elems {
			c.Elems[i] = sub(e)
		}
	case KindRecord, KindFunc:
		c.Fields = make([]Field, len(t.Fields))
		for i, f := range t.Fields {
			c.Fields[i] = Field{f.Name, sub(f.Type)}
		}
		c.Result = sub(t.Result)
	case KindVariant:
		c.Cases = make([]Case, len(t.Cases))
		for i, cs := range t.Cases {
			c.Cases[i] = Case{cs.Name, sub(cs.Type)}
		}
	case KindInstance, KindComponent:
		c.Imports = substExterns(t.Imports, sub)
		c.Exports = substExterns(t.Exports, sub)
	}
	if !changed {
		return t
	}
	memo[t] = &c
	return &c
}

func substExterns(es []Extern, sub func(*Type) *Type) []Extern {
	if es == nil {
		return nil
	}
	out := make([]Extern, len(es))
	for i, e := range es {
		out[i] = Extern{e.Name, e.Sort, sub(e.Type)}
	}
	return out
}

// SplitName splits an interface name into its package path and version:
// "wasi:io/streams@0.2.6" gives "wasi:io/streams" and "0.2.6"; a plain name ("run")
// has no version.
func SplitName(name string) (iface, version string) {
	if !strings.Contains(name, ":") {
		return name, ""
	}
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return name, ""
}
