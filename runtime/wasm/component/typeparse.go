package component

// addSize is a+b capped just past maxTypeSize.
func addSize(a, b int) int { return min(a+b, maxTypeSize+1) }

// finish computes t's expanded size, flat count and what it holds from its parts (so
// no later question about a type walks it) and refuses a type over the size cap.
func finish(r *reader, off int, t *Type) *Type {
	n := 1
	flat, caseFlat := 0, 0
	add := func(x *Type) {
		if x == nil {
			return
		}
		n = addSize(n, x.size)
		t.borrow = t.borrow || x.borrow
		t.buffer = t.buffer || x.buffer
		flat = addSize(flat, x.flat)
		caseFlat = max(caseFlat, x.flat)
	}
	for _, x := range []*Type{t.Elem, t.OK, t.Err, t.Result} {
		add(x)
	}
	for _, f := range t.Fields {
		add(f.Type)
	}
	for _, c := range t.Cases {
		add(c.Type)
	}
	for _, e := range t.Elems {
		add(e)
	}
	switch t.Kind {
	case KindFlags, KindEnum:
		n = addSize(n, len(t.Labels))
		t.flat = 1
	case KindList:
		t.flat, t.buffer = 2, true
	case KindRecord, KindTuple:
		t.flat = flat
	case KindVariant, KindOption, KindResult:
		t.flat = 1 + caseFlat
	case KindOwn:
		t.flat = 1
	case KindBorrow:
		t.flat, t.borrow = 1, true
	case KindFunc:
		t.buffer, t.borrow = false, false // a function type is not a value
	}
	if n > maxTypeSize {
		failAt(r.path, off, CodeLimit, "type expands to more than %d parts", maxTypeSize)
	}
	t.size = n
	return t
}

// valType reads a valtype: a primitive code or the index of a defined value type.
func valType(r *reader, sc *scope) *Type {
	off := r.p
	b := r.peek()
	if b&0x80 == 0 && b >= 0x40 {
		r.p++
		if k, ok := primByCode[b]; ok {
			return primTypes[k]
		}
		if b == 0x64 {
			failAt(r.path, off, CodeUnsupported, "error-context values are not supported")
		}
		failAt(r.path, off, CodeUnknown, "unknown value type 0x%02x", b)
	}
	i := r.u32()
	if int64(i) >= int64(len(sc.types)) {
		failAt(r.path, off, CodeIndex, "type index %d out of range (%d defined)", i, len(sc.types))
	}
	t := sc.types[i]
	if !t.IsValue() {
		failAt(r.path, off, CodeType, "type %d is a %s, not a value type", i, kindName(t))
	}
	return t
}

func kindName(t *Type) string {
	switch t.Kind {
	case KindFunc:
		return "function type"
	case KindInstance:
		return "instance type"
	case KindComponent:
		return "component type"
	case KindResource:
		return "resource type"
	}
	return "value type"
}

func optVal(r *reader, sc *scope) *Type {
	switch b := r.byte(); b {
	case 0x00:
		return nil
	case 0x01:
		return valType(r, sc)
	default:
		failAt(r.path, r.p-1, CodeMalformed, "optional type marker 0x%02x, want 0x00 or 0x01", b)
	}
	return nil
}

func label(r *reader, seen map[string]bool) string {
	off := r.p
	l := r.name()
	if l == "" {
		failAt(r.path, off, CodeMalformed, "empty label")
	}
	if seen[l] {
		failAt(r.path, off, CodeType, "label %q used twice", l)
	}
	seen[l] = true
	return l
}

func resourceIndex(r *reader, sc *scope) *Type {
	off := r.p
	i := r.u32()
	if int64(i) >= int64(len(sc.types)) {
		failAt(r.path, off, CodeIndex, "type index %d out of range (%d defined)", i, len(sc.types))
	}
	t := sc.types[i]
	if t.Kind != KindResource {
		failAt(r.path, off, CodeType, "handle of type %d, which is a %s, not a resource", i, kindName(t))
	}
	return t
}

