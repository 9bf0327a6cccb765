package archtest

import (
	"fmt"
	"go/types"
	"slices"
	"strings"
)

// InternalLeaks returns, sorted, every place the exported API of pkgs mentions a type
// declared in an internal package, which code outside the module cannot import and so
// cannot name: in exported funcs' parameters and results, exported vars' and consts'
// types, and exported types' underlying types, exported fields (and those promoted
// through unexported embedded ones), methods, type parameters' constraints and aliased
// types, through every composite type. Each of pkgs is taken as public, whatever its
// path: its own types are never reported, so a test can check a planted package.
func InternalLeaks(pkgs []*types.Package) []string {
	var out []string
	for _, p := range pkgs {
		w := &apiWalker{pkg: p, reached: map[*types.TypeName]bool{}, found: map[string]bool{}}
		scope := p.Scope()
		for _, name := range scope.Names() {
			if obj := scope.Lookup(name); obj.Exported() {
				w.object(obj)
			}
		}
		// Unexported types of p reached through its exported API: their exported fields
		// and methods are reachable too. Walking one may reach others, hence the loop.
		for len(w.queue) > 0 {
			next := w.queue[0]
			w.queue = w.queue[1:]
			w.typeName(next.obj, " (reached through "+next.via+")")
		}
		out = append(out, w.out...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// apiWalker walks one package's exported API.
type apiWalker struct {
	pkg     *types.Package
	out     []string
	found   map[string]bool          // findings already made, to report each once
	reached map[*types.TypeName]bool // unexported types of pkg already queued
	queue   []reachedType
}

// reachedType is an unexported type of the package that the exported API exposes.
type reachedType struct {
	obj *types.TypeName
	via string // the exported identifier it was first reached through
}

// object walks one exported package-level object.
func (w *apiWalker) object(obj types.Object) {
	ident := w.pkg.Name() + "." + obj.Name()
	switch obj := obj.(type) {
	case *types.Func:
		w.signature(ident, obj.Type().(*types.Signature))
	case *types.Var:
		w.mention(ident, "its type", obj.Type(), "give it an exported type")
	case *types.Const:
		w.mention(ident, "its type", obj.Type(), "give it an exported type")
	case *types.TypeName:
		w.typeName(obj, "")
	}
}

// typeName walks a type declared in the package: what it aliases or its underlying
// type, its type parameters' constraints and its methods; suffix says how an unexported
// one was reached.
func (w *apiWalker) typeName(obj *types.TypeName, suffix string) {
	ident := w.pkg.Name() + "." + obj.Name()
	if a, ok := obj.Type().(*types.Alias); ok {
		w.typeParams(ident+suffix, a.TypeParams())
		w.mention(ident+suffix, "the aliased type", a.Rhs(), "declare a type of its own or alias an exported one")
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return
	}
	w.typeParams(ident+suffix, named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.fields(ident, suffix, u, map[*types.Struct]bool{})
	case *types.Interface:
		w.methods(ident, suffix, u)
	default:
		w.mention(ident+suffix, "its underlying type", u, "declare it over an exported type")
	}
	if types.IsInterface(named) {
		return
	}
	// The pointer's method set holds the value's too, and methods promoted through
	// embedded fields, exported or not.
	ms := types.NewMethodSet(types.NewPointer(named))
	for i := range ms.Len() {
		if m := ms.At(i).Obj(); m.Exported() {
			w.signature(ident+"."+m.Name()+suffix, m.Type().(*types.Signature))
		}
	}
}

// fields walks a struct's exported fields, and those promoted through its unexported
// embedded fields, as callers see them: named after ident. seen ends embedding cycles
// (struct{ *a } in b, struct{ *b } in a).
func (w *apiWalker) fields(ident, suffix string, s *types.Struct, seen map[*types.Struct]bool) {
	if seen[s] {
		return
	}
	seen[s] = true
	for i := range s.NumFields() {
		f := s.Field(i)
		switch {
		case f.Exported():
			fix := "give the field an exported type or unexport it"
			if f.Embedded() {
				fix = "embed an exported type or give the field a name"
			}
			w.mention(ident+"."+f.Name()+suffix, "the field's type", f.Type(), fix)
		case f.Embedded():
			// Its exported fields are promoted (its methods are in ident's method set).
			if inner, ok := embeddedStruct(f.Type(), w.pkg); ok {
				w.fields(ident, suffix, inner, seen)
			} else {
				w.mention(ident+suffix, "the embedded field "+f.Name()+"'s type", f.Type(), "embed an exported type or give the field a name")
			}
		}
	}
}

// embeddedStruct returns the struct an embedded field of type t (T or *T) promotes
// fields from, when T is a struct type declared in pkg.
func embeddedStruct(t types.Type, pkg *types.Package) (*types.Struct, bool) {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() != pkg {
		return nil, false
	}
	s, ok := n.Underlying().(*types.Struct)
	return s, ok
}

// methods walks an interface's exported methods (its embedded interfaces' included) and
// the terms of its type sets.
func (w *apiWalker) methods(ident, suffix string, iface *types.Interface) {
	for i := range iface.NumMethods() {
		if m := iface.Method(i); m.Exported() {
			w.signature(ident+"."+m.Name()+suffix, m.Type().(*types.Signature))
		}
	}
	for i := range iface.NumEmbeddeds() {
		if e := iface.EmbeddedType(i); !types.IsInterface(e) {
			w.mention(ident+suffix, "a term of its type set", e, "constrain it with an exported type")
		}
	}
}

// signature walks a func's type parameters' constraints, parameters and results.
func (w *apiWalker) signature(ident string, sig *types.Signature) {
	// A method's receiver is its own type, walked where that type is declared.
	w.typeParams(ident, sig.TypeParams())
	for i := range sig.Params().Len() {
		w.mention(ident, fmt.Sprintf("param %d", i+1), sig.Params().At(i).Type(), "take an exported type")
	}
	for i := range sig.Results().Len() {
		w.mention(ident, fmt.Sprintf("result %d", i+1), sig.Results().At(i).Type(), "return an exported type")
	}
}

// typeParams walks type parameters' constraints.
func (w *apiWalker) typeParams(ident string, tps *types.TypeParamList) {
	for i := range tps.Len() {
		tp := tps.At(i)
		w.mention(ident, "type parameter "+tp.Obj().Name()+"'s constraint", tp.Constraint(), "constrain it with an exported type")
	}
}

// mention reports each internal type t mentions, at the position where of ident, with
// the fix for that kind of position.
func (w *apiWalker) mention(ident, where string, t types.Type, fix string) {
	for _, n := range w.internalIn(t, ident) {
		msg := fmt.Sprintf("%s: %s is %s", ident, where, types.TypeString(t, w.qualify))
		if bare(t) != n {
			msg += ", which mentions " + types.TypeString(n, w.qualify)
		}
		msg += " (an internal type: callers outside the module cannot name it; fix: " + fix + ")"
		if !w.found[msg] {
			w.found[msg] = true
			w.out = append(w.out, msg)
		}
	}
}

// qualify names the walked package's types by its name, as its callers write them, and
// every other type by its full package path, so an internal one shows where it is.
func (w *apiWalker) qualify(p *types.Package) string {
	if p == w.pkg {
		return p.Name()
	}
	return p.Path()
}

// bare strips pointers, slices and arrays off t: what "is []*T" plainly shows as T.
func bare(t types.Type) types.Type {
	for {
		switch u := t.(type) {
		case *types.Pointer:
			t = u.Elem()
		case *types.Slice:
			t = u.Elem()
		case *types.Array:
			t = u.Elem()
		default:
			return t
		}
	}
}

// internalIn returns the types declared in internal packages (named types or aliases)
// that t mentions, in order. It descends through composite types and type arguments,
// never into a named type of another package (that package's API is its own), and
// queues the unexported named types of the walked package, via naming where they were
// reached, so their exported fields and methods are walked once: as every cycle of
// types passes through a named type, the walk ends.
func (w *apiWalker) internalIn(t types.Type, via string) []types.Type {
	var out []types.Type
	var walk func(types.Type)
	walkTuple := func(tu *types.Tuple) {
		for i := range tu.Len() {
			walk(tu.At(i).Type())
		}
	}
	walk = func(t types.Type) {
		switch t := t.(type) {
		case *types.Alias:
			if obj := t.Obj(); obj.Pkg() != nil && obj.Pkg() != w.pkg && isInternal(obj.Pkg().Path()) {
				// An alias declared in an internal package is no more nameable than its type.
				out = append(out, t)
				return
			}
			for ta := range t.TypeArgs().Types() {
				walk(ta)
			}
			walk(types.Unalias(t))
		case *types.Named:
			obj := t.Obj()
			if obj.Pkg() != nil && obj.Pkg() != w.pkg && isInternal(obj.Pkg().Path()) {
				out = append(out, t)
				return
			}
			for ta := range t.TypeArgs().Types() {
				walk(ta)
			}
			if obj.Pkg() == w.pkg && !obj.Exported() && !w.reached[t.Origin().Obj()] {
				w.reached[t.Origin().Obj()] = true
				w.queue = append(w.queue, reachedType{t.Origin().Obj(), via})
			}
		case *types.Pointer:
			walk(t.Elem())
		case *types.Slice:
			walk(t.Elem())
		case *types.Array:
			walk(t.Elem())
		case *types.Map:
			walk(t.Key())
			walk(t.Elem())
		case *types.Chan:
			walk(t.Elem())
		case *types.Signature:
			for tp := range t.TypeParams().TypeParams() {
				walk(tp.Constraint())
			}
			walkTuple(t.Params())
			walkTuple(t.Results())
		case *types.Struct:
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() || f.Embedded() {
					walk(f.Type())
				}
			}
		case *types.Interface:
			for i := range t.NumMethods() {
				if m := t.Method(i); m.Exported() {
					walk(m.Type())
				}
			}
			for i := range t.NumEmbeddeds() {
				if e := t.EmbeddedType(i); !types.IsInterface(e) {
					walk(e)
				}
			}
		case *types.Union:
			for i := range t.Len() {
				walk(t.Term(i).Type())
			}
		case *types.Tuple:
			walkTuple(t)
		}
		// Basic types and type parameters mention nothing: a type parameter's constraint
		// is walked where the parameter is declared.
	}
	walk(t)
	return out
}

// isInternal reports whether an import path has an "internal" element, which Go lets
// only the tree rooted at its parent import.
func isInternal(path string) bool {
	return slices.Contains(strings.Split(path, "/"), "internal")
}
