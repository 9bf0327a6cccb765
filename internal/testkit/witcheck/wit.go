package witcheck

import (
	"fmt"
	"strings"
)

// PackageName is a WIT package name: namespace, name and version ("murmur:tool@0.1.0").
type PackageName struct {
	Namespace, Name, Version string
}

func (p PackageName) String() string {
	s := p.Namespace + ":" + p.Name
	if p.Version != "" {
		s += "@" + p.Version
	}
	return s
}

// File is one parsed .wit file.
type File struct {
	Path       string // as the caller named it, for messages
	Package    PackageName
	Interfaces []*Interface
	Worlds     []*World
}

// Interface is a WIT interface: its uses, type definitions and functions in source order.
type Interface struct {
	File  *File
	Name  string
	Pos   Pos
	Uses  []*Use
	Types []*TypeDef
	Funcs []*Func

	scope map[string]*TypeDef // after resolution: own types and used names
}

// ID is the interface's full name with its package's version ("murmur:tool/run@0.1.0").
func (i *Interface) ID() string {
	p := i.File.Package
	s := p.Namespace + ":" + p.Name + "/" + i.Name
	if p.Version != "" {
		s += "@" + p.Version
	}
	return s
}

// Short is the interface's name without its version ("murmur:tool/run"); messages use
// it beside the file name, which carries the version.
func (i *Interface) Short() string {
	p := i.File.Package
	return p.Namespace + ":" + p.Name + "/" + i.Name
}

// Use is a use statement: the interface named and the type names it brings in.
type Use struct {
	Pos   Pos
	Path  Path
	Names []UseName
}

// UseName is one name of a use statement, with its local name (As) when renamed.
type UseName struct {
	Name, As string
}

// Path names an interface: in the same package (Package empty) or in another.
type Path struct {
	Package   PackageName // Namespace empty: the interface's own package
	Interface string
}

func (p Path) String() string {
	if p.Package.Namespace == "" {
		return p.Interface
	}
	s := p.Package.Namespace + ":" + p.Package.Name + "/" + p.Interface
	if p.Package.Version != "" {
		s += "@" + p.Package.Version
	}
	return s
}

// Kind is the kind of a type definition.
type Kind int

// Kinds of type definitions.
const (
	KindRecord Kind = iota + 1
	KindVariant
	KindEnum
	KindFlags
	KindAlias
	KindResource
)

var kindNames = map[Kind]string{
	KindRecord: "record", KindVariant: "variant", KindEnum: "enum", KindFlags: "flags",
	KindAlias: "type", KindResource: "resource",
}

func (k Kind) String() string { return kindNames[k] }

// TypeDef is a named type of an interface.
type TypeDef struct {
	Iface  *Interface
	Kind   Kind
	Name   string
	Pos    Pos
	Fields []Member // record: fields
	Cases  []Member // variant: cases (Type nil without payload); enum: cases; flags: labels
	Alias  *Type    // type alias: the aliased type
	Funcs  []*Func  // resource: its constructor and methods
}

// ID is the type's full name ("murmur:tool/run@0.1.0.tool-input").
func (d *TypeDef) ID() string { return d.Iface.ID() + "." + d.Name }

// Label names the type in messages: its kind and versionless name
// ("record murmur:tool/run.tool-input").
func (d *TypeDef) Label() string { return d.Kind.String() + " " + d.Iface.Short() + "." + d.Name }

// Member is a record field, a variant or enum case or a flags label.
type Member struct {
	Name string
	Type *Type // nil for enum cases, flags labels and variant cases without payload
	Pos  Pos
}

// Type is a WIT type expression. Name is a primitive ("u32", "string"), a constructor
// ("list", "option", "result", "tuple", "own", "borrow") or the name of a type
// definition, which Def points at once the files are resolved.
type Type struct {
	Name string
	Args []*Type // a result's absent side is nil
	Def  *TypeDef
	Pos  Pos
}

// String renders the type as WIT writes it.
func (t *Type) String() string {
	if t == nil {
		return "_"
	}
	if len(t.Args) == 0 {
		return t.Name
	}
	parts := make([]string, len(t.Args))
	for i, a := range t.Args {
		parts[i] = a.String()
	}
	return t.Name + "<" + strings.Join(parts, ", ") + ">"
}

// Func is a function of an interface or a resource.
type Func struct {
	Name   string
	Pos    Pos
	Params []Member
	Result *Type // nil: no result
}

