// Package component reads WebAssembly components (the component model's binary
// format, as wit-component and jco emit it for wasm32-wasip2) and resolves them into an
// instantiation plan: an ordered list of core module instantiations, canon lowerings and
// liftings and resource built-ins that an instantiator on a core wasm engine executes
// without reading the binary again. It depends on no engine.
//
// Every input is hostile: a malformed or unsupported component is an *errs.Error with a
// code (E-COMP-…), the path of the offending section and item, and the byte offset;
// counts and sizes are checked against the input length before anything is allocated.
package component

import (
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
)

// Sort names an index space.
type Sort uint8

// Sorts of the component model, core ones first.
const (
	SortCoreFunc Sort = iota + 1
	SortCoreTable
	SortCoreMemory
	SortCoreGlobal
	SortCoreTag
	SortCoreType
	SortCoreModule
	SortCoreInstance
	SortFunc
	SortValue
	SortType
	SortComponent
	SortInstance
)

var sortNames = [...]string{
	SortCoreFunc: "core func", SortCoreTable: "core table", SortCoreMemory: "core memory",
	SortCoreGlobal: "core global", SortCoreTag: "core tag", SortCoreType: "core type",
	SortCoreModule: "core module", SortCoreInstance: "core instance", SortFunc: "func",
	SortValue: "value", SortType: "type", SortComponent: "component", SortInstance: "instance",
}

// String names the sort as messages do ("core func", "instance", …).
func (s Sort) String() string {
	if int(s) < len(sortNames) && sortNames[s] != "" {
		return sortNames[s]
	}
	return fmt.Sprintf("sort(%d)", s)
}

// coreKind is the core extern kind of a core sort.
func (s Sort) coreKind() (CoreKind, bool) {
	switch s {
	case SortCoreFunc:
		return CoreFunc, true
	case SortCoreTable:
		return CoreTable, true
	case SortCoreMemory:
		return CoreMemory, true
	case SortCoreGlobal:
		return CoreGlobal, true
	case SortCoreTag:
		return CoreTag, true
	}
	return 0, false
}

func kindSort(k CoreKind) Sort { return SortCoreFunc + Sort(k) }

// Import is one import of a component.
type Import struct {
	Name      string // as written, e.g. "wasi:io/streams@0.2.6"
	Interface string // the name without its version, e.g. "wasi:io/streams"
	Version   string // e.g. "0.2.6"; "" for an unversioned name
	Sort      Sort
	Type      *Type       // instance, func, component or type (a resource for (sub resource))
	Module    *ModuleType // for a core module import
}

// Export is one export of a component.
type Export struct {
	Name      string
	Interface string
	Version   string
	Sort      Sort
	Index     int   // of the exported item in its sort's index space
	Type      *Type // the ascribed type when given, else the item's
}

// CustomSection is a custom section's name and size (its content is not kept).
type CustomSection struct {
	Name string
	Size int
}

// Component is a parsed component. It refers to the input's bytes (Module.Bytes), which
// the caller must keep unchanged.
type Component struct {
	Index      int // in the enclosing component's component index space; -1 at the top
	Offset     int
	Imports    []Import
	Exports    []Export
	Modules    []*Module    // core modules defined here, in order
	Components []*Component // components nested here, in order
	Custom     []CustomSection

	defs  []def
	sp    space
	sc    *scope
	typ   *Type // the component's type: its imports and exports
	depth int
}

// Type returns the component's type (imports and exports with their types).
func (c *Component) Type() *Type { return c.typ }

// space is the static view of a component's index spaces (types live in scope).
type space struct {
	coreFuncs                             []*CoreFuncType // nil when the signature is unknown
	coreTables, coreMemories, coreGlobals int
	coreModules                           []*ModuleType
	coreInstances                         []*ModuleType // only Exports are used
	funcs                                 []*Type
	components                            []*Type
	instances                             []*Type
}

// scope is a type scope: a component, a component type or an instance type. Outer
// aliases count scopes outward.
type scope struct {
	parent    *scope
	comp      *Component // set for a component scope
	types     []*Type
	coreTypes []*CoreType
	instances []*Type // instance types declared in a type scope (imports/exports of instances)
	depth     int
}

// defKind is the kind of one definition, replayed by Plan in order.
type defKind uint8

const (
	defImport defKind = iota + 1
	defModule
	defCoreInstantiate
	defCoreBag
	defComponent
	defInstantiate
	defBag
	defAliasExport
	defAliasCoreExport
	defAliasOuter
	defType
	defCanon
	defExport
)

