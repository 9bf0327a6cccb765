// Package witcheck holds the WIT contract (wit/*.wit) against its hand-written Go
// copies: the host's (wit/abi: Go types and the abi.Type descriptors that lift and
// lower) and the guest SDK's (wit/guest and its subpackages). It parses the .wit files
// itself and reads the Go packages from source, so a field renamed on one side is a
// failure that names the WIT type, the member and the side, not a silent drift.
//
// The mapping rule, by WIT type:
//
//	names                kebab-case to CamelCase (GoName): tool-input ToolInput, session-id SessionID;
//	                     a binding's Names maps a type whose Go name differs (request HTTPRequest)
//	bool, string         bool, string
//	u8 … u64, s8 … s64   uint8 (byte) … uint64, int8 … int64
//	f32, f64, char       float32, float64, rune
//	list<T>              []T ([]byte for list<u8>)
//	option<T>            *T; for a list also the list itself (nil is none), or T beside a bool Has<Field>
//	tuple<T, …>          [n]T when every element is T, else a struct of n fields of those types in order
//	record               a struct: each WIT field a field of its Go name and type, no exported field more
//	                     (Go field order is free: the codecs address fields by name)
//	enum                 a named integer type with a constant per case, valued in WIT order and named
//	                     ending in the case's Go name; or string, when the side has a case list for it
//	flags                a named unsigned integer type with a constant 1<<i per label, named alike
//	variant              a struct with a Case string field and a field of each payload's type (or a
//	                     pointer to it), plus a case list; or, without a Go type, the case list alone;
//	                     a payload record the side has no Go type for is taken as flattened
//	type a = T           a's Go type, or T's (a Go alias is what it names)
//	own<R>, borrow<R>    uint32, or R's Go type (or a pointer to it)
//
// A case list is a package variable: a []string of the labels in WIT order (the index
// is the discriminant), or a map[string]<integer> from label to discriminant.
//
// The host's descriptors follow the component model exactly: every WIT function of a
// loaded interface needs one (Config.HostFuncs), and its parameter and result types
// must match the WIT in kind, field and case names, order and payloads; a named
// descriptor must carry its WIT type's name.
//
// What a side represents otherwise is an Exception with its reason; an exception that
// excuses nothing is itself a finding, so the list cannot go stale.
package witcheck

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/constant"
	"slices"
	"sort"
	"strings"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// Side names one Go copy of the contract.
type Side string

// The two sides.
const (
	Host  Side = "host"
	Guest Side = "guest"
)

// Binding says where one side keeps the Go copies of one WIT interface's types.
type Binding struct {
	Interface string            // the interface's ID, "murmur:tool/run@0.1.0"
	Dir       string            // the Go package, relative to the module root
	Names     map[string]string // WIT type name -> Go type name, where GoName does not give it
	CaseLists map[string]string // WIT enum or variant name -> the package variable listing its cases
}

// HostFunc is the host's descriptor of one WIT function.
type HostFunc struct {
	Name string // how messages name it: "abi.ToolRun01"
	Func *abi.Func
}

// ExceptionKind is what an Exception excuses.
type ExceptionKind int

// Exception kinds.
const (
	// NoGoType: the side has no Go type (and no case list) for Type.
	NoGoType ExceptionKind = iota + 1
	// FieldShape: the side's struct carries WIT field Member in the Go fields StandIns
	// (none: it drops the field), so the field's name and type are not compared.
	FieldShape
	// ExtraField: the side's struct has Go field Member, which the WIT record lacks.
	ExtraField
	// CaseAbsent: the side's map case list leaves out case Member, and its union struct
	// need not carry the payload.
	CaseAbsent
	// NoDescriptor: the host has no descriptor for function Type ("<interface>#<func>").
	NoDescriptor
)

var exceptionNames = map[ExceptionKind]string{
	NoGoType: "NoGoType", FieldShape: "FieldShape", ExtraField: "ExtraField", CaseAbsent: "CaseAbsent", NoDescriptor: "NoDescriptor",
}

// Exception is an allow-list entry: a way one side intentionally differs from the
// rule, and why.
type Exception struct {
	Kind     ExceptionKind
	Side     Side
	Type     string // the WIT type's ID, "murmur:driver/process@0.6.0.description"; NoDescriptor: "<interface ID>#<func>"
	Member   string // FieldShape: the WIT field; ExtraField: the Go field; CaseAbsent: the case
	StandIns []string
	Reason   string
}

func (e Exception) String() string {
	s := fmt.Sprintf("%s %s %s", exceptionNames[e.Kind], e.Side, e.Type)
	if e.Member != "" {
		s += " " + e.Member
	}
	return s
}

// iface is the ID of the interface the exception is about.
func (e Exception) iface() string {
	if e.Kind == NoDescriptor {
		id, _, _ := strings.Cut(e.Type, "#")
		return id
	}
	if i := strings.LastIndex(e.Type, "."); i > 0 {
		return e.Type[:i]
	}
	return e.Type
}

