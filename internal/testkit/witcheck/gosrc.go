package witcheck

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// goPkg is what the check reads of one Go package's source: its type, constant and
// variable declarations. Every non-test file is read whatever its build constraints,
// since the wasip1 files hold the SDK's case lists.
type goPkg struct {
	dir    string // module-relative
	name   string // the package clause
	types  map[string]*goDecl
	consts map[string]*goConst
	order  []string // constant names in source order
	vars   map[string]*goDecl
	src    *goSource
}

type goDecl struct {
	spec *ast.TypeSpec // types
	expr ast.Expr      // vars: the value
	file *ast.File
}

type goConst struct {
	name  string
	typ   ast.Expr // the declared or inherited type; nil: untyped
	expr  ast.Expr // the value, repeated from the spec above when omitted
	iota  int64
	file  *ast.File
	val   constant.Value
	state int // 0 not evaluated, 1 evaluating, 2 done
	err   error
}

// goSource loads the packages of one module from source, on demand.
type goSource struct {
	root, module string
	pkgs         map[string]*goPkg
	fset         *token.FileSet
}

func newGoSource(root string) (*goSource, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("witcheck: the module root: %w", err)
	}
	var module string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			module = strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	if module == "" {
		return nil, fmt.Errorf("witcheck: %s/go.mod names no module", root)
	}
	return &goSource{root: root, module: module, pkgs: map[string]*goPkg{}, fset: token.NewFileSet()}, nil
}

// pkg loads the package in module-relative dir.
func (s *goSource) pkg(dir string) (*goPkg, error) {
	if p := s.pkgs[dir]; p != nil {
		return p, nil
	}
	full := filepath.Join(s.root, filepath.FromSlash(dir))
	entries, err := os.ReadDir(full)
	if err != nil {
		return nil, fmt.Errorf("witcheck: package %s: %w", dir, err)
	}
	p := &goPkg{dir: dir, types: map[string]*goDecl{}, consts: map[string]*goConst{}, vars: map[string]*goDecl{}, src: s}
	var names []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := parser.ParseFile(s.fset, filepath.Join(full, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("witcheck: %w", err)
		}
		if p.name == "" {
			p.name = f.Name.Name
		} else if p.name != f.Name.Name {
			return nil, fmt.Errorf("witcheck: %s holds packages %s and %s", dir, p.name, f.Name.Name)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok {
				continue
			}
			p.addDecl(g, f)
		}
	}
	if p.name == "" {
		return nil, fmt.Errorf("witcheck: %s holds no Go files", dir)
	}
	s.pkgs[dir] = p
	return p, nil
}

func (p *goPkg) addDecl(g *ast.GenDecl, f *ast.File) {
	var typ, expr ast.Expr // carried down a const group
	for i, spec := range g.Specs {
		switch sp := spec.(type) {
		case *ast.TypeSpec:
			p.types[sp.Name.Name] = &goDecl{spec: sp, file: f}
		case *ast.ValueSpec:
			if g.Tok == token.CONST {
				if len(sp.Values) > 0 {
					typ, expr = sp.Type, nil
				}
				for j, n := range sp.Names {
					if len(sp.Values) > 0 {
						expr = sp.Values[min(j, len(sp.Values)-1)]
					}
					p.consts[n.Name] = &goConst{name: n.Name, typ: typ, expr: expr, iota: int64(i), file: f}
					p.order = append(p.order, n.Name)
				}
				continue
			}
			for j, n := range sp.Names {
				if j < len(sp.Values) {
					p.vars[n.Name] = &goDecl{expr: sp.Values[j], file: f}
				}
			}
		}
	}
}

// constValue evaluates a constant: literals, iota, other constants of the package,
// conversions to a type of the package, and arithmetic.
func (p *goPkg) constValue(name string) (constant.Value, error) {
	c := p.consts[name]
	if c == nil {
		return nil, fmt.Errorf("no constant %s", name)
	}
	switch c.state {
	case 2:
		return c.val, c.err
	case 1:
		return nil, fmt.Errorf("constant %s refers to itself", name)
	}
	c.state = 1
	c.val, c.err = p.eval(c.expr, c.iota)
	c.state = 2
	return c.val, c.err
}