// sortIdx is an (argument or export) name with the item it refers to.
type sortIdx struct {
	name string
	sort Sort
	idx  int
}

type canonOp uint8

const (
	canonLift canonOp = iota + 1
	canonLower
	canonResourceNew
	canonResourceDrop
	canonResourceRep
)

type canonOpts struct {
	memory, realloc, postReturn int // core indices, -1 when absent
	encoding                    string
}

type canonDef struct {
	op   canonOp
	fn   int   // lift: core func index; lower: func index
	typ  *Type // lift: the func type; resource built-ins: the resource type
	opts canonOpts
}

// def is one definition that adds to an index space (or, for exports, to two).
type def struct {
	kind   defKind
	sort   Sort // the index space it adds to
	off    int
	idx    int // module, component, instance or core instance it refers to; import/export number
	name   string
	args   []sortIdx
	canon  *canonDef
	typ    *Type // defType: the type (resources matter to Plan)
	module *Module
	comp   *Component
	outer  any // defAliasOuter: *Module, *Component or *Type
}

// Limits.
const (
	maxDepth = 16 // nesting of components and type scopes
)

// Parse reads a component. The returned Component refers to b, which must stay
// unchanged while it is used.
func Parse(b []byte) (c *Component, err error) {
	defer func() {
		if r := recover(); r != nil {
			bl, ok := r.(bail)
			if !ok {
				panic(r)
			}
			c, err = nil, bl.err
		}
	}()
	r := &reader{b: b, end: len(b), path: &path{seg: "component"}}
	checkHeader(r)
	return parseComponent(r, nil, -1, 0), nil
}

func checkHeader(r *reader) {
	if r.remaining() < 8 || string(r.b[r.p:r.p+4]) != "\x00asm" {
		r.fail(CodeHeader, "not WebAssembly (no \\0asm magic)")
	}
	h := r.b[r.p+4 : r.p+8]
	switch {
	case h[2] == 0 && h[3] == 0:
		r.fail(CodeHeader, "a core module, not a component (layer 0)")
	case h[2] != 1 || h[3] != 0:
		r.fail(CodeHeader, "unknown layer 0x%02x%02x", h[3], h[2])
	case h[0] != 0x0d || h[1] != 0:
		r.fail(CodeHeader, "component binary version 0x%02x%02x, want 0x000d", h[1], h[0])
	}
	r.p += 8
}

var sectionNames = [...]string{
	"custom", "core module", "core instance", "core type", "component", "instance",
	"alias", "type", "canon", "start", "import", "export", "value",
}

func parseComponent(r *reader, parent *scope, index, depth int) *Component {
	if depth > maxDepth {
		r.fail(CodeLimit, "components nested more than %d deep", maxDepth)
	}
	start := r.p - 8
	c := &Component{Index: index, Offset: start, depth: depth}
	c.sc = &scope{parent: parent, comp: c, depth: depth}
	c.typ = &Type{Kind: KindComponent, size: 1}
	for !r.done() {
		off := r.p
		id := r.byte()
		size := int(r.u32())
		if id >= byte(len(sectionNames)) {
			failAt(r.path, off, CodeUnknown, "unknown section id %d", id)
		}
		s := r.sub(size, r.path.child("section %d (%s)", id, sectionNames[id]))
		switch id {
		case 0:
			c.Custom = append(c.Custom, CustomSection{Name: s.name(), Size: size})
			s.p = s.end
		case 1:
			c.parseModule(s)
		case 4:
			c.parseNested(s)
		case 9:
			s.fail(CodeValue, "start definitions are not supported")
		case 12:
			s.fail(CodeValue, "value definitions are not supported")
		default:
			n := s.count("item")
			base := s.path
			for i := 0; i < n; i++ {
				s.path = base.child("item %d", i)
				c.parseItem(s, id)
			}
			s.path = base
		}
		s.expectEnd("the section")
	}
	return c
}

func (c *Component) parseItem(r *reader, id byte) {
	switch id {
	case 2:
		c.parseCoreInstance(r)
	case 3:
		c.sc.coreTypes = append(c.sc.coreTypes, parseCoreType(r, c.sc))
	case 5:
		c.parseInstance(r)
	case 6:
		c.parseAlias(r)
	case 7:
		t := parseDefType(r, c.sc)
		c.sc.types = append(c.sc.types, t)
		c.defs = append(c.defs, def{kind: defType, sort: SortType, off: r.p, typ: t})
	case 8:
		c.parseCanon(r)
	case 10:
		c.parseImport(r)
	case 11:
		c.parseExport(r)
	}
}