// Config is what Check holds the .wit files against.
type Config struct {
	Root       string    // the module root directory (holding go.mod)
	Host       []Binding // the host's Go packages, by interface
	Guest      []Binding // the guest SDK's
	HostFuncs  map[string]HostFunc
	Exceptions []Exception
	// Subset says the sources are part of the contract: bindings, functions and
	// exceptions of interfaces not among them are not reported as stale.
	Subset bool
}

// Finding is one disagreement between the WIT and a Go side, or a stale entry of the
// configuration.
type Finding struct {
	File    string // the .wit file, as its Source named it
	Subject string // "record murmur:tool/run.tool-input", "func murmur:capsule/run.run"
	Member  string // `field "log-path"`, `case "note"`, "Go field Attachments"; "" for the type itself
	Side    Side
	Problem string
	Fix     string
}

// Key is what a test compares of a finding: which type, which member, which side.
type Key struct {
	Subject, Member string
	Side            Side
}

// SameKeys reports whether findings are exactly want, in any order, and returns the
// findings' keys sorted, for the test's message.
func SameKeys(findings []Finding, want []Key) (bool, []Key) {
	got := make([]Key, 0, len(findings))
	for _, f := range findings {
		got = append(got, Key{f.Subject, f.Member, f.Side})
	}
	order := func(a, b Key) int {
		return cmp.Or(strings.Compare(a.Subject, b.Subject), strings.Compare(a.Member, b.Member), strings.Compare(string(a.Side), string(b.Side)))
	}
	want = slices.Clone(want)
	slices.SortFunc(got, order)
	slices.SortFunc(want, order)
	return slices.Equal(got, want), got
}

func (f Finding) String() string {
	s := f.File + ": " + f.Subject
	if f.Member != "" {
		s += " " + f.Member
	}
	return s + ": " + f.Problem + " (fix: " + f.Fix + ")"
}

// Check parses srcs and holds every record, variant, enum, flags and type alias against
// the Go sides of cfg, and every function against the host's descriptors. It returns
// the findings in file order; an error is a file or package that cannot be read.
func Check(cfg Config, srcs []Source) ([]Finding, error) {
	con, err := Load(srcs)
	if err != nil {
		return nil, err
	}
	src, err := newGoSource(cfg.Root)
	if err != nil {
		return nil, err
	}
	c := &checker{cfg: cfg, con: con, src: src, seen: map[string]bool{}, used: make([]bool, len(cfg.Exceptions)),
		descSeen: map[descKey]bool{}, noBinding: map[string]bool{}}
	if err := c.run(); err != nil {
		return nil, err
	}
	return c.out, nil
}

type checker struct {
	cfg       Config
	con       *Contract
	src       *goSource
	out       []Finding
	seen      map[string]bool // findings reported, to report each once
	used      []bool          // exceptions that excused something
	descSeen  map[descKey]bool
	noBinding map[string]bool // side + interface reported without a binding
}

type descKey struct {
	def *TypeDef
	t   *abi.Type
}

func (c *checker) report(f Finding, key string) {
	if key == "" {
		key = f.String()
	}
	key = string(f.Side) + " " + key
	if !c.seen[key] {
		c.seen[key] = true
		c.out = append(c.out, f)
	}
}

func (c *checker) run() error {
	for _, f := range c.con.Files {
		for _, i := range f.Interfaces {
			for _, d := range i.Types {
				for _, side := range []Side{Host, Guest} {
					if err := c.checkGo(side, d); err != nil {
						return err
					}
				}
			}
			for _, fn := range i.Funcs {
				c.checkFunc(i, fn)
			}
		}
	}
	c.stale()
	return nil
}

func (c *checker) bindings(side Side) []Binding {
	if side == Host {
		return c.cfg.Host
	}
	return c.cfg.Guest
}

func (c *checker) binding(side Side, i *Interface) *Binding {
	for k, b := range c.bindings(side) {
		if b.Interface == i.ID() {
			return &c.bindings(side)[k]
		}
	}
	return nil
}

// exception finds the entry excusing kind for (side, typ, member) and marks it used.
func (c *checker) exception(kind ExceptionKind, side Side, typ, member string) *Exception {
	for k, e := range c.cfg.Exceptions {
		if e.Kind == kind && e.Side == side && e.Type == typ && e.Member == member {
			c.used[k] = true
			return &c.cfg.Exceptions[k]
		}
	}
	return nil
}

// goRef is where a side's Go copy of a WIT type is, whether or not it exists.
type goRef struct {
	pkg      *goPkg
	name     string
	exists   bool
	caseList string // the binding's case list variable, "" if none
}

func (r goRef) qual() string { return r.pkg.name + "." + r.name }

// is reports whether g is the Go type r names, following a Go alias r may be.
func (r goRef) is(g *gType) bool {
	if !r.exists || g.kind != gNamed {
		return false
	}
	t, err := r.pkg.resolve(ast.NewIdent(r.name), nil)
	return err == nil && t.kind == gNamed && t.pkg == g.pkg && t.name == g.name
}

