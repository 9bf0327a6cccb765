package witcheck

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Source is the text of one .wit file and the name messages give it.
type Source struct {
	Path string
	Data []byte
}

// ReadFS returns every *.wit file at the top of fsys, sorted by name, each named
// prefix + its name in messages.
func ReadFS(fsys fs.FS, prefix string) ([]Source, error) {
	names, err := fs.Glob(fsys, "*.wit")
	if err != nil {
		return nil, fmt.Errorf("witcheck: %w", err)
	}
	sort.Strings(names)
	var out []Source
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("witcheck: %w", err)
		}
		out = append(out, Source{Path: prefix + n, Data: b})
	}
	return out, nil
}

// ReadDir is ReadFS of a directory, each file named by its path.
func ReadDir(dir string) ([]Source, error) {
	return ReadFS(os.DirFS(dir), filepath.ToSlash(dir)+"/")
}

// Contract is a set of parsed .wit files with every use and type name resolved.
type Contract struct {
	Files  []*File
	ifaces map[string]*Interface // by ID
}

// Interface returns the interface of the given ID ("murmur:tool/run@0.1.0"), or nil.
func (c *Contract) Interface(id string) *Interface { return c.ifaces[id] }

// Load parses the sources and resolves them: every use must name a type of a loaded
// interface, and every type name must be defined or used where it appears.
func Load(srcs []Source) (*Contract, error) {
	c := &Contract{ifaces: map[string]*Interface{}}
	for _, s := range srcs {
		f, err := Parse(s.Path, s.Data)
		if err != nil {
			return nil, fmt.Errorf("witcheck: %w", err)
		}
		c.Files = append(c.Files, f)
		for _, i := range f.Interfaces {
			if prev := c.ifaces[i.ID()]; prev != nil {
				return nil, fmt.Errorf("witcheck: %s:%d:%d: interface %s is also defined in %s", f.Path, i.Pos.Line, i.Pos.Col, i.ID(), prev.File.Path)
			}
			c.ifaces[i.ID()] = i
		}
	}
	for _, f := range c.Files {
		for _, i := range f.Interfaces {
			if err := c.scope(i, nil); err != nil {
				return nil, err
			}
		}
	}
	for _, f := range c.Files {
		for _, i := range f.Interfaces {
			if err := c.resolveIface(i); err != nil {
				return nil, err
			}
		}
		for _, w := range f.Worlds {
			for _, it := range w.Items {
				// A world may name an interface of a package not loaded (a subset of the
				// files); a name of its own package must resolve.
				if _, err := c.target(f, it.Path); err != nil && (it.Path.Package.Namespace == "" || c.hasPackage(it.Path.Package)) {
					return nil, errAt(f, it.Pos, "world %s: %v", w.Name, err)
				}
			}
		}
	}
	return c, nil
}

func errAt(f *File, pos Pos, format string, args ...any) error {
	return fmt.Errorf("witcheck: %s:%d:%d: %s", f.Path, pos.Line, pos.Col, fmt.Sprintf(format, args...))
}

func (c *Contract) hasPackage(p PackageName) bool {
	for _, f := range c.Files {
		if f.Package == p {
			return true
		}
	}
	return false
}

// target finds the interface a path names from file f.
func (c *Contract) target(f *File, p Path) (*Interface, error) {
	id := p.String()
	if p.Package.Namespace == "" {
		id = Path{Package: f.Package, Interface: p.Interface}.String()
	}
	if i := c.ifaces[id]; i != nil {
		return i, nil
	}
	return nil, fmt.Errorf("interface %s is not among the files loaded", id)
}