func (c *Component) parseModule(r *reader) {
	m := &Module{Index: len(c.sp.coreModules), Offset: r.p, Bytes: r.b[r.p:r.end:r.end]}
	m.ModuleType = parseModule(r)
	c.Modules = append(c.Modules, m)
	c.sp.coreModules = append(c.sp.coreModules, &m.ModuleType)
	c.defs = append(c.defs, def{kind: defModule, sort: SortCoreModule, off: m.Offset, module: m})
}

func (c *Component) parseNested(r *reader) {
	checkHeader(r)
	n := parseComponent(r, c.sc, len(c.sp.components), c.depth+1)
	c.Components = append(c.Components, n)
	c.sp.components = append(c.sp.components, n.typ)
	c.defs = append(c.defs, def{kind: defComponent, sort: SortComponent, off: n.Offset, comp: n})
}

// length returns the size of a sort's index space.
func (c *Component) length(s Sort) int {
	switch s {
	case SortCoreFunc:
		return len(c.sp.coreFuncs)
	case SortCoreTable:
		return c.sp.coreTables
	case SortCoreMemory:
		return c.sp.coreMemories
	case SortCoreGlobal:
		return c.sp.coreGlobals
	case SortCoreType:
		return len(c.sc.coreTypes)
	case SortCoreModule:
		return len(c.sp.coreModules)
	case SortCoreInstance:
		return len(c.sp.coreInstances)
	case SortFunc:
		return len(c.sp.funcs)
	case SortType:
		return len(c.sc.types)
	case SortComponent:
		return len(c.sp.components)
	case SortInstance:
		return len(c.sp.instances)
	}
	return 0
}

// index reads an index into sort's space and checks it.
func (c *Component) index(r *reader, s Sort) int {
	off := r.p
	i := r.u32()
	if n := c.length(s); int64(i) >= int64(n) {
		failAt(r.path, off, CodeIndex, "%s index %d out of range (%d defined)", s, i, n)
	}
	return int(i)
}

// readSort reads a component sort (core sorts after their 0x00 prefix).
func readSort(r *reader) Sort {
	off := r.p
	switch b := r.byte(); b {
	case 0x00:
		return readCoreSort(r)
	case 0x01:
		return SortFunc
	case 0x02:
		failAt(r.path, off, CodeValue, "the value sort is not supported")
	case 0x03:
		return SortType
	case 0x04:
		return SortComponent
	case 0x05:
		return SortInstance
	default:
		failAt(r.path, off, CodeUnknown, "unknown sort 0x%02x", b)
	}
	return 0
}

func readCoreSort(r *reader) Sort {
	off := r.p
	switch b := r.byte(); b {
	case 0x00:
		return SortCoreFunc
	case 0x01:
		return SortCoreTable
	case 0x02:
		return SortCoreMemory
	case 0x03:
		return SortCoreGlobal
	case 0x04:
		failAt(r.path, off, CodeUnsupported, "core tags (exception handling) are not supported")
	case 0x10:
		return SortCoreType
	case 0x11:
		return SortCoreModule
	case 0x12:
		return SortCoreInstance
	default:
		failAt(r.path, off, CodeUnknown, "unknown core sort 0x%02x", b)
	}
	return 0
}

// externName reads nameattributes: 0x00 or 0x01 and a name, or 0x02, a name and
// attributes (which are read and dropped).
func externName(r *reader) string {
	off := r.p
	switch b := r.byte(); b {
	case 0x00, 0x01:
		return r.name()
	case 0x02:
		n := r.name()
		k := r.count("attribute")
		for i := 0; i < k; i++ {
			switch a := r.byte(); a {
			case 0x00, 0x01, 0x02:
				r.name()
			default:
				failAt(r.path, r.p-1, CodeUnknown, "unknown name attribute 0x%02x", a)
			}
		}
		return n
	default:
		failAt(r.path, off, CodeUnknown, "unknown name form 0x%02x", b)
	}
	return ""
}