// World is a WIT world: the interfaces it imports and exports.
type World struct {
	Name  string
	Pos   Pos
	Items []WorldItem
}

// WorldItem is one import or export of a world.
type WorldItem struct {
	Export bool
	Path   Path
	Pos    Pos
}

// Pos is a place in a .wit file.
type Pos struct {
	Line, Col int
}

var primitives = map[string]bool{
	"bool": true, "u8": true, "u16": true, "u32": true, "u64": true, "s8": true, "s16": true,
	"s32": true, "s64": true, "f32": true, "f64": true, "char": true, "string": true,
}

// Parse parses one .wit file; path names it in errors. It accepts the part of WIT the
// contract uses and refuses, with the place, anything else rather than skip it.
func Parse(path string, src []byte) (*File, error) {
	p := &wparser{lx: lexer{path: path, src: src, line: 1, col: 1}, file: &File{Path: path}}
	if err := p.parseFile(); err != nil {
		return nil, err
	}
	return p.file, nil
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokVersion
	tokInt   // a decimal number, which only fixed-size lists would use
	tokPunct // one of { } ( ) < > , : ; . / @ = * _ and ->
)

type wtoken struct {
	kind tokKind
	text string
	pos  Pos
	esc  bool // an identifier written with a leading % (never a keyword)
}

type lexer struct {
	path      string
	src       []byte
	off       int
	line, col int
	afterAt   bool // the previous token was '@': a version follows
}

func (l *lexer) errorf(pos Pos, format string, args ...any) error {
	return fmt.Errorf("%s:%d:%d: %s", l.path, pos.Line, pos.Col, fmt.Sprintf(format, args...))
}

func (l *lexer) advance(n int) {
	for range n {
		if l.src[l.off] == '\n' {
			l.line, l.col = l.line+1, 1
		} else {
			l.col++
		}
		l.off++
	}
}

func (l *lexer) skipSpace() error {
	for l.off < len(l.src) {
		c := l.src[l.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			l.advance(1)
		case strings.HasPrefix(string(l.src[l.off:min(l.off+2, len(l.src))]), "//"):
			for l.off < len(l.src) && l.src[l.off] != '\n' {
				l.advance(1)
			}
		case strings.HasPrefix(string(l.src[l.off:min(l.off+2, len(l.src))]), "/*"):
			start := Pos{l.line, l.col}
			depth := 0
			for {
				if l.off+1 >= len(l.src) {
					return l.errorf(start, "unterminated block comment")
				}
				switch string(l.src[l.off : l.off+2]) {
				case "/*":
					depth++
					l.advance(2)
				case "*/":
					depth--
					l.advance(2)
				default:
					l.advance(1)
					continue
				}
				if depth == 0 {
					break
				}
			}
		default:
			return nil
		}
	}
	return nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func (l *lexer) next() (wtoken, error) {
	if err := l.skipSpace(); err != nil {
		return wtoken{}, err
	}
	pos := Pos{l.line, l.col}
	if l.off >= len(l.src) {
		return wtoken{kind: tokEOF, pos: pos}, nil
	}
	afterAt := l.afterAt
	l.afterAt = false
	c := l.src[l.off]
	if afterAt && isDigit(c) {
		// A semantic version; a trailing '.' belongs to what follows (".{" of a use).
		end := l.off
		for end < len(l.src) && (isLetter(l.src[end]) || isDigit(l.src[end]) || strings.IndexByte(".-+", l.src[end]) >= 0) {
			end++
		}
		for end > l.off && l.src[end-1] == '.' {
			end--
		}
		text := string(l.src[l.off:end])
		l.advance(end - l.off)
		return wtoken{kind: tokVersion, text: text, pos: pos}, nil
	}
	if isDigit(c) {
		end := l.off
		for end < len(l.src) && isDigit(l.src[end]) {
			end++
		}
		text := string(l.src[l.off:end])
		l.advance(end - l.off)
		return wtoken{kind: tokInt, text: text, pos: pos}, nil
	}
	if c == '%' || isLetter(c) {
		esc := c == '%'
		start := l.off
		if esc {
			start++
		}
		end := start
		for end < len(l.src) && (isLetter(l.src[end]) || isDigit(l.src[end]) || l.src[end] == '-') {
			end++
		}
		text := string(l.src[start:end])
		if !validIdent(text) {
			return wtoken{}, l.errorf(pos, "%q is not a WIT identifier (kebab-case words of letters and digits, each starting with a letter)", text)
		}
		l.advance(end - l.off)
		return wtoken{kind: tokIdent, text: text, pos: pos, esc: esc}, nil
	}
	if strings.HasPrefix(string(l.src[l.off:]), "->") {
		l.advance(2)
		return wtoken{kind: tokPunct, text: "->", pos: pos}, nil
	}
	if strings.IndexByte("{}()<>,:;./@=*_", c) >= 0 {
		l.advance(1)
		l.afterAt = c == '@'
		return wtoken{kind: tokPunct, text: string(c), pos: pos}, nil
	}
	return wtoken{}, l.errorf(pos, "unexpected character %q", c)
}

func validIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, w := range strings.Split(s, "-") {
		if w == "" || !isLetter(w[0]) {
			return false
		}
	}
	return true
}

