package component

import (
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
)

// StepKind names what one plan step does.
type StepKind uint8

// Plan steps.
const (
	// StepInstantiate instantiates core module Plan.Modules[Module] as core instance
	// Instance, each of its imports resolved to an item (Imports).
	StepInstantiate StepKind = iota + 1
	// StepCoreExports makes core instance Instance out of existing items (Exports); an
	// instantiator needs it only to name things, since Imports are already resolved.
	StepCoreExports
	// StepLower makes core func Func that calls component function Callee with the
	// canonical ABI (Type, core signature Sig, Options).
	StepLower
	// StepLift makes component function Lift out of core func Core (Type, Sig, Options).
	StepLift
	// StepResourceNew, StepResourceDrop and StepResourceRep make core func Func, the
	// canon resource.new/drop/rep built-in of Resource.
	StepResourceNew
	StepResourceDrop
	StepResourceRep
	// StepDefineResource introduces a resource type the component defines (Resource,
	// its destructor Dtor).
	StepDefineResource
)

var stepNames = [...]string{
	StepInstantiate: "instantiate", StepCoreExports: "core-exports", StepLower: "lower",
	StepLift: "lift", StepResourceNew: "resource.new", StepResourceDrop: "resource.drop",
	StepResourceRep: "resource.rep", StepDefineResource: "define-resource",
}

// String names the step kind ("instantiate", "lower", …).
func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return fmt.Sprintf("step(%d)", k)
}

// CoreItem is a core function, table, memory or global: the export Name of the plan's
// core instance Instance, or (Instance -1) the core func Func a canon step made.
type CoreItem struct {
	Kind     CoreKind
	Instance int
	Name     string
	Func     int
}

// String describes the item for logs and compdump.
func (i CoreItem) String() string {
	if i.Instance < 0 {
		return fmt.Sprintf("core func #%d", i.Func)
	}
	return fmt.Sprintf("core instance #%d %s %q", i.Instance, i.Kind, i.Name)
}

// FuncRef is a component function: export Name of the instance imported as Import
// (Name "" when the import is the function itself), or (Import "") the function lifted
// by the StepLift numbered Lift.
type FuncRef struct {
	Import string
	Name   string
	Lift   int
}

// String describes the function for logs and compdump.
func (f FuncRef) String() string {
	switch {
	case f.Import == "":
		return fmt.Sprintf("lifted func #%d", f.Lift)
	case f.Name == "":
		return fmt.Sprintf("import %q", f.Import)
	}
	return fmt.Sprintf("import %q func %q", f.Import, f.Name)
}

// ResourceRef is a resource: one the import Import provides under Name, or (Defined >=
// 0) the one the StepDefineResource numbered Defined introduced.
type ResourceRef struct {
	Import  string
	Name    string
	Defined int
}

// String describes the resource for logs and compdump.
func (r ResourceRef) String() string {
	if r.Defined >= 0 {
		return fmt.Sprintf("defined resource #%d %q", r.Defined, r.Name)
	}
	return fmt.Sprintf("resource %q of %q", r.Name, r.Import)
}

// Options are a lift's or lower's canon options, resolved to core items.
type Options struct {
	Memory         *CoreItem
	Realloc        *CoreItem
	PostReturn     *CoreItem
	StringEncoding string // "utf8" (the default), "utf16" or "latin1+utf16"
}

// String lists the options that are set, for logs and compdump.
func (o Options) String() string {
	var parts []string
	for _, x := range []struct {
		n string
		i *CoreItem
	}{{"memory", o.Memory}, {"realloc", o.Realloc}, {"post-return", o.PostReturn}} {
		if x.i != nil {
			parts = append(parts, x.n+"="+x.i.String())
		}
	}
	return strings.Join(append(parts, "encoding="+o.StringEncoding), " ")
}

// InstanceArg is a named argument of a core module instantiation.
type InstanceArg struct {
	Name     string
	Instance int
}

// ImportArg is one import of a core module resolved to the item that satisfies it.
type ImportArg struct {
	Module, Name string
	Kind         CoreKind
	Item         CoreItem
}

// CoreExportItem is one export of a StepCoreExports instance.
type CoreExportItem struct {
	Name string
	Item CoreItem
}