func (c *Component) parseCoreInstance(r *reader) {
	off := r.p
	switch b := r.byte(); b {
	case 0x00:
		m := c.index(r, SortCoreModule)
		mt := c.sp.coreModules[m]
		n := r.count("argument")
		args := make([]sortIdx, 0, n)
		given := map[string]*ModuleType{}
		for i := 0; i < n; i++ {
			name := r.name()
			if s := r.byte(); s != 0x12 {
				failAt(r.path, r.p-1, CodeType, "argument %q: core instantiation arguments must be instances, got sort 0x%02x", name, s)
			}
			idx := c.index(r, SortCoreInstance)
			if _, dup := given[name]; dup {
				failAt(r.path, off, CodeType, "argument %q given twice", name)
			}
			given[name] = c.sp.coreInstances[idx]
			args = append(args, sortIdx{name: name, sort: SortCoreInstance, idx: idx})
		}
		for _, imp := range mt.Imports {
			inst, ok := given[imp.Module]
			if !ok {
				failAt(r.path, off, CodeType, "core module %d imports from %q, which no argument supplies", m, imp.Module)
			}
			e, ok := inst.export(imp.Name)
			if !ok || e.Kind != imp.Kind {
				failAt(r.path, off, CodeType, "core module %d imports %s %q.%q, which the argument does not export", m, imp.Kind, imp.Module, imp.Name)
			}
			if imp.Kind == CoreFunc && e.Func != nil && !imp.Func.Equal(e.Func) {
				failAt(r.path, off, CodeType, "core module %d imports %q.%q as %s, the argument's is %s", m, imp.Module, imp.Name, imp.Func, e.Func)
			}
		}
		c.sp.coreInstances = append(c.sp.coreInstances, &ModuleType{Exports: mt.Exports})
		c.defs = append(c.defs, def{kind: defCoreInstantiate, sort: SortCoreInstance, off: off, idx: m, args: args})
	case 0x01:
		n := r.count("export")
		args := make([]sortIdx, 0, n)
		inst := &ModuleType{}
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			name := r.name()
			s := readCoreSort(r)
			k, ok := s.coreKind()
			if !ok {
				failAt(r.path, r.p-1, CodeType, "export %q: a core instance can only export funcs, tables, memories and globals, not %s", name, s)
			}
			idx := c.index(r, s)
			if seen[name] {
				failAt(r.path, off, CodeType, "export %q given twice", name)
			}
			seen[name] = true
			e := CoreExport{Name: name, Kind: k}
			if k == CoreFunc {
				e.Func = c.sp.coreFuncs[idx]
			}
			inst.Exports = append(inst.Exports, e)
			args = append(args, sortIdx{name: name, sort: s, idx: idx})
		}
		c.sp.coreInstances = append(c.sp.coreInstances, inst)
		c.defs = append(c.defs, def{kind: defCoreBag, sort: SortCoreInstance, off: off, args: args})
	default:
		failAt(r.path, off, CodeUnknown, "unknown core instance form 0x%02x", b)
	}
}

// itemType is the static type of item idx of sort s (nil for sorts without one).
func (c *Component) itemType(s Sort, idx int) *Type {
	switch s {
	case SortFunc:
		return c.sp.funcs[idx]
	case SortType:
		return c.sc.types[idx]
	case SortComponent:
		return c.sp.components[idx]
	case SortInstance:
		return c.sp.instances[idx]
	}
	return nil
}