type wparser struct {
	lx   lexer
	tok  wtoken
	peek *wtoken
	file *File
}

func (p *wparser) errorf(pos Pos, format string, args ...any) error {
	return p.lx.errorf(pos, format, args...)
}

// advance moves to the next token.
func (p *wparser) advance() error {
	if p.peek != nil {
		p.tok, p.peek = *p.peek, nil
		return nil
	}
	t, err := p.lx.next()
	p.tok = t
	return err
}

func (p *wparser) lookahead() (wtoken, error) {
	if p.peek == nil {
		t, err := p.lx.next()
		if err != nil {
			return wtoken{}, err
		}
		p.peek = &t
	}
	return *p.peek, nil
}

func (p *wparser) is(punct string) bool { return p.tok.kind == tokPunct && p.tok.text == punct }

// keyword reports whether the current token is the unescaped keyword kw.
func (p *wparser) keyword(kw string) bool {
	return p.tok.kind == tokIdent && !p.tok.esc && p.tok.text == kw
}

func (p *wparser) describe() string {
	switch p.tok.kind {
	case tokEOF:
		return "the end of the file"
	case tokVersion:
		return "version " + p.tok.text
	case tokInt:
		return "number " + p.tok.text
	}
	return fmt.Sprintf("%q", p.tok.text)
}

func (p *wparser) expect(punct string) error {
	if !p.is(punct) {
		return p.errorf(p.tok.pos, "want %q, found %s", punct, p.describe())
	}
	return p.advance()
}

func (p *wparser) ident(what string) (string, Pos, error) {
	if p.tok.kind != tokIdent {
		return "", p.tok.pos, p.errorf(p.tok.pos, "want %s, found %s", what, p.describe())
	}
	name, pos := p.tok.text, p.tok.pos
	return name, pos, p.advance()
}

func (p *wparser) parseFile() error {
	if err := p.advance(); err != nil {
		return err
	}
	if p.keyword("package") {
		if err := p.advance(); err != nil {
			return err
		}
		pkg, err := p.packageName(true)
		if err != nil {
			return err
		}
		if p.is("{") {
			return p.errorf(p.tok.pos, "nested package blocks (package ... { }) are not supported")
		}
		if err := p.expect(";"); err != nil {
			return err
		}
		p.file.Package = pkg
	} else {
		return p.errorf(p.tok.pos, "want the package declaration first, found %s", p.describe())
	}
	for p.tok.kind != tokEOF {
		switch {
		case p.keyword("interface"):
			if err := p.parseInterface(); err != nil {
				return err
			}
		case p.keyword("world"):
			if err := p.parseWorld(); err != nil {
				return err
			}
		case p.is("@"):
			return p.errorf(p.tok.pos, "feature gates (@since, @unstable, @deprecated) are not supported")
		default:
			return p.errorf(p.tok.pos, "want interface or world at the top level, found %s (top-level use and other items are not supported)", p.describe())
		}
	}
	return nil
}

// packageName parses namespace:name[@version]; a package declaration needs no version
// but may have one.
func (p *wparser) packageName(decl bool) (PackageName, error) {
	ns, _, err := p.ident("a package namespace")
	if err != nil {
		return PackageName{}, err
	}
	if err := p.expect(":"); err != nil {
		return PackageName{}, err
	}
	name, _, err := p.ident("a package name")
	if err != nil {
		return PackageName{}, err
	}
	if p.is(":") {
		return PackageName{}, p.errorf(p.tok.pos, "nested namespaces are not supported")
	}
	pkg := PackageName{Namespace: ns, Name: name}
	if decl && p.is("@") {
		v, err := p.version()
		if err != nil {
			return PackageName{}, err
		}
		pkg.Version = v
	}
	return pkg, nil
}