// Step is one instantiation step; which fields are set depends on Kind (see StepKind).
type Step struct {
	Kind     StepKind
	Instance int              // instantiate, core-exports: the core instance made
	Module   int              // instantiate: index into Plan.Modules
	Args     []InstanceArg    // instantiate: the named argument instances
	Imports  []ImportArg      // instantiate: every import of the module, resolved
	Exports  []CoreExportItem // core-exports
	Func     int              // lower, resource.*: the core func made
	Callee   FuncRef          // lower
	Lift     int              // lift: the component function made
	Core     CoreItem         // lift: the core func lifted
	Type     *Type            // lower, lift: the function type
	Sig      *CoreFuncType    // lower, lift, resource.*: the core signature
	Options  Options          // lower, lift
	Resource ResourceRef      // resource.*, define-resource
	Dtor     *CoreItem        // define-resource: the destructor, if any
}

// String describes the step on one line, for logs and compdump.
func (s Step) String() string {
	switch s.Kind {
	case StepInstantiate:
		args := make([]string, len(s.Args))
		for i, a := range s.Args {
			args[i] = fmt.Sprintf("%q=#%d", a.Name, a.Instance)
		}
		return fmt.Sprintf("core instance #%d = instantiate module %d (%s)", s.Instance, s.Module, strings.Join(args, ", "))
	case StepCoreExports:
		ex := make([]string, len(s.Exports))
		for i, e := range s.Exports {
			ex[i] = fmt.Sprintf("%q=%s", e.Name, e.Item)
		}
		return fmt.Sprintf("core instance #%d = exports {%s}", s.Instance, strings.Join(ex, ", "))
	case StepLower:
		return fmt.Sprintf("core func #%d = lower %s %s [%s] %s", s.Func, s.Callee, s.Type.WIT(), s.Options, s.Sig)
	case StepLift:
		return fmt.Sprintf("lifted func #%d = lift %s %s [%s]", s.Lift, s.Core, s.Type.WIT(), s.Options)
	case StepResourceNew, StepResourceDrop, StepResourceRep:
		return fmt.Sprintf("core func #%d = %s %s", s.Func, s.Kind, s.Resource)
	case StepDefineResource:
		d := "no destructor"
		if s.Dtor != nil {
			d = "destructor " + s.Dtor.String()
		}
		return fmt.Sprintf("%s (%s)", s.Resource, d)
	}
	return s.Kind.String()
}

// NamedFunc is a function of a world item: its name inside the item ("" when the item
// is the function), its type and, for exports, which function implements it.
type NamedFunc struct {
	Name string
	Type *Type
	Ref  FuncRef
}

// WorldItem is one import or export of the component.
type WorldItem struct {
	Name      string // e.g. "wasi:io/streams@0.2.6"
	Interface string // e.g. "wasi:io/streams"
	Version   string // e.g. "0.2.6"
	Sort      Sort
	Type      *Type
	Funcs     []NamedFunc // functions (an instance's, nested instances' as "inner/name")
	Resources []string    // resources an instance item provides
}

// World is what the component imports and exports.
type World struct {
	Imports []WorldItem
	Exports []WorldItem
}

// Plan is the resolved instantiation of a component: execute Steps in order.
type Plan struct {
	World   World
	Modules []*Module // the core modules StepInstantiate refers to
	Steps   []Step

	CoreInstances, CoreFuncs, Lifts int // how many of each the steps make
}

// Limits of planning: nested components instantiated repeatedly can multiply steps.
const (
	maxSteps = 1 << 16
	maxEvals = 1 << 20
)

// value is an item of a component-level index space while planning.
type value struct {
	fn   FuncRef
	ftyp *Type
	inst *instValue
	comp *Component
	mod  *Module
	typ  *Type
	res  *ResourceRef // types: the resource it is, resolved
}

type namedValue struct {
	name string
	sort Sort
	v    value
}

type instValue struct{ exports []namedValue }

func (iv *instValue) get(name string) (namedValue, bool) {
	for _, e := range iv.exports {
		if e.name == name {
			return e, true
		}
	}
	return namedValue{}, false
}

type coreInst struct {
	id  int
	bag map[string]CoreItem // nil for a module instance
}