// parseDefType reads one type definition in scope sc.
func parseDefType(r *reader, sc *scope) *Type {
	off := r.p
	b := r.byte()
	nonEmpty := func(what string, n int) {
		if n == 0 {
			failAt(r.path, off, CodeType, "%s without %s", what, map[string]string{"record": "fields", "variant": "cases", "tuple": "elements", "flags": "labels", "enum": "cases"}[what])
		}
	}
	switch b {
	case 0x72:
		n := r.count("field")
		nonEmpty("record", n)
		t := &Type{Kind: KindRecord, Fields: make([]Field, n)}
		seen := map[string]bool{}
		for i := range t.Fields {
			t.Fields[i] = Field{label(r, seen), valType(r, sc)}
		}
		return finish(r, off, t)
	case 0x71:
		n := r.count("case")
		nonEmpty("variant", n)
		t := &Type{Kind: KindVariant, Cases: make([]Case, n)}
		seen := map[string]bool{}
		for i := range t.Cases {
			t.Cases[i] = Case{label(r, seen), optVal(r, sc)}
			if x := r.byte(); x != 0x00 {
				failAt(r.path, r.p-1, CodeUnsupported, "variant case %q refines another case (0x%02x), a pre-standard form", t.Cases[i].Name, x)
			}
		}
		return finish(r, off, t)
	case 0x70:
		return finish(r, off, &Type{Kind: KindList, Elem: valType(r, sc)})
	case 0x67:
		failAt(r.path, off, CodeUnsupported, "fixed-length lists are not supported")
	case 0x6f:
		n := r.count("element")
		nonEmpty("tuple", n)
		t := &Type{Kind: KindTuple, Elems: make([]*Type, n)}
		for i := range t.Elems {
			t.Elems[i] = valType(r, sc)
		}
		return finish(r, off, t)
	case 0x6e, 0x6d:
		n := r.count("label")
		t := &Type{Kind: KindFlags}
		if b == 0x6d {
			t.Kind = KindEnum
			nonEmpty("enum", n)
		} else {
			nonEmpty("flags", n)
			if n > 32 {
				failAt(r.path, off, CodeType, "flags with %d labels, at most 32 allowed", n)
			}
		}
		t.Labels = make([]string, n)
		seen := map[string]bool{}
		for i := range t.Labels {
			t.Labels[i] = label(r, seen)
		}
		return finish(r, off, t)
	case 0x6b:
		return finish(r, off, &Type{Kind: KindOption, Elem: valType(r, sc)})
	case 0x6a:
		t := &Type{Kind: KindResult}
		t.OK = optVal(r, sc)
		t.Err = optVal(r, sc)
		return finish(r, off, t)
	case 0x69:
		return finish(r, off, &Type{Kind: KindOwn, Target: resourceIndex(r, sc)})
	case 0x68:
		return finish(r, off, &Type{Kind: KindBorrow, Target: resourceIndex(r, sc)})
	case 0x66, 0x65:
		failAt(r.path, off, CodeUnsupported, "stream and future types (async) are not supported")
	case 0x64:
		failAt(r.path, off, CodeUnsupported, "error-context values are not supported")
	case 0x63:
		failAt(r.path, off, CodeUnsupported, "map types are not supported")
	case 0x40:
		return funcType(r, sc, off)
	case 0x43:
		failAt(r.path, off, CodeUnsupported, "async function types are not supported")
	case 0x41:
		return componentType(r, sc, off)
	case 0x42:
		return instanceType(r, sc, off)
	case 0x3f:
		if sc.comp == nil {
			failAt(r.path, off, CodeType, "resource definitions are not allowed inside a type")
		}
		if rep := r.byte(); rep != 0x7f {
			failAt(r.path, r.p-1, CodeType, "resource representation 0x%02x, only i32 is allowed", rep)
		}
		res := &Resource{Defined: true, Dtor: -1}
		switch x := r.byte(); x {
		case 0x00:
		case 0x01:
			res.Dtor = sc.comp.index(r, SortCoreFunc)
			if sig := sc.comp.sp.coreFuncs[res.Dtor]; sig != nil && !sig.Equal(sigI32ToNone) {
				failAt(r.path, off, CodeType, "resource destructor has type %s, want %s", sig, sigI32ToNone)
			}
		default:
			failAt(r.path, r.p-1, CodeMalformed, "optional destructor marker 0x%02x", x)
		}
		return &Type{Kind: KindResource, Resource: res, size: 1}
	case 0x3e:
		failAt(r.path, off, CodeUnsupported, "async resource destructors are not supported")
	default:
		if _, ok := primByCode[b]; ok {
			return primTypes[primByCode[b]]
		}
		failAt(r.path, off, CodeUnknown, "unknown type opcode 0x%02x", b)
	}
	return nil
}