// ref returns the Go copy of d on side; ok is false when the side has no binding for
// d's interface.
func (c *checker) ref(side Side, d *TypeDef) (goRef, bool, error) {
	b := c.binding(side, d.Iface)
	if b == nil {
		return goRef{}, false, nil
	}
	p, err := c.src.pkg(b.Dir)
	if err != nil {
		return goRef{}, false, err
	}
	name := GoName(d.Name)
	if n := b.Names[d.Name]; n != "" {
		name = n
	}
	return goRef{pkg: p, name: name, exists: p.types[name] != nil, caseList: b.CaseLists[d.Name]}, true, nil
}

// who is a side's possessive for messages: "the host's abi.ToolInput".
func who(side Side, what string) string { return "the " + string(side) + "'s " + what }

func (c *checker) finding(side Side, d *TypeDef, member, fix, format string, args ...any) {
	c.report(Finding{File: d.Iface.File.Path, Subject: d.Label(), Member: member, Side: side,
		Problem: fmt.Sprintf(format, args...), Fix: fix}, "")
}

const fixRename = "rename the Go field or the WIT field so both sides agree"

func (c *checker) checkGo(side Side, d *TypeDef) error {
	r, ok, err := c.ref(side, d)
	if err != nil {
		return err
	}
	if !ok {
		key := string(side) + " " + d.Iface.ID()
		if !c.noBinding[key] {
			c.noBinding[key] = true
			c.report(Finding{File: d.Iface.File.Path, Subject: "interface " + d.Iface.Short(), Side: side,
				Problem: fmt.Sprintf("the %s binds no Go package to %s, which defines types", side, d.Iface.ID()),
				Fix:     "add a Binding for it to the " + string(side) + "'s table, naming the package that holds its Go types"}, "")
		}
		return nil
	}
	ex := c.exception(NoGoType, side, d.ID(), "")
	if !r.exists {
		if r.caseList != "" && (d.Kind == KindEnum || d.Kind == KindVariant) {
			if ex != nil {
				c.finding(side, d, "", "remove the NoGoType exception: the case list stands for the type",
					"an exception says the %s has no Go copy of it, but the binding names the case list %s.%s", side, r.pkg.name, r.caseList)
			}
			c.checkCaseList(side, d, r)
			return nil
		}
		if ex == nil {
			c.finding(side, d, "", "name the Go type "+r.name+", map the WIT name to it in the binding's Names, or add a NoGoType exception with the reason",
				"%s has no type %s", who(side, r.pkg.name), r.name)
		}
		return nil
	}
	if ex != nil {
		c.finding(side, d, "", "remove the NoGoType exception, which no longer holds",
			"an exception says the %s has no Go type for it, but %s exists", side, r.qual())
	}
	g := &gType{kind: gNamed, name: r.name, pkg: r.pkg, expr: r.qual()}
	switch d.Kind {
	case KindRecord:
		c.checkRecord(side, d, r, g)
	case KindEnum, KindFlags:
		c.checkConsts(side, d, r, g)
	case KindVariant:
		c.checkUnion(side, d, r, g)
		if r.caseList == "" {
			c.finding(side, d, "", "add the variable listing the variant's cases to the binding's CaseLists",
				"%s names its case in a string, and the binding names no case list to check the cases against", who(side, r.qual()))
		}
	case KindAlias:
		decl := r.pkg.types[r.name]
		t, err := r.pkg.resolve(decl.spec.Type, decl.file)
		if err != nil {
			return err
		}
		if !c.matches(side, d.Alias, t) {
			c.finding(side, d, "", "change the Go type's definition or the WIT alias so both agree",
				"%s is %s, but %s maps to %s", who(side, r.qual()), t.expr, d.Alias, c.describe(side, d.Alias))
		}
	}
	if r.caseList != "" {
		c.checkCaseList(side, d, r)
	}
	return nil
}

func (c *checker) checkRecord(side Side, d *TypeDef, r goRef, g *gType) {
	u, err := g.underlying()
	if err != nil || u.kind != gStruct {
		c.finding(side, d, "", "make it a struct, or point the binding at the Go struct copying the record",
			"%s is not a struct; a record maps to one", who(side, r.qual()))
		return
	}
	fields, err := u.structFields()
	if err != nil {
		c.finding(side, d, "", "give the field a name of the WIT field", "%s: %v", who(side, r.qual()), err)
		return
	}
	byName := map[string]*goField{}
	for k := range fields {
		byName[fields[k].name] = &fields[k]
	}
	used := map[string]bool{}
	for _, f := range d.Fields {
		member := fmt.Sprintf("field %q", f.Name)
		if ex := c.exception(FieldShape, side, d.ID(), f.Name); ex != nil {
			for _, s := range ex.StandIns {
				if byName[s] == nil {
					c.finding(side, d, member, "correct the FieldShape exception's StandIns",
						"an exception says %s carries it in field %s, which %s lacks", who(side, r.qual()), s, r.qual())
				}
				used[s] = true
			}
			continue
		}
		n := GoName(f.Name)
		gf := byName[n]
		if gf == nil {
			c.finding(side, d, member, fixRename, "%s has no field %s", who(side, r.qual()), n)
			continue
		}
		used[n] = true
		ok := c.matches(side, f.Type, gf.typ)
		if has := byName["Has"+n]; has != nil && has.typ.kind == gBasic && has.typ.name == "bool" && isOption(f.Type) {
			used[has.name] = true
			ok = ok || c.matches(side, f.Type.Args[0], gf.typ)
		}
		if !ok {
			c.finding(side, d, member, "change the Go field's type or the WIT field's so both sides agree",
				"%s field %s is %s, but %s maps to %s", who(side, r.qual()), n, gf.typ.expr, f.Type, c.describe(side, f.Type))
		}
	}
	for _, gf := range fields {
		if used[gf.name] || c.exception(ExtraField, side, d.ID(), gf.name) != nil {
			continue
		}
		c.finding(side, d, "Go field "+gf.name, "rename it to a WIT field's Go name, remove it, or add the field to the WIT",
			"%s has field %s, which %s does not declare", who(side, r.qual()), gf.name, d.Label())
	}
}