type frame struct {
	c                                         *Component
	coreFuncs, coreTables, coreMems, coreGlbs []CoreItem
	coreModules                               []*Module
	coreInsts                                 []coreInst
	funcs                                     []value
	types                                     []value
	instances                                 []value
	components                                []*Component
	res                                       map[*Resource]ResourceRef
	args                                      map[string]namedValue // nil at the top
	exports                                   []namedValue
}

type planner struct {
	p       *Plan
	mods    map[*Module]int
	defined map[*Resource]int
	evals   int
}

// Plan resolves the component into instantiation steps and its world.
func (c *Component) Plan() (p *Plan, err error) {
	defer func() {
		if r := recover(); r != nil {
			bl, ok := r.(bail)
			if !ok {
				panic(r)
			}
			p, err = nil, bl.err
		}
	}()
	pl := &planner{p: &Plan{}, mods: map[*Module]int{}, defined: map[*Resource]int{}}
	f := pl.run(c, nil, &path{seg: "component"})
	pl.p.World.Imports = worldImports(c)
	for _, e := range f.exports {
		pl.p.World.Exports = append(pl.p.World.Exports, exportItem(e))
	}
	return pl.p, nil
}

func planFail(pth *path, d def, code, format string, args ...any) {
	e := errs.New(code, part, fmt.Sprintf(format, args...), fixFor(code))
	panic(bail{e.At(fmt.Sprintf("offset %d (0x%x)", d.off, d.off), pth.String())})
}

func (pl *planner) step(pth *path, d def, s Step) {
	if len(pl.p.Steps) >= maxSteps {
		planFail(pth, d, CodeLimit, "more than %d instantiation steps", maxSteps)
	}
	pl.p.Steps = append(pl.p.Steps, s)
}

// resolve gives a parsed resource its plan identity in frame f.
func (f *frame) resolve(r *Resource, pl *planner) ResourceRef {
	if ref, ok := f.res[r]; ok {
		return ref
	}
	if r.Defined {
		if id, ok := pl.defined[r]; ok {
			return ResourceRef{Name: r.Name, Defined: id}
		}
	}
	return ResourceRef{Import: r.Interface, Name: r.Name, Defined: -1}
}

// typeValue makes the planning value of a type, resolving a resource.
func (f *frame) typeValue(t *Type, pl *planner) value {
	v := value{typ: t}
	if t != nil && t.Kind == KindResource {
		ref := f.resolve(t.Resource, pl)
		v.res = &ref
	}
	return v
}

// importValue is the value of a top-level import: host-provided.
func (f *frame) importValue(imp Import, pth *path, d def, pl *planner) value {
	switch imp.Sort {
	case SortFunc:
		return value{fn: FuncRef{Import: imp.Name, Lift: -1}, ftyp: imp.Type}
	case SortType:
		if imp.Type.Kind == KindResource {
			ref := ResourceRef{Import: imp.Name, Name: imp.Name, Defined: -1}
			f.res[imp.Type.Resource] = ref
			return value{typ: imp.Type, res: &ref}
		}
		return value{typ: imp.Type}
	case SortInstance:
		iv := &instValue{}
		for _, e := range imp.Type.Exports {
			nv := namedValue{name: e.Name, sort: e.Sort}
			switch e.Sort {
			case SortFunc:
				nv.v = value{fn: FuncRef{Import: imp.Name, Name: e.Name, Lift: -1}, ftyp: e.Type}
			case SortType:
				nv.v = f.typeValue(e.Type, pl)
			default:
				planFail(pth, d, CodePlan, "import %q exports a %s (%q); only functions and types are supported in imported instances", imp.Name, e.Sort, e.Name)
			}
			iv.exports = append(iv.exports, nv)
		}
		return value{inst: iv, typ: imp.Type}
	}
	planFail(pth, d, CodePlan, "import %q is a %s; only instances, functions and types can be imported", imp.Name, imp.Sort)
	return value{}
}

// run evaluates component c's definitions (args nil at the top) and returns its frame.
func (pl *planner) run(c *Component, args map[string]namedValue, pth *path) *frame {
	f := &frame{c: c, res: map[*Resource]ResourceRef{}, args: args}
	for _, d := range c.defs {
		pl.evals++
		if pl.evals > maxEvals {
			planFail(pth, d, CodeLimit, "more than %d definitions evaluated (components instantiated too often)", maxEvals)
		}
		pl.eval(f, d, pth)
	}
	return f
}