func funcType(r *reader, sc *scope, off int) *Type {
	n := r.count("param")
	t := &Type{Kind: KindFunc, Fields: make([]Field, n)}
	seen := map[string]bool{}
	for i := range t.Fields {
		t.Fields[i] = Field{label(r, seen), valType(r, sc)}
	}
	switch b := r.byte(); b {
	case 0x00:
		t.Result = valType(r, sc)
	case 0x01:
		if x := r.byte(); x != 0x00 {
			failAt(r.path, r.p-1, CodeUnsupported, "named function results (a pre-standard form)")
		}
	default:
		failAt(r.path, r.p-1, CodeMalformed, "function result marker 0x%02x", b)
	}
	if t.Result != nil && t.Result.borrow {
		failAt(r.path, off, CodeType, "function result %s holds a borrow", t.Result.WIT())
	}
	return finish(r, off, t)
}

func newTypeScope(r *reader, sc *scope, off int) *scope {
	if sc.depth+1 > maxDepth {
		failAt(r.path, off, CodeLimit, "types nested more than %d deep", maxDepth)
	}
	return &scope{parent: sc, depth: sc.depth + 1}
}

func componentType(r *reader, sc *scope, off int) *Type {
	inner := newTypeScope(r, sc, off)
	t := &Type{Kind: KindComponent, size: 1}
	n := r.count("declaration")
	base := r.path
	for i := 0; i < n; i++ {
		r.path = base.child("decl %d", i)
		if r.peek() == 0x03 {
			r.byte()
			doff := r.p
			name := externName(r)
			if _, dup := findExtern(t.Imports, name); dup {
				failAt(r.path, doff, CodeType, "import %q declared twice", name)
			}
			e, _ := parseExternType(r, inner, name)
			t.Imports = append(t.Imports, e)
			continue
		}
		instanceDecl(r, inner, t)
	}
	r.path = base
	return finishExterns(r, off, t)
}

func instanceType(r *reader, sc *scope, off int) *Type {
	inner := newTypeScope(r, sc, off)
	t := &Type{Kind: KindInstance, size: 1}
	n := r.count("declaration")
	base := r.path
	for i := 0; i < n; i++ {
		r.path = base.child("decl %d", i)
		instanceDecl(r, inner, t)
	}
	r.path = base
	return finishExterns(r, off, t)
}

// finishExterns sizes an instance or component type by its imports and exports, so
// rendering one stays bounded too.
func finishExterns(r *reader, off int, t *Type) *Type {
	n := 1
	for _, e := range append(append([]Extern(nil), t.Imports...), t.Exports...) {
		if e.Type != nil {
			n = addSize(n, e.Type.size)
		}
	}
	if n > maxTypeSize {
		failAt(r.path, off, CodeLimit, "type expands to more than %d parts", maxTypeSize)
	}
	t.size = n
	return t
}