func (p *wparser) version() (string, error) {
	if err := p.expect("@"); err != nil {
		return "", err
	}
	if p.tok.kind != tokVersion {
		return "", p.errorf(p.tok.pos, "want a version after @, found %s", p.describe())
	}
	v := p.tok.text
	return v, p.advance()
}

// path parses an interface path: a bare name, or namespace:package/interface[@version].
func (p *wparser) path() (Path, Pos, error) {
	pos := p.tok.pos
	first, _, err := p.ident("an interface name or package path")
	if err != nil {
		return Path{}, pos, err
	}
	if !p.is(":") {
		return Path{Interface: first}, pos, nil
	}
	if err := p.advance(); err != nil {
		return Path{}, pos, err
	}
	pkgName, _, err := p.ident("a package name")
	if err != nil {
		return Path{}, pos, err
	}
	if err := p.expect("/"); err != nil {
		return Path{}, pos, err
	}
	iface, _, err := p.ident("an interface name")
	if err != nil {
		return Path{}, pos, err
	}
	path := Path{Package: PackageName{Namespace: first, Name: pkgName}, Interface: iface}
	if p.is("@") {
		if path.Package.Version, err = p.version(); err != nil {
			return Path{}, pos, err
		}
	}
	return path, pos, nil
}

func (p *wparser) parseInterface() error {
	if err := p.advance(); err != nil {
		return err
	}
	name, pos, err := p.ident("an interface name")
	if err != nil {
		return err
	}
	iface := &Interface{File: p.file, Name: name, Pos: pos}
	if err := p.expect("{"); err != nil {
		return err
	}
	for !p.is("}") {
		if err := p.interfaceItem(iface); err != nil {
			return err
		}
	}
	p.file.Interfaces = append(p.file.Interfaces, iface)
	return p.advance()
}

func (p *wparser) interfaceItem(iface *Interface) error {
	if p.tok.kind == tokIdent && !p.tok.esc {
		switch p.tok.text {
		case "use":
			return p.parseUse(iface)
		case "record", "variant", "enum", "flags":
			d, err := p.parseTypeDef(iface)
			if err != nil {
				return err
			}
			iface.Types = append(iface.Types, d)
			return nil
		case "type":
			return p.parseAlias(iface)
		case "resource":
			return p.parseResource(iface)
		}
	}
	switch {
	case p.tok.kind == tokIdent:
		f, err := p.parseFuncItem()
		if err != nil {
			return err
		}
		iface.Funcs = append(iface.Funcs, f)
		return nil
	case p.is("@"):
		return p.errorf(p.tok.pos, "feature gates (@since, @unstable, @deprecated) are not supported")
	case p.tok.kind == tokEOF:
		return p.errorf(p.tok.pos, "interface %s is not closed", iface.Name)
	}
	return p.errorf(p.tok.pos, "want a use, a type definition or a function in interface %s, found %s", iface.Name, p.describe())
}

func (p *wparser) parseUse(iface *Interface) error {
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return err
	}
	path, _, err := p.path()
	if err != nil {
		return err
	}
	u := &Use{Pos: pos, Path: path}
	if err := p.expect("."); err != nil {
		return err
	}
	if err := p.expect("{"); err != nil {
		return err
	}
	for {
		name, _, err := p.ident("a type name to use")
		if err != nil {
			return err
		}
		n := UseName{Name: name, As: name}
		if p.keyword("as") {
			if err := p.advance(); err != nil {
				return err
			}
			if n.As, _, err = p.ident("a local name"); err != nil {
				return err
			}
		}
		u.Names = append(u.Names, n)
		if p.is(",") {
			if err := p.advance(); err != nil {
				return err
			}
			if p.is("}") {
				break
			}
			continue
		}
		break
	}
	if err := p.expect("}"); err != nil {
		return err
	}
	iface.Uses = append(iface.Uses, u)
	return p.expect(";")
}