func isOption(t *Type) bool {
	if t.Def != nil && t.Def.Kind == KindAlias {
		return isOption(t.Def.Alias)
	}
	return t.Def == nil && t.Name == "option"
}

func isList(t *Type) bool {
	if t.Def != nil && t.Def.Kind == KindAlias {
		return isList(t.Def.Alias)
	}
	return t.Def == nil && t.Name == "list"
}

var integers = map[string]bool{"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true}

// checkConsts holds an enum's or flags' named integer type and its constants.
func (c *checker) checkConsts(side Side, d *TypeDef, r goRef, g *gType) {
	flags := d.Kind == KindFlags
	u, err := g.underlying()
	if err != nil || u.kind != gBasic || !integers[u.name] || (flags && !strings.HasPrefix(u.name, "uint")) {
		want := "a named integer type"
		if flags {
			want = "a named unsigned integer type"
		}
		c.finding(side, d, "", "define it as "+want, "%s is %s; %s %s maps to %s", who(side, r.qual()), typeText(u, err), d.Kind, d.Name, want)
		return
	}
	type cst struct {
		name string
		val  int64
	}
	var consts []cst
	for _, n := range r.pkg.order {
		k := r.pkg.consts[n]
		if r.pkg.constType(k) != r.name {
			continue
		}
		v, err := r.pkg.constValue(n)
		if err != nil {
			c.finding(side, d, "Go constant "+n, "write its value as a literal, iota or arithmetic of them",
				"%s cannot be read: %v", who(side, r.pkg.name+"."+n), err)
			continue
		}
		x, exact := constant.Int64Val(constant.ToInt(v))
		if !exact {
			c.finding(side, d, "Go constant "+n, "make it an integer", "%s is %s, not an integer", who(side, r.pkg.name+"."+n), v)
			continue
		}
		consts = append(consts, cst{n, x})
	}
	valueOf := func(i int) int64 {
		if flags {
			return 1 << i
		}
		return int64(i)
	}
	noun := "case"
	if flags {
		noun = "label"
	}
	known := map[int64]bool{}
	for i, m := range d.Cases {
		want, suffix := valueOf(i), GoName(m.Name)
		known[want] = true
		var at []string
		found := false
		for _, k := range consts {
			if k.val == want {
				at = append(at, k.name)
				found = found || strings.HasSuffix(k.name, suffix)
			}
		}
		if found {
			continue
		}
		member := fmt.Sprintf("%s %q", noun, m.Name)
		if len(at) > 0 {
			c.finding(side, d, member, "rename the constant to end in "+suffix+", or put the cases in the WIT order",
				"%s constant valued %d is %s, not one ending in %s", who(side, r.qual()), want, strings.Join(at, ", "), suffix)
		} else {
			c.finding(side, d, member, fmt.Sprintf("add a constant of type %s valued %d named ending in %s", r.name, want, suffix),
				"%s has no constant for it", who(side, r.qual()))
		}
	}
	for _, k := range consts {
		if !known[k.val] {
			c.finding(side, d, "Go constant "+k.name, "remove the constant, or add its "+noun+" to the WIT",
				"%s is valued %d, which no %s of %s %s has", who(side, r.pkg.name+"."+k.name), k.val, noun, d.Kind, d.Name)
		}
	}
}

func typeText(g *gType, err error) string {
	if err != nil {
		return "unreadable (" + err.Error() + ")"
	}
	return g.expr
}

// checkUnion holds a variant's Go struct: a Case string field, and a field that can
// carry each payload unless the payload's record is flattened (the side has no Go type
// for it, by exception).
func (c *checker) checkUnion(side Side, d *TypeDef, r goRef, g *gType) {
	u, err := g.underlying()
	if err != nil || u.kind != gStruct {
		c.finding(side, d, "", "make it a struct with a Case string field", "%s is not a struct; a variant maps to one", who(side, r.qual()))
		return
	}
	fields, err := u.structFields()
	if err != nil {
		c.finding(side, d, "", "give the field a name", "%s: %v", who(side, r.qual()), err)
		return
	}
	hasCase := false
	for _, f := range fields {
		hasCase = hasCase || (f.name == "Case" && f.typ.kind == gBasic && f.typ.name == "string")
	}
	if !hasCase {
		c.finding(side, d, "", "add a Case string field naming the case", "%s has no Case string field; a variant maps to a struct whose Case names the case", who(side, r.qual()))
	}
	for _, m := range d.Cases {
		if m.Type == nil || c.hasException(CaseAbsent, side, d.ID(), m.Name) || c.flattened(side, m.Type) {
			continue
		}
		carried := false
		for _, f := range fields {
			if f.name != "Case" && (c.matches(side, m.Type, f.typ) || f.typ.kind == gPtr && c.matches(side, m.Type, f.typ.elem)) {
				carried = true
			}
		}
		if !carried {
			c.finding(side, d, fmt.Sprintf("case %q", m.Name), "add a field of that type to carry the payload, or a CaseAbsent exception",
				"%s has no field of type %s to carry its payload %s", who(side, r.qual()), c.describe(side, m.Type), m.Type)
		}
	}
}

// hasException is exception without marking the entry used.
func (c *checker) hasException(kind ExceptionKind, side Side, typ, member string) bool {
	for _, e := range c.cfg.Exceptions {
		if e.Kind == kind && e.Side == side && e.Type == typ && e.Member == member {
			return true
		}
	}
	return false
}

// flattened reports whether t is a record the side has no Go type for by exception:
// its fields are spread over the union struct.
func (c *checker) flattened(side Side, t *Type) bool {
	for t.Def != nil && t.Def.Kind == KindAlias {
		t = t.Def.Alias
	}
	return t.Def != nil && t.Def.Kind == KindRecord && c.hasException(NoGoType, side, t.Def.ID(), "")
}

func (c *checker) checkCaseList(side Side, d *TypeDef, r goRef) {
	cl, err := r.pkg.caseList(r.caseList)
	if err != nil {
		c.finding(side, d, "", "point the binding's CaseLists at the variable listing the cases", "%s", err)
		return
	}
	list := r.pkg.name + "." + r.caseList
	index := map[string]int{}
	var want []string
	for i, m := range d.Cases {
		index[m.Name] = i
		want = append(want, m.Name)
	}
	have := map[string]bool{}
	for _, l := range cl.labels {
		have[l] = true
	}
	complete := true
	for i, w := range want {
		if have[w] {
			continue
		}
		complete = false
		if cl.index != nil && c.exception(CaseAbsent, side, d.ID(), w) != nil {
			continue
		}
		c.finding(side, d, fmt.Sprintf("case %q", w), fmt.Sprintf("add %q to %s at index %d (its WIT order), or remove the case from the WIT", w, list, i),
			"%s lacks %q", who(side, list), w)
	}
	for _, l := range cl.labels {
		if _, ok := index[l]; !ok {
			complete = false
			c.finding(side, d, fmt.Sprintf("case %q", l), "remove it from "+list+", or add the case to the WIT",
				"%s has %q, which %s does not declare", who(side, list), l, d.Label())
		}
	}
	if cl.index != nil {
		for _, l := range cl.labels {
			if i, ok := index[l]; ok && cl.index[l] != int64(i) {
				c.finding(side, d, fmt.Sprintf("case %q", l), fmt.Sprintf("map %q to %d", l, i),
					"%s maps %q to %d; its WIT index (the discriminant) is %d", who(side, list), l, cl.index[l], i)
			}
		}
		return
	}
	if complete {
		for i, l := range cl.labels {
			if l != want[i] {
				c.finding(side, d, fmt.Sprintf("case %q", want[i]), "put "+list+" in the WIT order",
					"%s has %q at index %d, where the WIT order puts %q (the index is the discriminant)", who(side, list), l, i, want[i])
				break
			}
		}
	}
}

var witGo = map[string]string{
	"bool": "bool", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64", "s8": "int8", "s16": "int16",
	"s32": "int32", "s64": "int64", "f32": "float32", "f64": "float64", "char": "int32", "string": "string",
}

// matches reports whether Go type g is a copy of WIT type t on side, by the rule.
func (c *checker) matches(side Side, t *Type, g *gType) bool {
	if d := t.Def; d != nil {
		r, ok, err := c.ref(side, d)
		if err != nil || !ok {
			return false
		}
		if r.is(g) {
			return true
		}
		switch d.Kind {
		case KindAlias:
			// A Go alias resolves to what it names, so it matches structurally.
			return c.matches(side, d.Alias, g)
		case KindEnum:
			return r.caseList != "" && g.kind == gBasic && g.name == "string"
		case KindResource:
			return g.kind == gBasic && g.name == "uint32" || g.kind == gPtr && r.is(g.elem)
		}
		return false
	}
	if p := witGo[t.Name]; p != "" {
		return g.kind == gBasic && g.name == p
	}
	switch t.Name {
	case "list":
		return g.kind == gSlice && c.matches(side, t.Args[0], g.elem)
	case "option":
		return g.kind == gPtr && c.matches(side, t.Args[0], g.elem) || isList(t.Args[0]) && c.matches(side, t.Args[0], g)
	case "tuple":
		if g.kind == gArray && g.n == int64(len(t.Args)) {
			all := true
			for _, a := range t.Args {
				all = all && c.matches(side, a, g.elem)
			}
			if all {
				return true
			}
		}
		u, err := g.underlying()
		if err != nil || u.kind != gStruct {
			return false
		}
		fields, err := u.structFields()
		if err != nil || len(fields) != len(t.Args) {
			return false
		}
		for i, a := range t.Args {
			if !c.matches(side, a, fields[i].typ) {
				return false
			}
		}
		return true
	case "own", "borrow":
		return c.matches(side, t.Args[0], g)
	}
	return false // result has no Go shape in a record
}

// describe renders what the rule maps t to on side, for messages.
func (c *checker) describe(side Side, t *Type) string {
	return strings.Join(c.shapes(side, t), " or ")
}

// shapes are the Go types the rule accepts for t on side.
func (c *checker) shapes(side Side, t *Type) []string {
	if d := t.Def; d != nil {
		r, ok, err := c.ref(side, d)
		if err != nil || !ok {
			return []string{"the " + string(side) + "'s copy of " + d.Name}
		}
		var alts []string
		if r.exists {
			alts = append(alts, r.qual())
		}
		switch {
		case d.Kind == KindAlias:
			alts = append(alts, c.shapes(side, d.Alias)...)
		case d.Kind == KindEnum && r.caseList != "":
			alts = append(alts, "string")
		case d.Kind == KindResource:
			alts = append(alts, "uint32")
		}
		if len(alts) == 0 {
			return []string{r.qual() + " (the " + string(side) + " has no such type)"}
		}
		return alts
	}
	if t.Name == "char" {
		return []string{"rune"}
	}
	if p := witGo[t.Name]; p != "" {
		return []string{p}
	}
	prefix := func(p string, alts []string) []string {
		out := make([]string, len(alts))
		for i, a := range alts {
			out[i] = p + a
		}
		return out
	}
	switch t.Name {
	case "list":
		if t.Args[0].Def == nil && t.Args[0].Name == "u8" {
			return []string{"[]byte"}
		}
		return prefix("[]", c.shapes(side, t.Args[0]))
	case "option":
		alts := prefix("*", c.shapes(side, t.Args[0]))
		if isList(t.Args[0]) {
			alts = append(alts, c.shapes(side, t.Args[0])...)
		}
		return alts
	case "tuple":
		var els []string
		for _, a := range t.Args {
			els = append(els, c.shapes(side, a)[0])
		}
		st := "struct{" + strings.Join(els, "; ") + "}"
		if slices.Equal(els, slices.Repeat(els[:1], len(els))) {
			return []string{fmt.Sprintf("[%d]%s", len(els), els[0]), st}
		}
		return []string{st}
	case "own", "borrow":
		return c.shapes(side, t.Args[0])
	}
	return []string{"nothing (a " + t.Name + " has no Go shape in a record)"}
}

// descCtx is where a descriptor comparison stands: the WIT type or function whose
// member is compared, and the descriptor root it was reached from.
type descCtx struct {
	file, subject, member, via string
}

func (c *checker) descFinding(x descCtx, fix string, problem func(via string) string) {
	f := Finding{File: x.file, Subject: x.subject, Member: x.member, Side: Host, Problem: problem(" (" + x.via + ")"), Fix: fix}
	key := Finding{File: x.file, Subject: x.subject, Member: x.member, Side: Host, Problem: problem(""), Fix: fix}.String()
	c.report(f, key)
}

const fixDesc = "change the abi.Type descriptor or the WIT so both agree"

func (c *checker) checkFunc(i *Interface, fn *Func) {
	key := i.ID() + "#" + fn.Name
	x := descCtx{file: i.File.Path, subject: "func " + i.Short() + "." + fn.Name}
	hf, ok := c.cfg.HostFuncs[key]
	if !ok {
		if c.exception(NoDescriptor, Host, key, "") == nil {
			c.report(Finding{File: x.file, Subject: x.subject, Side: Host, Problem: "the host has no descriptor for it",
				Fix: "add its abi.Func to the host's function table, or a NoDescriptor exception with the reason"}, "")
		}
		return
	}
	if c.hasException(NoDescriptor, Host, key, "") {
		c.exception(NoDescriptor, Host, key, "")
		c.report(Finding{File: x.file, Subject: x.subject, Side: Host, Problem: "an exception says the host has no descriptor for it, but " + hf.Name + " is one",
			Fix: "remove the NoDescriptor exception"}, "")
	}
	x.via = hf.Name
	params, results := hf.Func.Params(), hf.Func.Results()
	if len(params) != len(fn.Params) {
		c.descFinding(x, fixDesc, func(via string) string {
			return fmt.Sprintf("the host's descriptor%s takes %d parameters, the WIT %d", via, len(params), len(fn.Params))
		})
	} else {
		for k, p := range fn.Params {
			px := x
			px.member, px.via = fmt.Sprintf("parameter %q", p.Name), fmt.Sprintf("%s parameter %d", hf.Name, k)
			c.desc(p.Type, params[k], px)
		}
	}
	want := 0
	if fn.Result != nil {
		want = 1
	}
	if len(results) != want {
		c.descFinding(x, fixDesc, func(via string) string {
			return fmt.Sprintf("the host's descriptor%s has %d results, the WIT %d", via, len(results), want)
		})
	} else if want == 1 {
		rx := x
		rx.member, rx.via = "result", hf.Name+" result"
		c.desc(fn.Result, results[0], rx)
	}
}

var descKinds = map[string]abi.Kind{
	"bool": abi.KindBool, "u8": abi.KindU8, "u16": abi.KindU16, "u32": abi.KindU32, "u64": abi.KindU64,
	"s8": abi.KindS8, "s16": abi.KindS16, "s32": abi.KindS32, "s64": abi.KindS64, "f32": abi.KindF32,
	"f64": abi.KindF64, "char": abi.KindChar, "string": abi.KindString,
	"list": abi.KindList, "option": abi.KindOption, "result": abi.KindResult, "tuple": abi.KindTuple,
	"own": abi.KindOwn, "borrow": abi.KindBorrow,
}

var defKinds = map[Kind]abi.Kind{KindRecord: abi.KindRecord, KindVariant: abi.KindVariant, KindEnum: abi.KindEnum, KindFlags: abi.KindFlags, KindResource: abi.KindOwn}

// desc compares WIT type t with the host's descriptor at x.
func (c *checker) desc(t *Type, at *abi.Type, x descCtx) {
	if t.Def != nil {
		c.descDef(t.Def, at, x)
		return
	}
	if at.Kind() != descKinds[t.Name] {
		c.descFinding(x, fixDesc, func(via string) string {
			return fmt.Sprintf("the host's descriptor%s is %s, the WIT %s", via, at, t)
		})
		return
	}
	switch t.Name {
	case "list", "option":
		c.desc(t.Args[0], at.Elem(), x)
	case "tuple":
		fs := at.Fields()
		if len(fs) != len(t.Args) {
			c.descFinding(x, fixDesc, func(via string) string {
				return fmt.Sprintf("the host's descriptor%s is %s, the WIT %s", via, at, t)
			})
			return
		}
		for k, a := range t.Args {
			c.desc(a, fs[k].Type, x)
		}
	case "result":
		cs := at.Cases()
		for k, a := range t.Args {
			if (a == nil) != (cs[k].Type == nil) {
				c.descFinding(x, fixDesc, func(via string) string {
					return fmt.Sprintf("the host's descriptor%s is %s, the WIT %s", via, at, t)
				})
				return
			}
			if a != nil {
				c.desc(a, cs[k].Type, x)
			}
		}
	case "own", "borrow":
		if at.Resource() != t.Args[0].Name {
			c.descFinding(x, fixDesc, func(via string) string {
				return fmt.Sprintf("the host's descriptor%s is %s, the WIT %s", via, at, t)
			})
		}
	}
}

// descName is a descriptor's name without a version suffix, or "" if it has none.
func descName(at *abi.Type) string {
	s := at.String()
	for _, p := range []string{"record{", "variant{", "enum{", "flags{", "own<", "borrow<"} {
		if strings.HasPrefix(s, p) {
			return ""
		}
	}
	name, _, _ := strings.Cut(s, "@")
	return name
}

func (c *checker) descDef(d *TypeDef, at *abi.Type, x descCtx) {
	if d.Kind == KindAlias {
		c.desc(d.Alias, at, x)
		return
	}
	if d.Kind == KindResource {
		// A bare resource name is own<R>.
		if at.Kind() != abi.KindOwn || at.Resource() != d.Name {
			c.descFinding(x, fixDesc, func(via string) string {
				return fmt.Sprintf("the host's descriptor%s is %s, the WIT own<%s>", via, at, d.Name)
			})
		}
		return
	}
	k := descKey{d, at}
	if c.descSeen[k] {
		return
	}
	c.descSeen[k] = true
	dx := descCtx{file: d.Iface.File.Path, subject: d.Label(), via: x.via}
	if at.Kind() != defKinds[d.Kind] {
		c.descFinding(dx, fixDesc, func(via string) string {
			return fmt.Sprintf("the host's descriptor%s is %s, not a %s", via, at, d.Kind)
		})
		return
	}
	if n := descName(at); n != "" && n != d.Name {
		c.descFinding(dx, fmt.Sprintf("name the descriptor %q (abi.Type.Named)", d.Name), func(via string) string {
			return fmt.Sprintf("the host's descriptor%s is named %q", via, n)
		})
	}
	var got []string
	var types []*abi.Type
	noun := "case"
	switch d.Kind {
	case KindRecord:
		noun = "field"
		for _, f := range at.Fields() {
			got, types = append(got, f.Name), append(types, f.Type)
		}
	case KindVariant, KindEnum:
		for _, cs := range at.Cases() {
			got, types = append(got, cs.Name), append(types, cs.Type)
		}
	case KindFlags:
		noun = "label"
		got = at.Labels()
		types = make([]*abi.Type, len(got))
	}
	members := d.Fields
	if d.Kind != KindRecord {
		members = d.Cases
	}
	if !c.descMembers(dx, d, noun, members, got) {
		return
	}
	for k, m := range members {
		mx := dx
		mx.member = fmt.Sprintf("%s %q", noun, m.Name)
		switch {
		case m.Type == nil && types[k] == nil:
		case m.Type == nil || types[k] == nil:
			c.descFinding(mx, fixDesc, func(via string) string {
				if m.Type == nil {
					return fmt.Sprintf("the host's descriptor%s gives it a payload %s, the WIT none", via, types[k])
				}
				return fmt.Sprintf("the host's descriptor%s gives it no payload, the WIT %s", via, m.Type)
			})
		default:
			c.desc(m.Type, types[k], mx)
		}
	}
}

// descMembers compares member names; it reports whether they agree, in order.
func (c *checker) descMembers(x descCtx, d *TypeDef, noun string, want []Member, got []string) bool {
	have := map[string]bool{}
	for _, g := range got {
		have[g] = true
	}
	wanted := map[string]bool{}
	ok := true
	for _, w := range want {
		wanted[w.Name] = true
		if !have[w.Name] {
			ok = false
			mx := x
			mx.member = fmt.Sprintf("%s %q", noun, w.Name)
			c.descFinding(mx, fixDesc, func(via string) string {
				return fmt.Sprintf("the host's descriptor%s has no %s %q", via, noun, w.Name)
			})
		}
	}
	for _, g := range got {
		if !wanted[g] {
			ok = false
			mx := x
			mx.member = fmt.Sprintf("%s %q", noun, g)
			c.descFinding(mx, fixDesc, func(via string) string {
				return fmt.Sprintf("the host's descriptor%s has %s %q, which %s does not declare", via, noun, g, d.Label())
			})
		}
	}
	if !ok || len(got) != len(want) {
		return false
	}
	for k, w := range want {
		if got[k] != w.Name {
			mx := x
			mx.member = fmt.Sprintf("%s %q", noun, w.Name)
			c.descFinding(mx, "put the descriptor's "+noun+"s in the WIT order", func(via string) string {
				return fmt.Sprintf("the host's descriptor%s has %q at position %d, where the WIT puts %q (the canonical ABI follows the WIT order)", via, got[k], k, w.Name)
			})
			return false
		}
	}
	return true
}

// stale reports configuration that excuses or names nothing: unused exceptions,
// bindings and functions of interfaces that do not exist or lack what they name.
func (c *checker) stale() {
	loaded := func(id string) bool { return c.con.Interface(id) != nil }
	file := func(id string) string {
		if i := c.con.Interface(id); i != nil {
			return i.File.Path
		}
		return "witcheck.Config"
	}
	cfgFinding := func(id, problem, fix string) {
		c.report(Finding{File: file(id), Subject: "configuration", Problem: problem, Fix: fix}, "")
	}
	for _, side := range []Side{Host, Guest} {
		dup := map[string]bool{}
		for _, b := range c.bindings(side) {
			if dup[b.Interface] {
				cfgFinding(b.Interface, fmt.Sprintf("the %s has two bindings for %s", side, b.Interface), "keep one")
			}
			dup[b.Interface] = true
			i := c.con.Interface(b.Interface)
			if i == nil {
				if !c.cfg.Subset {
					cfgFinding(b.Interface, fmt.Sprintf("the %s binds %s, which no .wit file defines", side, b.Interface), "remove the binding or correct its interface")
				}
				continue
			}
			for _, m := range []map[string]string{b.Names, b.CaseLists} {
				keys := make([]string, 0, len(m))
				for k := range m {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					if i.scope[k] == nil || i.scope[k].Iface != i {
						cfgFinding(b.Interface, fmt.Sprintf("the %s binding of %s maps %s, which the interface does not define", side, b.Interface, k), "remove the entry or correct its name")
					}
				}
			}
		}
	}
	keys := make([]string, 0, len(c.cfg.HostFuncs))
	for k := range c.cfg.HostFuncs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		id, fn, _ := strings.Cut(k, "#")
		i := c.con.Interface(id)
		switch {
		case i == nil && !c.cfg.Subset:
			cfgFinding(id, fmt.Sprintf("the host's function table names %s, whose interface no .wit file defines", k), "remove the entry or correct its name")
		case i != nil && !hasFunc(i, fn):
			cfgFinding(id, fmt.Sprintf("the host's function table names %s, which %s does not define", k, id), "remove the entry or correct its name")
		}
	}
	for k, e := range c.cfg.Exceptions {
		if c.used[k] || (c.cfg.Subset && !loaded(e.iface())) {
			continue
		}
		cfgFinding(e.iface(), fmt.Sprintf("the exception %s excuses nothing", e), "remove it (the sides agree now) or correct it")
	}
}

func hasFunc(i *Interface, name string) bool {
	for _, f := range i.Funcs {
		if f.Name == name {
			return true
		}
	}
	return false
}