// instanceDecl reads one declaration of an instance or component type into t.
func instanceDecl(r *reader, sc *scope, t *Type) {
	off := r.p
	switch b := r.byte(); b {
	case 0x00:
		sc.coreTypes = append(sc.coreTypes, parseCoreType(r, sc))
	case 0x01:
		sc.types = append(sc.types, parseDefType(r, sc))
	case 0x02:
		s := readSort(r)
		switch kind := r.byte(); kind {
		case 0x00:
			if s != SortType && s != SortInstance {
				failAt(r.path, off, CodeType, "export aliases in a type may only name types and instances, not a %s", s)
			}
			i := r.u32()
			if int64(i) >= int64(len(sc.instances)) {
				failAt(r.path, off, CodeIndex, "instance index %d out of range (%d declared)", i, len(sc.instances))
			}
			name := r.name()
			e, ok := findExtern(sc.instances[i].Exports, name)
			if !ok || e.Sort != s {
				failAt(r.path, off, CodeType, "instance %d has no %s export %q", i, s, name)
			}
			if s == SortType {
				sc.types = append(sc.types, e.Type)
			} else {
				sc.instances = append(sc.instances, e.Type)
			}
		case 0x02:
			ct, idx := r.u32(), r.u32()
			target := sc
			for i := uint32(0); i < ct; i++ {
				if target.parent == nil {
					failAt(r.path, off, CodeIndex, "outer alias count %d exceeds the %d enclosing scopes", ct, i)
				}
				target = target.parent
			}
			switch s {
			case SortType:
				if int64(idx) >= int64(len(target.types)) {
					failAt(r.path, off, CodeIndex, "outer type index %d out of range (%d defined)", idx, len(target.types))
				}
				sc.types = append(sc.types, target.types[idx])
			case SortCoreType:
				if int64(idx) >= int64(len(target.coreTypes)) {
					failAt(r.path, off, CodeIndex, "outer core type index %d out of range (%d defined)", idx, len(target.coreTypes))
				}
				sc.coreTypes = append(sc.coreTypes, target.coreTypes[idx])
			default:
				failAt(r.path, off, CodeType, "outer aliases in a type may only name types, not a %s", s)
			}
		default:
			failAt(r.path, off, CodeType, "alias form 0x%02x is not allowed in a type", kind)
		}
	case 0x04:
		name := externName(r)
		if _, dup := findExtern(t.Exports, name); dup {
			failAt(r.path, off, CodeType, "export %q declared twice", name)
		}
		e, _ := parseExternType(r, sc, name)
		t.Exports = append(t.Exports, e)
	default:
		failAt(r.path, off, CodeUnknown, "unknown declaration 0x%02x", b)
	}
}

// parseExternType reads an externtype for the import or export called name; types
// it introduces are added to sc (type bounds, instances).
func parseExternType(r *reader, sc *scope, name string) (Extern, *ModuleType) {
	off := r.p
	e := Extern{Name: name}
	typeAt := func(kind TypeKind) *Type {
		ioff := r.p
		i := r.u32()
		if int64(i) >= int64(len(sc.types)) {
			failAt(r.path, ioff, CodeIndex, "type index %d out of range (%d defined)", i, len(sc.types))
		}
		t := sc.types[i]
		if t.Kind != kind {
			failAt(r.path, ioff, CodeType, "%s %q: type %d is a %s", e.Sort, name, i, kindName(t))
		}
		return t
	}
	switch b := r.byte(); b {
	case 0x00:
		if x := r.byte(); x != 0x11 {
			failAt(r.path, off, CodeType, "core extern 0x%02x: only core modules can be imported or exported", x)
		}
		e.Sort = SortCoreModule
		ioff := r.p
		i := r.u32()
		if int64(i) >= int64(len(sc.coreTypes)) {
			failAt(r.path, ioff, CodeIndex, "core type index %d out of range (%d defined)", i, len(sc.coreTypes))
		}
		if sc.coreTypes[i].Module == nil {
			failAt(r.path, ioff, CodeType, "core module %q: core type %d is not a module type", name, i)
		}
		return e, sc.coreTypes[i].Module
	case 0x01:
		e.Sort = SortFunc
		e.Type = typeAt(KindFunc)
	case 0x02:
		failAt(r.path, off, CodeValue, "value imports and exports are not supported")
	case 0x03:
		e.Sort = SortType
		switch x := r.byte(); x {
		case 0x00:
			ioff := r.p
			i := r.u32()
			if int64(i) >= int64(len(sc.types)) {
				failAt(r.path, ioff, CodeIndex, "type index %d out of range (%d defined)", i, len(sc.types))
			}
			e.Type = sc.types[i].named(name)
		case 0x01:
			e.Type = &Type{Kind: KindResource, Name: name, Resource: &Resource{Name: name, Dtor: -1, abstract: true}, size: 1}
		default:
			failAt(r.path, r.p-1, CodeUnknown, "unknown type bound 0x%02x", x)
		}
		sc.types = append(sc.types, e.Type)
	case 0x04:
		e.Sort = SortComponent
		e.Type = typeAt(KindComponent)
	case 0x05:
		e.Sort = SortInstance
		e.Type = typeAt(KindInstance)
		if sc.comp == nil {
			sc.instances = append(sc.instances, e.Type)
		}
	default:
		failAt(r.path, off, CodeUnknown, "unknown extern type 0x%02x", b)
	}
	return e, nil
}