// scope builds i's name table: its own types, then the names its uses bring in
// (following uses of uses); seen guards against cycles.
func (c *Contract) scope(i *Interface, seen map[*Interface]bool) error {
	if i.scope != nil {
		return nil
	}
	if seen[i] {
		return errAt(i.File, i.Pos, "interface %s uses itself through a cycle of uses", i.ID())
	}
	if seen == nil {
		seen = map[*Interface]bool{}
	}
	seen[i] = true
	sc := map[string]*TypeDef{}
	for _, d := range i.Types {
		if sc[d.Name] != nil {
			return errAt(i.File, d.Pos, "%s is defined twice in interface %s", d.Name, i.ID())
		}
		sc[d.Name] = d
	}
	for _, u := range i.Uses {
		t, err := c.target(i.File, u.Path)
		if err != nil {
			return errAt(i.File, u.Pos, "use: %v", err)
		}
		if err := c.scope(t, seen); err != nil {
			return err
		}
		for _, n := range u.Names {
			d := t.scope[n.Name]
			if d == nil {
				return errAt(i.File, u.Pos, "use: interface %s has no type %s", t.ID(), n.Name)
			}
			if sc[n.As] != nil {
				return errAt(i.File, u.Pos, "use brings in %s, which interface %s already has", n.As, i.ID())
			}
			sc[n.As] = d
		}
	}
	i.scope = sc
	return nil
}

func (c *Contract) resolveIface(i *Interface) error {
	for _, d := range i.Types {
		seen := map[string]bool{}
		for _, m := range append(append([]Member(nil), d.Fields...), d.Cases...) {
			if seen[m.Name] {
				return errAt(i.File, m.Pos, "%s has %s twice", d.Label(), m.Name)
			}
			seen[m.Name] = true
			if err := c.resolveType(i, m.Type); err != nil {
				return err
			}
		}
		if d.Kind == KindFlags && len(d.Cases) > 32 {
			return errAt(i.File, d.Pos, "%s has %d labels, over the 32 the host's descriptors take", d.Label(), len(d.Cases))
		}
		if err := c.resolveType(i, d.Alias); err != nil {
			return err
		}
		for _, f := range d.Funcs {
			if err := c.resolveFunc(i, f); err != nil {
				return err
			}
		}
	}
	names := map[string]bool{}
	for _, f := range i.Funcs {
		if names[f.Name] {
			return errAt(i.File, f.Pos, "function %s is defined twice in interface %s", f.Name, i.ID())
		}
		names[f.Name] = true
		if err := c.resolveFunc(i, f); err != nil {
			return err
		}
	}
	return nil
}

func (c *Contract) resolveFunc(i *Interface, f *Func) error {
	for _, p := range f.Params {
		if err := c.resolveType(i, p.Type); err != nil {
			return err
		}
	}
	return c.resolveType(i, f.Result)
}

func (c *Contract) resolveType(i *Interface, t *Type) error {
	if t == nil {
		return nil
	}
	for _, a := range t.Args {
		if err := c.resolveType(i, a); err != nil {
			return err
		}
	}
	switch t.Name {
	case "list", "option", "result", "tuple":
		return nil
	case "own", "borrow":
		if d := t.Args[0].Def; d == nil || d.Kind != KindResource {
			return errAt(i.File, t.Pos, "%s<%s>: %s is not a resource", t.Name, t.Args[0].Name, t.Args[0].Name)
		}
		return nil
	}
	if primitives[t.Name] {
		return nil
	}
	d := i.scope[t.Name]
	if d == nil {
		return errAt(i.File, t.Pos, "type %s is neither defined in interface %s nor brought in by a use", t.Name, i.ID())
	}
	t.Def = d
	return nil
}

// GoName maps a WIT kebab-case name to Go's CamelCase: each word capitalised, the
// initialisms Go spells in capitals wholly upper case ("log-path" -> "LogPath",
// "session-id" -> "SessionID", "duration-ms" -> "DurationMS").
func GoName(kebab string) string {
	var b strings.Builder
	for _, w := range strings.Split(kebab, "-") {
		if initialisms[strings.ToLower(w)] {
			b.WriteString(strings.ToUpper(w))
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// initialisms are the words Go writes in capitals: golint's list, plus ms (DurationMS),
// which the SDK writes so.
var initialisms = map[string]bool{
	"acl": true, "api": true, "ascii": true, "cpu": true, "css": true, "dns": true, "eof": true,
	"guid": true, "html": true, "http": true, "https": true, "id": true, "io": true, "ip": true,
	"json": true, "ms": true, "qps": true, "ram": true, "rpc": true, "sla": true, "smtp": true,
	"sql": true, "ssh": true, "tcp": true, "tls": true, "ttl": true, "udp": true, "ui": true,
	"uid": true, "uri": true, "url": true, "utf8": true, "uuid": true, "vm": true, "xml": true,
}
