package component

import (
	"strings"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// CoreKind is the kind of a core import or export.
type CoreKind uint8

// Core extern kinds, numbered as in the core binary format.
const (
	CoreFunc CoreKind = iota
	CoreTable
	CoreMemory
	CoreGlobal
	CoreTag
)

// String names the kind as the text format does ("func", "memory", …).
func (k CoreKind) String() string {
	switch k {
	case CoreFunc:
		return "func"
	case CoreTable:
		return "table"
	case CoreMemory:
		return "memory"
	case CoreGlobal:
		return "global"
	case CoreTag:
		return "tag"
	}
	return "?"
}

// CoreFuncType is a core function signature.
type CoreFuncType struct {
	Params, Results []abi.ValType
}

// String renders the signature, e.g. "func(i32 i32) -> (i32)".
func (f *CoreFuncType) String() string {
	if f == nil {
		return "func(?)"
	}
	vt := func(vs []abi.ValType) string {
		s := make([]string, len(vs))
		for i, v := range vs {
			s[i] = v.String()
		}
		return strings.Join(s, " ")
	}
	return "func(" + vt(f.Params) + ") -> (" + vt(f.Results) + ")"
}

// Equal reports whether f and g are the same signature.
func (f *CoreFuncType) Equal(g *CoreFuncType) bool {
	if f == nil || g == nil {
		return f == g
	}
	return valsEqual(f.Params, g.Params) && valsEqual(f.Results, g.Results)
}

func valsEqual(a, b []abi.ValType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// CoreImport is one import of a core module (or core module type).
type CoreImport struct {
	Module, Name string
	Kind         CoreKind
	Func         *CoreFuncType // for functions
}

// CoreExport is one export of a core module (or core module type).
type CoreExport struct {
	Name string
	Kind CoreKind
	Func *CoreFuncType // for functions, when the signature is known
}

// CoreType is an entry of the core type index space: a function signature or a module
// type.
type CoreType struct {
	Func   *CoreFuncType
	Module *ModuleType
}

// ModuleType is the type of a core module: what it imports and exports.
type ModuleType struct {
	Imports []CoreImport
	Exports []CoreExport
}

// Module is a core module embedded in a component: its bytes (a slice of the input,
// not a copy) and a summary of its imports and exports.
type Module struct {
	Index  int    // in the defining component's core module index space
	Offset int    // of the module's first byte in the input
	Bytes  []byte // the whole core module, header included
	ModuleType
}

// export returns the module's export called name.
func (m *ModuleType) export(name string) (CoreExport, bool) {
	for _, e := range m.Exports {
		if e.Name == name {
			return e, true
		}
	}
	return CoreExport{}, false
}

// parseModule reads the summary of the core module in r (its whole region).
func parseModule(r *reader) ModuleType {
	if r.remaining() < 8 || string(r.b[r.p:r.p+8]) != "\x00asm\x01\x00\x00\x00" {
		r.fail(CodeMalformed, "core module does not start with the core wasm header (\\0asm 1.0)")
	}
	r.p += 8
	var (
		mt        ModuleType
		types     []*CoreFuncType
		funcTypes []*CoreFuncType // signature of each function, imports first
	)
	for !r.done() {
		id := r.byte()
		size := int(r.u32())
		s := r.sub(size, r.path.child("core section %d", id))
		switch id {
		case 1: // type
			n := s.count("type")
			for i := 0; i < n; i++ {
				if s.peek() != 0x60 {
					s.fail(CodeUnsupported, "core type 0x%02x (GC and recursive types are not supported)", s.peek())
				}
				s.byte()
				types = append(types, coreFuncType(s))
			}
		case 2: // import
			n := s.count("import")
			for i := 0; i < n; i++ {
				imp := CoreImport{Module: s.name(), Name: s.name()}
				imp.Kind, imp.Func = coreExternDesc(s, types)
				if imp.Kind == CoreFunc {
					funcTypes = append(funcTypes, imp.Func)
				}
				mt.Imports = append(mt.Imports, imp)
			}
		case 3: // function
			n := s.count("function")
			for i := 0; i < n; i++ {
				idx := s.u32()
				if int64(idx) >= int64(len(types)) {
					s.fail(CodeIndex, "function %d: core type index %d out of range (%d types)", i, idx, len(types))
				}
				funcTypes = append(funcTypes, types[idx])
			}
		case 7: // export
			n := s.count("export")
			for i := 0; i < n; i++ {
				e := CoreExport{Name: s.name()}
				k := s.byte()
				idx := s.u32()
				if k > byte(CoreTag) {
					s.fail(CodeUnknown, "export %q: unknown core export kind 0x%02x", e.Name, k)
				}
				e.Kind = CoreKind(k)
				if e.Kind == CoreFunc {
					if int64(idx) >= int64(len(funcTypes)) {
						s.fail(CodeIndex, "export %q: core func index %d out of range (%d functions)", e.Name, idx, len(funcTypes))
					}
					e.Func = funcTypes[idx]
				}
				mt.Exports = append(mt.Exports, e)
			}
		default:
			continue // code, data, custom and the rest: the engine reads them
		}
		s.expectEnd("the section")
	}
	return mt
}

func coreValType(r *reader) abi.ValType {
	c := r.byte()
	switch c {
	case 0x7f, 0x7e, 0x7d, 0x7c, 0x7b, 0x70, 0x6f:
		return abi.ValType(c)
	}
	r.p--
	r.fail(CodeUnsupported, "core value type 0x%02x (only numbers, v128, funcref and externref)", c)
	return 0
}

func coreFuncType(r *reader) *CoreFuncType {
	f := &CoreFuncType{}
	n := r.count("param")
	f.Params = make([]abi.ValType, n)
	for i := range f.Params {
		f.Params[i] = coreValType(r)
	}
	n = r.count("result")
	f.Results = make([]abi.ValType, n)
	for i := range f.Results {
		f.Results[i] = coreValType(r)
	}
	return f
}

func coreLimits(r *reader) {
	flags := r.byte()
	if flags > 0x07 {
		r.p--
		r.fail(CodeUnknown, "limits flags 0x%02x", flags)
	}
	if flags&0x04 != 0 {
		r.u64()
		if flags&1 != 0 {
			r.u64()
		}
		return
	}
	r.u32()
	if flags&1 != 0 {
		r.u32()
	}
}

// coreExternDesc reads a core importdesc/externtype; types resolve function type indices.
func coreExternDesc(r *reader, types []*CoreFuncType) (CoreKind, *CoreFuncType) {
	k := r.byte()
	switch k {
	case 0x00:
		idx := r.u32()
		if int64(idx) >= int64(len(types)) || types[idx] == nil {
			r.fail(CodeIndex, "core type index %d out of range or not a function type (%d types)", idx, len(types))
		}
		return CoreFunc, types[idx]
	case 0x01:
		if c := r.byte(); c != 0x70 && c != 0x6f {
			r.p--
			r.fail(CodeUnsupported, "table element type 0x%02x", c)
		}
		coreLimits(r)
		return CoreTable, nil
	case 0x02:
		coreLimits(r)
		return CoreMemory, nil
	case 0x03:
		coreValType(r)
		if m := r.byte(); m > 1 {
			r.p--
			r.fail(CodeMalformed, "global mutability 0x%02x", m)
		}
		return CoreGlobal, nil
	case 0x04:
		r.byte()
		r.u32()
		return CoreTag, nil
	}
	r.p--
	r.fail(CodeUnknown, "core extern kind 0x%02x", k)
	return 0, nil
}