// parseCoreType reads a core:type: a function type or a module type.
func parseCoreType(r *reader, sc *scope) *CoreType {
	off := r.p
	switch b := r.byte(); b {
	case 0x60:
		return &CoreType{Func: coreFuncType(r)}
	case 0x50:
		if sc.depth+1 > maxDepth {
			failAt(r.path, off, CodeLimit, "types nested more than %d deep", maxDepth)
		}
		var types []*CoreFuncType // the module type's own type index space
		mt := &ModuleType{}
		n := r.count("declaration")
		for i := 0; i < n; i++ {
			doff := r.p
			switch d := r.byte(); d {
			case 0x00:
				imp := CoreImport{Module: r.name(), Name: r.name()}
				imp.Kind, imp.Func = coreExternDesc(r, types)
				mt.Imports = append(mt.Imports, imp)
			case 0x01:
				if x := r.byte(); x != 0x60 {
					failAt(r.path, r.p-1, CodeUnsupported, "core type 0x%02x in a module type (only function types)", x)
				}
				types = append(types, coreFuncType(r))
			case 0x02:
				if x, y := r.byte(), r.byte(); x != 0x10 || y != 0x01 {
					failAt(r.path, doff, CodeMalformed, "module type alias 0x%02x 0x%02x, want an outer type alias", x, y)
				}
				ct, idx := r.u32(), r.u32()
				target := sc
				if ct == 0 {
					if int64(idx) >= int64(len(types)) {
						failAt(r.path, doff, CodeIndex, "core type index %d out of range (%d defined)", idx, len(types))
					}
					types = append(types, types[idx])
					continue
				}
				for k := uint32(1); k < ct; k++ {
					if target.parent == nil {
						failAt(r.path, doff, CodeIndex, "outer alias count %d exceeds the enclosing scopes", ct)
					}
					target = target.parent
				}
				if int64(idx) >= int64(len(target.coreTypes)) || target.coreTypes[idx].Func == nil {
					failAt(r.path, doff, CodeIndex, "outer core type index %d out of range or not a function type", idx)
				}
				types = append(types, target.coreTypes[idx].Func)
			case 0x03:
				e := CoreExport{Name: r.name()}
				e.Kind, e.Func = coreExternDesc(r, types)
				mt.Exports = append(mt.Exports, e)
			default:
				failAt(r.path, doff, CodeUnknown, "unknown module type declaration 0x%02x", d)
			}
		}
		return &CoreType{Module: mt}
	case 0x4e, 0x4f, 0x5e, 0x5f, 0x00:
		failAt(r.path, off, CodeUnsupported, "GC and recursive core types are not supported")
	default:
		failAt(r.path, off, CodeUnknown, "unknown core type 0x%02x", b)
	}
	return nil
}