func (f *frame) coreItem(s Sort, idx int) CoreItem {
	switch s {
	case SortCoreFunc:
		return f.coreFuncs[idx]
	case SortCoreTable:
		return f.coreTables[idx]
	case SortCoreMemory:
		return f.coreMems[idx]
	}
	return f.coreGlbs[idx]
}

func (f *frame) pushCore(s Sort, it CoreItem) {
	switch s {
	case SortCoreFunc:
		f.coreFuncs = append(f.coreFuncs, it)
	case SortCoreTable:
		f.coreTables = append(f.coreTables, it)
	case SortCoreMemory:
		f.coreMems = append(f.coreMems, it)
	case SortCoreGlobal:
		f.coreGlbs = append(f.coreGlbs, it)
	}
}

func (f *frame) get(s Sort, idx int) value {
	switch s {
	case SortFunc:
		return f.funcs[idx]
	case SortType:
		return f.types[idx]
	case SortInstance:
		return f.instances[idx]
	case SortComponent:
		return value{comp: f.components[idx]}
	case SortCoreModule:
		return value{mod: f.coreModules[idx]}
	}
	return value{}
}

func (f *frame) push(s Sort, v value) {
	switch s {
	case SortFunc:
		f.funcs = append(f.funcs, v)
	case SortType:
		f.types = append(f.types, v)
	case SortInstance:
		f.instances = append(f.instances, v)
	case SortComponent:
		f.components = append(f.components, v.comp)
	case SortCoreModule:
		f.coreModules = append(f.coreModules, v.mod)
	}
}

func (f *frame) opt(i int) *CoreItem {
	if i < 0 {
		return nil
	}
	it := f.coreFuncs[i]
	return &it
}

func (f *frame) options(o canonOpts) Options {
	out := Options{Realloc: f.opt(o.realloc), PostReturn: f.opt(o.postReturn), StringEncoding: o.encoding}
	if o.memory >= 0 {
		m := f.coreMems[o.memory]
		out.Memory = &m
	}
	return out
}