// parseTypeDef parses a record, variant, enum or flags definition.
func (p *wparser) parseTypeDef(iface *Interface) (*TypeDef, error) {
	kw := p.tok.text
	if err := p.advance(); err != nil {
		return nil, err
	}
	name, pos, err := p.ident("a " + kw + " name")
	if err != nil {
		return nil, err
	}
	d := &TypeDef{Iface: iface, Name: name, Pos: pos}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	for !p.is("}") {
		mname, mpos, err := p.ident("a " + map[string]string{"record": "field", "variant": "case", "enum": "case", "flags": "label"}[kw] + " name")
		if err != nil {
			return nil, err
		}
		m := Member{Name: mname, Pos: mpos}
		switch kw {
		case "record":
			if err := p.expect(":"); err != nil {
				return nil, err
			}
			if m.Type, err = p.parseType(); err != nil {
				return nil, err
			}
		case "variant":
			if p.is("(") {
				if err := p.advance(); err != nil {
					return nil, err
				}
				if m.Type, err = p.parseType(); err != nil {
					return nil, err
				}
				if err := p.expect(")"); err != nil {
					return nil, err
				}
			}
		}
		if kw == "record" {
			d.Fields = append(d.Fields, m)
		} else {
			d.Cases = append(d.Cases, m)
		}
		if !p.is(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if err := p.expect("}"); err != nil {
		return nil, err
	}
	switch kw {
	case "record":
		d.Kind = KindRecord
	case "variant":
		d.Kind = KindVariant
	case "enum":
		d.Kind = KindEnum
	case "flags":
		d.Kind = KindFlags
	}
	if d.Kind != KindRecord && len(d.Cases) == 0 {
		return nil, p.errorf(pos, "%s %s has no cases", kw, name)
	}
	return d, nil
}

func (p *wparser) parseAlias(iface *Interface) error {
	if err := p.advance(); err != nil {
		return err
	}
	name, pos, err := p.ident("a type name")
	if err != nil {
		return err
	}
	if err := p.expect("="); err != nil {
		return err
	}
	t, err := p.parseType()
	if err != nil {
		return err
	}
	iface.Types = append(iface.Types, &TypeDef{Iface: iface, Kind: KindAlias, Name: name, Pos: pos, Alias: t})
	return p.expect(";")
}

func (p *wparser) parseResource(iface *Interface) error {
	if err := p.advance(); err != nil {
		return err
	}
	name, pos, err := p.ident("a resource name")
	if err != nil {
		return err
	}
	d := &TypeDef{Iface: iface, Kind: KindResource, Name: name, Pos: pos}
	iface.Types = append(iface.Types, d)
	if p.is(";") {
		return p.advance()
	}
	if err := p.expect("{"); err != nil {
		return err
	}
	for !p.is("}") {
		if p.keyword("constructor") {
			fpos := p.tok.pos
			if err := p.advance(); err != nil {
				return err
			}
			params, err := p.params()
			if err != nil {
				return err
			}
			d.Funcs = append(d.Funcs, &Func{Name: "constructor", Pos: fpos, Params: params})
			if err := p.expect(";"); err != nil {
				return err
			}
			continue
		}
		f, err := p.parseFuncItem()
		if err != nil {
			return err
		}
		d.Funcs = append(d.Funcs, f)
	}
	return p.advance()
}

// parseFuncItem parses name: [static] func(params) [-> type];
func (p *wparser) parseFuncItem() (*Func, error) {
	name, pos, err := p.ident("a function name")
	if err != nil {
		return nil, err
	}
	if err := p.expect(":"); err != nil {
		return nil, err
	}
	if p.keyword("static") {
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.keyword("async") {
		return nil, p.errorf(p.tok.pos, "async functions are not supported")
	}
	if !p.keyword("func") {
		return nil, p.errorf(p.tok.pos, "want func after %s:, found %s", name, p.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	f := &Func{Name: name, Pos: pos}
	if f.Params, err = p.params(); err != nil {
		return nil, err
	}
	if p.is("->") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.is("(") {
			return nil, p.errorf(p.tok.pos, "named results (-> (a: T, ...)) are not supported")
		}
		if f.Result, err = p.parseType(); err != nil {
			return nil, err
		}
	}
	return f, p.expect(";")
}

func (p *wparser) params() ([]Member, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []Member
	for !p.is(")") {
		name, pos, err := p.ident("a parameter name")
		if err != nil {
			return nil, err
		}
		if err := p.expect(":"); err != nil {
			return nil, err
		}
		t, err := p.parseType()
		if err != nil {
			return nil, err
		}
		out = append(out, Member{Name: name, Type: t, Pos: pos})
		if !p.is(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	return out, p.expect(")")
}

func (p *wparser) parseType() (*Type, error) {
	if p.tok.kind != tokIdent {
		return nil, p.errorf(p.tok.pos, "want a type, found %s", p.describe())
	}
	t := &Type{Name: p.tok.text, Pos: p.tok.pos}
	if p.tok.esc {
		return t, p.advance()
	}
	switch t.Name {
	case "future", "stream", "error-context":
		return nil, p.errorf(t.Pos, "%s types are not supported", t.Name)
	case "float32", "float64":
		return nil, p.errorf(t.Pos, "%s is the old name of f%s: write f%s", t.Name, t.Name[5:], t.Name[5:])
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	arity := map[string]int{"list": 1, "option": 1, "own": 1, "borrow": 1, "tuple": -1, "result": -2}[t.Name]
	if arity == 0 {
		return t, nil // a primitive or a type name
	}
	if !p.is("<") {
		if t.Name == "result" {
			t.Args = []*Type{nil, nil}
			return t, nil
		}
		return nil, p.errorf(p.tok.pos, "want < after %s, found %s", t.Name, p.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	for {
		var arg *Type
		if p.is("_") {
			if t.Name != "result" || len(t.Args) > 0 {
				return nil, p.errorf(p.tok.pos, "_ stands only for result's ok side")
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
		} else {
			if p.tok.kind == tokInt && t.Name == "list" {
				return nil, p.errorf(p.tok.pos, "fixed-size lists (list<T, N>) are not supported")
			}
			var err error
			if arg, err = p.parseType(); err != nil {
				return nil, err
			}
		}
		t.Args = append(t.Args, arg)
		if !p.is(",") {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if err := p.expect(">"); err != nil {
		return nil, err
	}
	switch {
	case arity > 0 && len(t.Args) != arity:
		return nil, p.errorf(t.Pos, "%s takes %d type argument, found %d (fixed-size lists are not supported)", t.Name, arity, len(t.Args))
	case t.Name == "result" && len(t.Args) == 1:
		t.Args = append(t.Args, nil)
	case t.Name == "result" && len(t.Args) != 2:
		return nil, p.errorf(t.Pos, "result takes at most 2 type arguments, found %d", len(t.Args))
	case t.Name == "tuple" && len(t.Args) == 0:
		return nil, p.errorf(t.Pos, "tuple needs at least one type")
	}
	if t.Name == "result" && t.Args[0] == nil && len(t.Args) == 2 && t.Args[1] == nil {
		return nil, p.errorf(t.Pos, "result<_> has neither side: write result")
	}
	if (t.Name == "own" || t.Name == "borrow") && len(t.Args[0].Args) > 0 {
		return nil, p.errorf(t.Pos, "%s takes a resource name", t.Name)
	}
	return t, nil
}

func (p *wparser) parseWorld() error {
	if err := p.advance(); err != nil {
		return err
	}
	name, pos, err := p.ident("a world name")
	if err != nil {
		return err
	}
	w := &World{Name: name, Pos: pos}
	if err := p.expect("{"); err != nil {
		return err
	}
	for !p.is("}") {
		if !p.keyword("import") && !p.keyword("export") {
			if p.tok.kind == tokEOF {
				return p.errorf(p.tok.pos, "world %s is not closed", name)
			}
			return p.errorf(p.tok.pos, "want import or export in world %s, found %s (other world items are not supported)", name, p.describe())
		}
		item := WorldItem{Export: p.tok.text == "export", Pos: p.tok.pos}
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind == tokIdent {
			if next, err := p.lookahead(); err != nil {
				return err
			} else if next.kind == tokPunct && next.text == ":" {
				// "name: func..." and "name: interface {...}" are inline items, unless
				// what follows the colon is a package path ("ns:pkg/iface").
				if after, err := p.isInlineItem(); err != nil {
					return err
				} else if after {
					return p.errorf(p.tok.pos, "inline world items (import name: func or interface) are not supported")
				}
			}
		}
		if item.Path, _, err = p.path(); err != nil {
			return err
		}
		w.Items = append(w.Items, item)
		if err := p.expect(";"); err != nil {
			return err
		}
	}
	p.file.Worlds = append(p.file.Worlds, w)
	return p.advance()
}

// isInlineItem reports whether "ident :" starts an inline world item: the word after
// the colon is func, async, static or interface, which no package is called here.
func (p *wparser) isInlineItem() (bool, error) {
	saved, savedPeek := p.lx, p.peek
	defer func() { p.lx, p.peek = saved, savedPeek }()
	p.peek = nil
	t, err := p.lx.next()
	if err != nil {
		return false, err
	}
	if t.kind != tokIdent || t.esc {
		return false, nil
	}
	switch t.text {
	case "func", "async", "interface", "static":
		return true, nil
	}
	return false, nil
}