func (c *Component) parseInstance(r *reader) {
	off := r.p
	switch b := r.byte(); b {
	case 0x00:
		ci := c.index(r, SortComponent)
		ct := c.sp.components[ci]
		n := r.count("argument")
		args := make([]sortIdx, 0, n)
		given := map[string]sortIdx{}
		for i := 0; i < n; i++ {
			name := r.name()
			s := readSort(r)
			idx := c.index(r, s)
			if _, dup := given[name]; dup {
				failAt(r.path, off, CodeType, "argument %q given twice", name)
			}
			a := sortIdx{name: name, sort: s, idx: idx}
			given[name] = a
			args = append(args, a)
		}
		subst := map[*Resource]*Resource{}
		for _, imp := range ct.Imports {
			a, ok := given[imp.Name]
			if !ok {
				failAt(r.path, off, CodeType, "component %d imports %s %q, which no argument supplies", ci, imp.Sort, imp.Name)
			}
			if a.sort != imp.Sort {
				failAt(r.path, off, CodeType, "argument %q is a %s, component %d imports a %s", imp.Name, a.sort, ci, imp.Sort)
			}
			at := c.itemType(a.sort, a.idx)
			if imp.Sort == SortType && imp.Type.Kind == KindResource && imp.Type.Resource.abstract {
				if at.Kind != KindResource {
					failAt(r.path, off, CodeType, "argument %q is %s, component %d imports a resource", imp.Name, at.WIT(), ci)
				}
				subst[imp.Type.Resource] = at.Resource
				continue
			}
			if imp.Sort == SortFunc && !Equal(substitute(imp.Type, subst, map[*Type]*Type{}), at) {
				failAt(r.path, off, CodeType, "argument %q has type %s, component %d imports %s", imp.Name, at.WIT(), ci, imp.Type.WIT())
			}
		}
		exports := substExterns(ct.Exports, func(t *Type) *Type { return substitute(t, subst, map[*Type]*Type{}) })
		c.sp.instances = append(c.sp.instances, &Type{Kind: KindInstance, Exports: exports, size: 1})
		c.defs = append(c.defs, def{kind: defInstantiate, sort: SortInstance, off: off, idx: ci, args: args})
	case 0x01:
		n := r.count("export")
		args := make([]sortIdx, 0, n)
		it := &Type{Kind: KindInstance, size: 1}
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			name := externName(r)
			s := readSort(r)
			if _, core := s.coreKind(); core || s == SortCoreInstance || s == SortCoreType {
				failAt(r.path, r.p-1, CodeType, "export %q: an instance cannot export a %s", name, s)
			}
			idx := c.index(r, s)
			if seen[name] {
				failAt(r.path, off, CodeType, "export %q given twice", name)
			}
			seen[name] = true
			it.Exports = append(it.Exports, Extern{Name: name, Sort: s, Type: c.itemType(s, idx)})
			args = append(args, sortIdx{name: name, sort: s, idx: idx})
		}
		c.sp.instances = append(c.sp.instances, it)
		c.defs = append(c.defs, def{kind: defBag, sort: SortInstance, off: off, args: args})
	default:
		failAt(r.path, off, CodeUnknown, "unknown instance form 0x%02x", b)
	}
}

func (c *Component) parseAlias(r *reader) {
	off := r.p
	s := readSort(r)
	switch b := r.byte(); b {
	case 0x00: // export of a component instance
		inst := c.index(r, SortInstance)
		name := r.name()
		e, ok := findExtern(c.sp.instances[inst].Exports, name)
		if !ok {
			failAt(r.path, off, CodeType, "instance %d has no export %q", inst, name)
		}
		if e.Sort != s {
			failAt(r.path, off, CodeType, "export %q of instance %d is a %s, not a %s", name, inst, e.Sort, s)
		}
		c.push(s, e.Type, nil)
		c.defs = append(c.defs, def{kind: defAliasExport, sort: s, off: off, idx: inst, name: name})
	case 0x01: // export of a core instance
		inst := c.index(r, SortCoreInstance)
		name := r.name()
		k, ok := s.coreKind()
		if !ok {
			failAt(r.path, off, CodeType, "a core instance export cannot be aliased as a %s", s)
		}
		e, ok := c.sp.coreInstances[inst].export(name)
		if !ok {
			failAt(r.path, off, CodeType, "core instance %d has no export %q", inst, name)
		}
		if e.Kind != k {
			failAt(r.path, off, CodeType, "export %q of core instance %d is a %s, not a %s", name, inst, e.Kind, k)
		}
		c.push(s, nil, e.Func)
		c.defs = append(c.defs, def{kind: defAliasCoreExport, sort: s, off: off, idx: inst, name: name})
	case 0x02: // outer
		ct, idx := r.u32(), r.u32()
		sc := c.sc
		for i := uint32(0); i < ct; i++ {
			if sc.parent == nil {
				failAt(r.path, off, CodeIndex, "outer alias count %d exceeds the %d enclosing scopes", ct, i)
			}
			sc = sc.parent
		}
		var target any
		switch s {
		case SortType:
			if int64(idx) >= int64(len(sc.types)) {
				failAt(r.path, off, CodeIndex, "outer type index %d out of range (%d defined)", idx, len(sc.types))
			}
			t := sc.types[idx]
			if ct > 0 && crossesComponent(c.sc, sc) && refersToResource(t) {
				failAt(r.path, off, CodeType, "outer alias of type %d refers to a resource across a component boundary", idx)
			}
			target = t
			c.push(s, t, nil)
		case SortCoreType:
			if int64(idx) >= int64(len(sc.coreTypes)) {
				failAt(r.path, off, CodeIndex, "outer core type index %d out of range (%d defined)", idx, len(sc.coreTypes))
			}
			c.sc.coreTypes = append(c.sc.coreTypes, sc.coreTypes[idx])
			target = sc.coreTypes[idx]
		case SortCoreModule, SortComponent:
			if sc.comp == nil {
				failAt(r.path, off, CodeType, "outer alias of a %s reaches a type scope", s)
			}
			if int64(idx) >= int64(sc.comp.length(s)) {
				failAt(r.path, off, CodeIndex, "outer %s index %d out of range (%d defined)", s, idx, sc.comp.length(s))
			}
			if s == SortCoreModule {
				target = findModule(sc.comp, int(idx))
				c.sp.coreModules = append(c.sp.coreModules, sc.comp.sp.coreModules[idx])
			} else {
				target = findComponentDef(sc.comp, int(idx))
				c.sp.components = append(c.sp.components, sc.comp.sp.components[idx])
			}
		default:
			failAt(r.path, off, CodeType, "outer aliases cannot refer to a %s", s)
		}
		c.defs = append(c.defs, def{kind: defAliasOuter, sort: s, off: off, outer: target})
	default:
		failAt(r.path, off, CodeUnknown, "unknown alias form 0x%02x", b)
	}
}