func (pl *planner) eval(f *frame, d def, pth *path) {
	c := f.c
	switch d.kind {
	case defImport:
		imp := c.Imports[d.idx]
		if f.args == nil {
			f.push(imp.Sort, f.importValue(imp, pth, d, pl))
			return
		}
		a, ok := f.args[imp.Name]
		if !ok || a.sort != imp.Sort {
			planFail(pth, d, CodePlan, "no %s argument %q for the nested component's import", imp.Sort, imp.Name)
		}
		f.bindImport(imp, a.v)
		f.push(imp.Sort, a.v)
	case defModule:
		f.coreModules = append(f.coreModules, d.module)
	case defCoreInstantiate:
		m := f.coreModules[d.idx]
		if m == nil {
			planFail(pth, d, CodePlan, "core module %d is imported; only embedded modules can be instantiated", d.idx)
		}
		mi, ok := pl.mods[m]
		if !ok {
			mi = len(pl.p.Modules)
			pl.mods[m] = mi
			pl.p.Modules = append(pl.p.Modules, m)
		}
		s := Step{Kind: StepInstantiate, Instance: pl.p.CoreInstances, Module: mi}
		byName := map[string]coreInst{}
		for _, a := range d.args {
			ci := f.coreInsts[a.idx]
			byName[a.name] = ci
			s.Args = append(s.Args, InstanceArg{Name: a.name, Instance: ci.id})
		}
		for _, imp := range m.Imports {
			ci := byName[imp.Module] // Parse checked every import is supplied
			it, ok := ci.bag[imp.Name]
			if ci.bag == nil {
				it, ok = CoreItem{Kind: imp.Kind, Instance: ci.id, Name: imp.Name, Func: -1}, true
			}
			if !ok {
				planFail(pth, d, CodePlan, "core import %q.%q is not supplied", imp.Module, imp.Name)
			}
			s.Imports = append(s.Imports, ImportArg{Module: imp.Module, Name: imp.Name, Kind: imp.Kind, Item: it})
		}
		pl.p.CoreInstances++
		pl.step(pth, d, s)
		f.coreInsts = append(f.coreInsts, coreInst{id: s.Instance})
	case defCoreBag:
		s := Step{Kind: StepCoreExports, Instance: pl.p.CoreInstances}
		bag := map[string]CoreItem{}
		for _, a := range d.args {
			it := f.coreItem(a.sort, a.idx)
			bag[a.name] = it
			s.Exports = append(s.Exports, CoreExportItem{Name: a.name, Item: it})
		}
		pl.p.CoreInstances++
		pl.step(pth, d, s)
		f.coreInsts = append(f.coreInsts, coreInst{id: s.Instance, bag: bag})
	case defComponent:
		f.components = append(f.components, d.comp)
	case defInstantiate:
		nc := f.components[d.idx]
		if nc == nil {
			planFail(pth, d, CodePlan, "component %d is imported; only embedded components can be instantiated", d.idx)
		}
		args := map[string]namedValue{}
		for _, a := range d.args {
			args[a.name] = namedValue{name: a.name, sort: a.sort, v: f.get(a.sort, a.idx)}
		}
		nf := pl.run(nc, args, pth.child("component %d", nc.Index))
		f.instances = append(f.instances, value{inst: &instValue{exports: nf.exports}})
	case defBag:
		iv := &instValue{}
		for _, a := range d.args {
			iv.exports = append(iv.exports, namedValue{name: a.name, sort: a.sort, v: f.get(a.sort, a.idx)})
		}
		f.instances = append(f.instances, value{inst: iv})
	case defAliasExport:
		iv := f.instances[d.idx].inst
		e, ok := iv.get(d.name)
		if !ok || e.sort != d.sort {
			planFail(pth, d, CodeType, "instance %d has no %s export %q", d.idx, d.sort, d.name)
		}
		f.push(d.sort, e.v)
	case defAliasCoreExport:
		ci := f.coreInsts[d.idx]
		k, _ := d.sort.coreKind()
		it, ok := ci.bag[d.name]
		if ci.bag == nil {
			it, ok = CoreItem{Kind: k, Instance: ci.id, Name: d.name, Func: -1}, true
		}
		if !ok {
			planFail(pth, d, CodeType, "core instance %d has no export %q", d.idx, d.name)
		}
		f.pushCore(d.sort, it)
	case defAliasOuter:
		switch t := d.outer.(type) {
		case *Module:
			f.coreModules = append(f.coreModules, t)
		case *Component:
			f.components = append(f.components, t)
		case *Type:
			f.types = append(f.types, f.typeValue(t, pl))
		default:
			if d.sort == SortCoreModule {
				f.coreModules = append(f.coreModules, nil)
			} else if d.sort == SortComponent {
				f.components = append(f.components, nil)
			}
		}
	case defType:
		if d.typ.Kind == KindResource && d.typ.Resource.Defined {
			res := d.typ.Resource
			id := len(pl.defined)
			pl.defined[res] = id
			ref := ResourceRef{Name: res.Name, Defined: id}
			f.res[res] = ref
			s := Step{Kind: StepDefineResource, Resource: ref}
			if res.Dtor >= 0 {
				it := f.coreFuncs[res.Dtor]
				s.Dtor = &it
			}
			pl.step(pth, d, s)
		}
		f.types = append(f.types, f.typeValue(d.typ, pl))
	case defCanon:
		pl.canon(f, d, pth)
	case defExport:
		e := c.Exports[d.idx]
		v := f.get(e.Sort, e.Index)
		switch e.Sort {
		case SortFunc:
			v.ftyp = e.Type
		case SortType:
			v.typ = e.Type
		}
		f.push(e.Sort, v)
		f.exports = append(f.exports, namedValue{name: e.Name, sort: e.Sort, v: v})
	}
}

// bindImport maps the resources a nested component's import declares to those of the
// argument supplied for it.
func (f *frame) bindImport(imp Import, v value) {
	switch imp.Sort {
	case SortType:
		if imp.Type.Kind == KindResource && v.res != nil {
			f.res[imp.Type.Resource] = *v.res
		}
	case SortInstance:
		if v.inst == nil {
			return
		}
		for _, e := range imp.Type.Exports {
			if e.Sort != SortType || e.Type.Kind != KindResource || e.Type.Resource.Interface != imp.Name {
				continue
			}
			if a, ok := v.inst.get(e.Name); ok && a.v.res != nil {
				f.res[e.Type.Resource] = *a.v.res
			}
		}
	}
}