func (p *goPkg) eval(e ast.Expr, iota int64) (constant.Value, error) {
	switch e := e.(type) {
	case nil:
		return nil, fmt.Errorf("no value")
	case *ast.BasicLit:
		v := constant.MakeFromLiteral(e.Value, e.Kind, 0)
		if v.Kind() == constant.Unknown {
			return nil, fmt.Errorf("bad literal %s", e.Value)
		}
		return v, nil
	case *ast.ParenExpr:
		return p.eval(e.X, iota)
	case *ast.Ident:
		if e.Name == "iota" {
			return constant.MakeInt64(iota), nil
		}
		return p.constValue(e.Name)
	case *ast.UnaryExpr:
		x, err := p.eval(e.X, iota)
		if err != nil {
			return nil, err
		}
		return constant.UnaryOp(e.Op, x, 0), nil
	case *ast.BinaryExpr:
		x, err := p.eval(e.X, iota)
		if err != nil {
			return nil, err
		}
		y, err := p.eval(e.Y, iota)
		if err != nil {
			return nil, err
		}
		if e.Op == token.SHL || e.Op == token.SHR {
			n, ok := constant.Uint64Val(y)
			if !ok {
				return nil, fmt.Errorf("bad shift count")
			}
			return constant.Shift(x, e.Op, uint(n)), nil
		}
		return constant.BinaryOp(x, e.Op, y), nil
	case *ast.CallExpr:
		// A conversion T(x) to a type of the package keeps x's value.
		if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) == 1 && (p.types[id.Name] != nil || goBasics[id.Name] != "") {
			return p.eval(e.Args[0], iota)
		}
	}
	return nil, fmt.Errorf("cannot evaluate %s", types.ExprString(e))
}

// constType is the name of a constant's type in the package ("" when untyped or of a
// type elsewhere), following an untyped reference to another constant.
func (p *goPkg) constType(c *goConst) string {
	if id, ok := c.typ.(*ast.Ident); ok {
		return id.Name
	}
	if c.typ == nil {
		if id, ok := c.expr.(*ast.Ident); ok && id.Name != "iota" && p.consts[id.Name] != nil && p.consts[id.Name] != c {
			return p.constType(p.consts[id.Name])
		}
		if call, ok := c.expr.(*ast.CallExpr); ok {
			if id, ok := call.Fun.(*ast.Ident); ok && p.types[id.Name] != nil {
				return id.Name
			}
		}
	}
	return ""
}

// goBasics maps Go's predeclared basic types to their canonical names (byte is uint8,
// rune int32).
var goBasics = map[string]string{
	"bool": "bool", "string": "string", "int": "int", "uint": "uint", "uintptr": "uintptr",
	"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "rune": "int32",
	"uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64", "byte": "uint8",
	"float32": "float32", "float64": "float64", "complex64": "complex64", "complex128": "complex128",
}

// gKind is the shape of a Go type expression.
type gKind int

const (
	gBasic gKind = iota + 1
	gNamed
	gPtr
	gSlice
	gArray
	gStruct
	gMap
	gOther
)

// gType is a Go type expression resolved as far as the check needs: aliases followed,
// named types kept by name.
type gType struct {
	kind gKind
	name string // basic: canonical name; named: the type's name
	pkg  *goPkg // named: its package; struct: the package declaring it
	elem *gType // ptr, slice, array, map value
	n    int64  // array length
	expr string // the source text, for messages
	st   *ast.StructType
	file *ast.File
}

// resolve resolves a type expression written in file f of package p.
func (p *goPkg) resolve(e ast.Expr, f *ast.File) (*gType, error) {
	g := &gType{expr: types.ExprString(e), file: f}
	switch e := e.(type) {
	case *ast.Ident:
		if d := p.types[e.Name]; d != nil {
			if d.spec.Assign.IsValid() {
				a, err := p.resolve(d.spec.Type, d.file)
				if err != nil {
					return nil, err
				}
				a.expr = g.expr
				return a, nil
			}
			g.kind, g.name, g.pkg = gNamed, e.Name, p
			return g, nil
		}
		if b := goBasics[e.Name]; b != "" {
			g.kind, g.name = gBasic, b
			return g, nil
		}
		return nil, fmt.Errorf("%s: no type %s", p.dir, e.Name)
	case *ast.SelectorExpr:
		x, ok := e.X.(*ast.Ident)
		if !ok {
			return nil, fmt.Errorf("%s: cannot read type %s", p.dir, g.expr)
		}
		other, err := p.imported(f, x.Name)
		if err != nil {
			return nil, err
		}
		if other == nil {
			g.kind = gOther // outside the module: only its name matters
			return g, nil
		}
		r, err := other.resolve(e.Sel, nil)
		if err != nil {
			return nil, err
		}
		r.expr = g.expr
		return r, nil
	case *ast.StarExpr:
		el, err := p.resolve(e.X, f)
		if err != nil {
			return nil, err
		}
		g.kind, g.elem = gPtr, el
		return g, nil
	case *ast.ArrayType:
		el, err := p.resolve(e.Elt, f)
		if err != nil {
			return nil, err
		}
		g.elem = el
		if e.Len == nil {
			g.kind = gSlice
			return g, nil
		}
		v, err := p.eval(e.Len, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: array length of %s: %w", p.dir, g.expr, err)
		}
		n, ok := constant.Int64Val(v)
		if !ok {
			return nil, fmt.Errorf("%s: array length of %s", p.dir, g.expr)
		}
		g.kind, g.n = gArray, n
		return g, nil
	case *ast.StructType:
		g.kind, g.st, g.pkg = gStruct, e, p
		return g, nil
	case *ast.MapType:
		el, err := p.resolve(e.Value, f)
		if err != nil {
			return nil, err
		}
		g.kind, g.elem = gMap, el
		return g, nil
	}
	g.kind = gOther
	return g, nil
}