// crossesComponent reports whether walking from inner out to outer leaves a component.
func crossesComponent(inner, outer *scope) bool {
	for s := inner; s != nil && s != outer; s = s.parent {
		if s.comp != nil {
			return true
		}
	}
	return false
}

// refersToResource reports whether a type is or contains a resource.
func refersToResource(t *Type) bool {
	seen := map[*Type]bool{}
	var walk func(*Type) bool
	walk = func(t *Type) bool {
		if t == nil || seen[t] {
			return false
		}
		seen[t] = true
		switch t.Kind {
		case KindResource, KindOwn, KindBorrow:
			return true
		}
		for _, x := range []*Type{t.Elem, t.OK, t.Err, t.Result, t.Target} {
			if walk(x) {
				return true
			}
		}
		for _, f := range t.Fields {
			if walk(f.Type) {
				return true
			}
		}
		for _, cs := range t.Cases {
			if walk(cs.Type) {
				return true
			}
		}
		for _, e := range t.Elems {
			if walk(e) {
				return true
			}
		}
		for _, e := range append(append([]Extern(nil), t.Imports...), t.Exports...) {
			if walk(e.Type) {
				return true
			}
		}
		return false
	}
	return walk(t)
}

// findModule returns the static module behind core module index idx of c.
func findModule(c *Component, idx int) *Module {
	n := 0
	for _, d := range c.defs {
		if d.sort != SortCoreModule {
			continue
		}
		if n == idx {
			switch d.kind {
			case defModule:
				return d.module
			case defAliasOuter:
				m, _ := d.outer.(*Module)
				return m
			}
			return nil // imported or aliased from an instance: known only when planning
		}
		n++
	}
	return nil
}

// findComponentDef returns the static component behind component index idx of c.
func findComponentDef(c *Component, idx int) *Component {
	n := 0
	for _, d := range c.defs {
		if d.sort != SortComponent {
			continue
		}
		if n == idx {
			switch d.kind {
			case defComponent:
				return d.comp
			case defAliasOuter:
				x, _ := d.outer.(*Component)
				return x
			}
			return nil
		}
		n++
	}
	return nil
}

func findExtern(es []Extern, name string) (Extern, bool) {
	for _, e := range es {
		if e.Name == name {
			return e, true
		}
	}
	return Extern{}, false
}

// push appends one item to sort s's index space.
func (c *Component) push(s Sort, t *Type, sig *CoreFuncType) {
	switch s {
	case SortCoreFunc:
		c.sp.coreFuncs = append(c.sp.coreFuncs, sig)
	case SortCoreTable:
		c.sp.coreTables++
	case SortCoreMemory:
		c.sp.coreMemories++
	case SortCoreGlobal:
		c.sp.coreGlobals++
	case SortFunc:
		c.sp.funcs = append(c.sp.funcs, t)
	case SortType:
		c.sc.types = append(c.sc.types, t)
	case SortComponent:
		c.sp.components = append(c.sp.components, t)
	case SortInstance:
		c.sp.instances = append(c.sp.instances, t)
	}
}