func (pl *planner) canon(f *frame, d def, pth *path) {
	cd := d.canon
	switch cd.op {
	case canonLift:
		fn, _ := cd.typ.Func()
		p, r := fn.ExportSignature()
		s := Step{Kind: StepLift, Lift: pl.p.Lifts, Core: f.coreFuncs[cd.fn], Type: cd.typ,
			Sig: &CoreFuncType{Params: p, Results: r}, Options: f.options(cd.opts)}
		pl.p.Lifts++
		pl.step(pth, d, s)
		f.funcs = append(f.funcs, value{fn: FuncRef{Lift: s.Lift}, ftyp: cd.typ})
		return
	case canonLower:
		callee := f.funcs[cd.fn]
		fn, _ := cd.typ.Func()
		p, r := fn.ImportSignature()
		s := Step{Kind: StepLower, Func: pl.p.CoreFuncs, Callee: callee.fn, Type: callee.ftyp,
			Sig: &CoreFuncType{Params: p, Results: r}, Options: f.options(cd.opts)}
		if s.Type == nil {
			s.Type = cd.typ
		}
		pl.p.CoreFuncs++
		pl.step(pth, d, s)
	default:
		kind := map[canonOp]StepKind{canonResourceNew: StepResourceNew, canonResourceDrop: StepResourceDrop, canonResourceRep: StepResourceRep}[cd.op]
		s := Step{Kind: kind, Func: pl.p.CoreFuncs, Resource: f.resolve(cd.typ.Resource, pl), Sig: sigI32ToI32}
		if kind == StepResourceDrop {
			s.Sig = sigI32ToNone
		}
		pl.p.CoreFuncs++
		pl.step(pth, d, s)
	}
	f.coreFuncs = append(f.coreFuncs, CoreItem{Kind: CoreFunc, Instance: -1, Func: pl.p.CoreFuncs - 1})
}

func worldImports(c *Component) []WorldItem {
	var out []WorldItem
	for _, imp := range c.Imports {
		w := WorldItem{Name: imp.Name, Interface: imp.Interface, Version: imp.Version, Sort: imp.Sort, Type: imp.Type}
		switch imp.Sort {
		case SortFunc:
			w.Funcs = []NamedFunc{{Type: imp.Type, Ref: FuncRef{Import: imp.Name, Lift: -1}}}
		case SortInstance:
			for _, e := range imp.Type.Exports {
				switch {
				case e.Sort == SortFunc:
					w.Funcs = append(w.Funcs, NamedFunc{Name: e.Name, Type: e.Type, Ref: FuncRef{Import: imp.Name, Name: e.Name, Lift: -1}})
				case e.Sort == SortType && e.Type.Kind == KindResource:
					w.Resources = append(w.Resources, e.Name)
				}
			}
		}
		out = append(out, w)
	}
	return out
}

func exportItem(e namedValue) WorldItem {
	w := WorldItem{Name: e.name, Sort: e.sort}
	w.Interface, w.Version = SplitName(e.name)
	switch e.sort {
	case SortFunc:
		w.Type = e.v.ftyp
		w.Funcs = []NamedFunc{{Type: e.v.ftyp, Ref: e.v.fn}}
	case SortType:
		w.Type = e.v.typ
	case SortInstance:
		it := &Type{Kind: KindInstance}
		collect(e.v.inst, "", &w, it, 0)
		w.Type = it
	}
	return w
}

func collect(iv *instValue, prefix string, w *WorldItem, it *Type, depth int) {
	if iv == nil || depth > maxDepth {
		return
	}
	for _, x := range iv.exports {
		name := prefix + x.name
		switch x.sort {
		case SortFunc:
			w.Funcs = append(w.Funcs, NamedFunc{Name: name, Type: x.v.ftyp, Ref: x.v.fn})
			it.Exports = append(it.Exports, Extern{Name: x.name, Sort: SortFunc, Type: x.v.ftyp})
		case SortType:
			if x.v.typ != nil && x.v.typ.Kind == KindResource {
				w.Resources = append(w.Resources, name)
			}
			it.Exports = append(it.Exports, Extern{Name: x.name, Sort: SortType, Type: x.v.typ})
		case SortInstance:
			collect(x.v.inst, name+"/", w, &Type{Kind: KindInstance}, depth+1)
		}
	}
}