// imported returns the module package file f imports as name, nil for a package
// outside the module.
func (p *goPkg) imported(f *ast.File, name string) (*goPkg, error) {
	if f == nil {
		return nil, fmt.Errorf("%s: a qualified type outside any file", p.dir)
	}
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		rel, inModule := strings.CutPrefix(path, p.src.module+"/")
		local := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			local = im.Name.Name
		}
		if !inModule {
			if local == name {
				return nil, nil
			}
			continue
		}
		other, err := p.src.pkg(rel)
		if err != nil {
			return nil, err
		}
		if im.Name == nil {
			local = other.name
		}
		if local == name {
			return other, nil
		}
	}
	// Not a module package by any name seen: one outside the module whose name differs
	// from its path's last element.
	return nil, nil
}

// underlying resolves a named type's definition.
func (g *gType) underlying() (*gType, error) {
	if g.kind != gNamed {
		return g, nil
	}
	d := g.pkg.types[g.name]
	u, err := g.pkg.resolve(d.spec.Type, d.file)
	if err != nil {
		return nil, err
	}
	if u.kind == gNamed {
		return u.underlying()
	}
	if u.kind == gStruct {
		u.file, u.pkg = d.file, g.pkg
	}
	return u, nil
}

// goField is one exported field of a struct.
type goField struct {
	name string
	typ  *gType
}

// structFields returns the exported fields of a struct type in order, their types
// resolved where the struct is declared; an embedded field is an error, since no rule
// maps it to a WIT field.
func (g *gType) structFields() ([]goField, error) {
	var out []goField
	for _, fl := range g.st.Fields.List {
		if len(fl.Names) == 0 {
			return nil, fmt.Errorf("embedded field %s: the check maps only named fields", types.ExprString(fl.Type))
		}
		for _, n := range fl.Names {
			if !n.IsExported() {
				continue
			}
			t, err := g.pkg.resolve(fl.Type, g.file)
			if err != nil {
				return nil, err
			}
			out = append(out, goField{name: n.Name, typ: t})
		}
	}
	return out, nil
}

// caseList is a case list variable: a []string of labels, whose index is the
// discriminant, or a map[string]<integer> from label to discriminant.
type caseList struct {
	labels []string
	index  map[string]int64 // map lists only
}

// caseList evaluates the package variable name as a case list.
func (p *goPkg) caseList(name string) (*caseList, error) {
	v := p.vars[name]
	if v == nil {
		return nil, fmt.Errorf("package %s has no variable %s", p.name, name)
	}
	lit, ok := v.expr.(*ast.CompositeLit)
	if !ok {
		return nil, fmt.Errorf("%s.%s is not a composite literal", p.name, name)
	}
	str := func(e ast.Expr) (string, error) {
		val, err := p.eval(e, 0)
		if err != nil {
			return "", err
		}
		if val.Kind() != constant.String {
			return "", fmt.Errorf("%s is not a string", types.ExprString(e))
		}
		return constant.StringVal(val), nil
	}
	cl := &caseList{}
	switch lt := lit.Type.(type) {
	case *ast.ArrayType:
		if id, ok := lt.Elt.(*ast.Ident); !ok || id.Name != "string" || lt.Len != nil {
			return nil, fmt.Errorf("%s.%s is a %s, not a []string", p.name, name, types.ExprString(lit.Type))
		}
		for _, e := range lit.Elts {
			s, err := str(e)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", p.name, name, err)
			}
			cl.labels = append(cl.labels, s)
		}
	case *ast.MapType:
		cl.index = map[string]int64{}
		for _, e := range lit.Elts {
			kv, ok := e.(*ast.KeyValueExpr)
			if !ok {
				return nil, fmt.Errorf("%s.%s: an element without a key", p.name, name)
			}
			k, err := str(kv.Key)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", p.name, name, err)
			}
			val, err := p.eval(kv.Value, 0)
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", p.name, name, err)
			}
			n, ok := constant.Int64Val(constant.ToInt(val))
			if !ok {
				return nil, fmt.Errorf("%s.%s[%q] is not an integer", p.name, name, k)
			}
			cl.labels = append(cl.labels, k)
			cl.index[k] = n
		}
	default:
		return nil, fmt.Errorf("%s.%s is neither a []string nor a map[string]<integer> literal", p.name, name)
	}
	return cl, nil
}