func (c *Component) parseImport(r *reader) {
	off := r.p
	name := externName(r)
	if _, dup := findExtern(c.typ.Imports, name); dup {
		failAt(r.path, off, CodeType, "import %q declared twice", name)
	}
	e, mt := parseExternType(r, c.sc, name)
	imp := Import{Name: name, Sort: e.Sort, Type: e.Type, Module: mt}
	imp.Interface, imp.Version = SplitName(name)
	switch e.Sort {
	case SortInstance:
		// The resources the instance type declares become the import's own.
		subst := map[*Resource]*Resource{}
		for _, x := range e.Type.Exports {
			if x.Sort == SortType && x.Type.Kind == KindResource && x.Type.Resource.abstract {
				if _, ok := subst[x.Type.Resource]; !ok {
					subst[x.Type.Resource] = &Resource{Name: x.Name, Interface: name, Dtor: -1}
				}
			}
		}
		imp.Type = substitute(e.Type, subst, map[*Type]*Type{})
		c.sp.instances = append(c.sp.instances, imp.Type)
	case SortCoreModule:
		c.sp.coreModules = append(c.sp.coreModules, mt)
	case SortType: // parseExternType added it
	default:
		c.push(e.Sort, imp.Type, nil)
	}
	c.Imports = append(c.Imports, imp)
	c.typ.Imports = append(c.typ.Imports, Extern{Name: name, Sort: e.Sort, Type: imp.Type})
	c.defs = append(c.defs, def{kind: defImport, sort: e.Sort, off: off, idx: len(c.Imports) - 1, name: name})
}

func (c *Component) parseExport(r *reader) {
	off := r.p
	name := externName(r)
	if _, dup := findExtern(c.typ.Exports, name); dup {
		failAt(r.path, off, CodeType, "export %q declared twice", name)
	}
	s := readSort(r)
	if _, core := s.coreKind(); core || s == SortCoreInstance || s == SortCoreType {
		failAt(r.path, off, CodeType, "export %q: a component cannot export a %s", name, s)
	}
	idx := c.index(r, s)
	t := c.itemType(s, idx)
	if r.byte() == 0x01 { // ascribed type
		n := len(c.sc.types)
		e, _ := parseExternType(r, c.sc, name)
		c.sc.types = c.sc.types[:n] // the export below adds the one new index
		if e.Sort != s {
			failAt(r.path, off, CodeType, "export %q of a %s ascribed a %s", name, s, e.Sort)
		}
		switch s {
		case SortFunc:
			if !Equal(e.Type, t) {
				failAt(r.path, off, CodeType, "export %q has type %s, ascribed %s", name, t.WIT(), e.Type.WIT())
			}
		case SortInstance:
			for _, x := range e.Type.Exports {
				y, ok := findExtern(t.Exports, x.Name)
				if !ok || y.Sort != x.Sort {
					failAt(r.path, off, CodeType, "export %q is ascribed %s %q, which the instance lacks", name, x.Sort, x.Name)
				}
			}
		case SortType:
			if e.Type.Kind == KindResource && e.Type.Resource.abstract {
				if t.Kind != KindResource {
					failAt(r.path, off, CodeType, "export %q is ascribed a resource but is %s", name, t.WIT())
				}
				e.Type = t.named(name)
			} else if !Equal(e.Type, t) {
				failAt(r.path, off, CodeType, "export %q is %s, ascribed %s", name, t.Definition(), e.Type.Definition())
			}
		}
		t = e.Type
	} else if s == SortType {
		t = t.named(name)
	}
	if t != nil && t.Kind == KindResource && t.Resource.Defined && t.Resource.Name == "" {
		t.Resource.Name = name
	}
	exp := Export{Name: name, Sort: s, Index: idx, Type: t}
	exp.Interface, exp.Version = SplitName(name)
	c.Exports = append(c.Exports, exp)
	c.typ.Exports = append(c.typ.Exports, Extern{Name: name, Sort: s, Type: t})
	if s != SortCoreModule {
		c.push(s, t, nil)
	} else {
		c.sp.coreModules = append(c.sp.coreModules, c.sp.coreModules[idx])
	}
	c.defs = append(c.defs, def{kind: defExport, sort: s, off: off, idx: len(c.Exports) - 1, name: name})
}

// errCode is the code of a Parse error, for tests and callers without errs.
func errCode(err error) string { return errs.Code(err) }
