package archtest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/atomicfile"
)

var update = flag.Bool("update", false, "rewrite docs/architecture.md's generated package table and diagram")

var (
	graphOnce sync.Once
	graph     []Package
	graphErr  error
)

// moduleGraph lists the module's packages with go list, once per test binary.
func moduleGraph(t *testing.T) []Package {
	t.Helper()
	graphOnce.Do(func() {
		cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", Module+"/...")
		cmd.Dir = repoRoot(t)
		out, err := cmd.Output()
		if err != nil {
			graphErr = fmt.Errorf("go list: %w", err)
			return
		}
		dec := json.NewDecoder(bytes.NewReader(out))
		for dec.More() {
			var p struct {
				ImportPath                         string
				Imports, TestImports, XTestImports []string
			}
			if err := dec.Decode(&p); err != nil {
				graphErr = fmt.Errorf("go list output: %w", err)
				return
			}
			graph = append(graph, Package{
				Path:        rel(p.ImportPath),
				Imports:     ours(p.Imports),
				TestImports: ours(append(p.TestImports, p.XTestImports...)),
			})
		}
	})
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	if len(graph) < 30 {
		t.Fatalf("go list found %d packages: is its output as expected?", len(graph))
	}
	return graph
}

func rel(path string) string {
	if path == Module {
		return ""
	}
	return strings.TrimPrefix(path, Module+"/")
}

// ours keeps the module's own packages of paths, module-relative.
func ours(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == Module || strings.HasPrefix(p, Module+"/") {
			out = append(out, rel(p))
		}
	}
	return out
}

func TestLayerTable(t *testing.T) {
	for _, v := range Violations(moduleGraph(t)) {
		t.Error(v)
	}
}

// The checker on the real graph with imports planted, as a change would add them: each
// is reported by name, and nothing else is.
func TestViolationsReportPlantedImports(t *testing.T) {
	real := moduleGraph(t)
	plant := func(pkg string, f func(*Package)) []Package {
		out := slices.Clone(real)
		for i := range out {
			if out[i].Path == pkg {
				p := out[i]
				p.Imports, p.TestImports = slices.Clone(p.Imports), slices.Clone(p.TestImports)
				f(&p)
				out[i] = p
				return out
			}
		}
		t.Fatalf("no package %s", pkg)
		return nil
	}
	tests := []struct {
		name  string
		pkgs  []Package
		wants string
	}{
		{"a test file of the engine imports the runtime", plant("runtime/wasm", func(p *Package) { p.TestImports = append(p.TestImports, "runtime") }),
			"runtime/wasm (layer 3 core) imports in a test file runtime (layer 5 runtime): a lower layer may not use a higher one"},
		{"the manifest imports the registry", plant("manifest", func(p *Package) { p.Imports = append(p.Imports, "registry") }),
			"manifest (layer 3 core) imports registry (layer 4 hosts): a lower layer may not use a higher one"},
		{"the runtime's code imports a test kit", plant("runtime", func(p *Package) { p.Imports = append(p.Imports, "internal/testkit/guestbuild") }),
			"runtime imports the test kit internal/testkit/guestbuild: only tests and kits may"},
		{"a package no row names", append(slices.Clone(real), Package{Path: "newpkg"}),
			"package newpkg is in no row of the layer table (internal/archtest/layers.go): add one"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Violations(tc.pkgs)
			if !slices.Equal(got, []string{tc.wants}) {
				t.Errorf("got %q\nwant [%q]", got, tc.wants)
			}
		})
	}
	// A test kit's own imports and a test's import of a kit are allowed.
	ok := plant("internal/testkit/harnesstest", func(p *Package) { p.Imports = append(p.Imports, "caddymodule") })
	ok = append(ok, Package{Path: "registry", TestImports: []string{"internal/testkit/guestbuild"}})
	if got := Violations(ok); len(got) != 0 {
		t.Errorf("allowed imports reported: %q", got)
	}
}

// The page's generated part: between these markers, the package table and the import
// diagram, written by `go test ./internal/archtest -run TestArchitecturePage -update`.
const (
	pageFile  = "docs/architecture.md"
	beginMark = "<!-- archtest: generated from internal/archtest/layers.go and the import graph; `go test ./internal/archtest -run TestArchitecturePage -update` rewrites it -->"
	endMark   = "<!-- archtest: end -->"
)

// nodeID names a row in the mermaid diagram.
func nodeID(path string) string {
	if path == "" {
		return "root"
	}
	return strings.NewReplacer("/", "_", "-", "_", ".", "_").Replace(strings.TrimSuffix(path, "/..."))
}

// generated is the page's generated part for the table and these edges.
func generated(edges []string) string {
	var b strings.Builder
	b.WriteString(beginMark + "\n\n| layer | package | its one job |\n|---|---|---|\n")
	rows := slices.Clone(Table)
	slices.SortStableFunc(rows, func(a, b Row) int {
		la, lb := a.Layer, b.Layer
		if la == LayerKit {
			la = 99
		}
		if lb == LayerKit {
			lb = 99
		}
		if la != lb {
			return la - lb
		}
		return strings.Compare(a.Path, b.Path)
	})
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | `%s` | %s |\n", LayerNames[r.Layer], label(r.Path), r.Job)
	}
	b.WriteString("\nThe imports between them (helpers and test kits left out), user above used:\n\n```mermaid\nflowchart TD\n")
	for _, r := range rows {
		if inDiagram(r) {
			fmt.Fprintf(&b, "  %s[\"%s\"]\n", nodeID(r.Path), label(r.Path))
		}
	}
	for _, e := range edges {
		from, to, _ := strings.Cut(e, " ")
		fmt.Fprintf(&b, "  %s --> %s\n", nodeID(from), nodeID(to))
	}
	b.WriteString("```\n\n" + endMark)
	return b.String()
}

func label(path string) string {
	if path == "" {
		return Module
	}
	return path
}

var (
	nodeRE = regexp.MustCompile(`^\s*(\w+)\["([^"]*)"\]\s*$`)
	edgeRE = regexp.MustCompile(`^\s*(\w+)\s*-->\s*(\w+)\s*$`)
)

// diagramProblems compares the diagram in page with the edges the code has, both ways.
func diagramProblems(page string, edges []string) []string {
	labels := map[string]string{}
	var shown []string
	inBlock := false
	for _, line := range strings.Split(page, "\n") {
		switch {
		case strings.HasPrefix(line, "```mermaid"):
			inBlock = true
		case inBlock && strings.HasPrefix(line, "```"):
			inBlock = false
		case inBlock:
			if m := nodeRE.FindStringSubmatch(line); m != nil {
				labels[m[1]] = m[2]
			} else if m := edgeRE.FindStringSubmatch(line); m != nil {
				shown = append(shown, m[1]+" "+m[2])
			}
		}
	}
	name := func(id string) string {
		if l, ok := labels[id]; ok {
			return l
		}
		return id
	}
	have := map[string]bool{}
	for _, e := range edges {
		from, to, _ := strings.Cut(e, " ")
		have[nodeID(from)+" "+nodeID(to)] = true
	}
	var out []string
	drawn := map[string]bool{}
	for _, e := range shown {
		drawn[e] = true
		if !have[e] {
			from, to, _ := strings.Cut(e, " ")
			out = append(out, fmt.Sprintf("%s's diagram shows %s → %s, an import the code does not have", pageFile, name(from), name(to)))
		}
	}
	for _, e := range edges {
		from, to, _ := strings.Cut(e, " ")
		if !drawn[nodeID(from)+" "+nodeID(to)] {
			out = append(out, fmt.Sprintf("%s's diagram lacks %s → %s, an import the code has", pageFile, label(from), label(to)))
		}
	}
	slices.Sort(out)
	return out
}

func TestArchitecturePage(t *testing.T) {
	root := repoRoot(t)
	path := filepath.Join(root, pageFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	edges := Edges(moduleGraph(t))
	begin, end := strings.Index(page, beginMark), strings.Index(page, endMark)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no generated part (%q … %q)", pageFile, beginMark, endMark)
	}
	want := generated(edges)
	current := page[begin : end+len(endMark)]
	if *update {
		if current != want {
			if err := atomicfile.Write(path, []byte(page[:begin]+want+page[end+len(endMark):]), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	for _, p := range diagramProblems(current, edges) {
		t.Error(p)
	}
	if current != want {
		t.Errorf("%s's package table or diagram differs from internal/archtest/layers.go and the import graph: run `go test ./internal/archtest -run TestArchitecturePage -update` and review the diff", pageFile)
	}
}

// The diagram check on a page with one import left out and one the code lacks drawn in:
// both are reported by name.
func TestDiagramProblemsNamed(t *testing.T) {
	edges := []string{"caddymodule a2a", "caddymodule runtime", "runtime runtime/wasm"}
	page := generated([]string{"caddymodule a2a", "runtime runtime/wasm", "runtime/wasm runtime"})
	got := diagramProblems(page, edges)
	want := []string{
		pageFile + "'s diagram lacks caddymodule → runtime, an import the code has",
		pageFile + "'s diagram shows runtime/wasm → runtime, an import the code does not have",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	if got := diagramProblems(generated(edges), edges); len(got) != 0 {
		t.Errorf("a generated page has problems: %q", got)
	}
}

// never are imports the layers alone allow but the design forbids, checked through
// every dependency (go list -deps): the engine knows modules and calls, not Murmur's
// manifest or network rules; the A2A server and the sandbox know no runtime.
var never = []struct{ pkg, mustNot string }{
	{"runtime/wasm", "runtime"},
	{"runtime/wasm", "runtime/shell"},
	{"runtime/wasm", "registry"},
	{"runtime/wasm", "runtime/wasm/murmur"},
	{"runtime/wasm", "manifest"},
	{"runtime/wasm", "netpolicy"},
	{"a2a", "runtime"},
	{"a2a", "runtime/wasm"},
	{"runtime/shell", "runtime"},
}

// TestLayers pins the direction of the big dependencies through every dependency.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		set := map[string]bool{}
		for _, d := range fields[1:] {
			set[d] = true
		}
		deps[fields[0]] = set
	}
	for _, tc := range never {
		d, ok := deps[Module+"/"+tc.pkg]
		if !ok {
			t.Errorf("package %s not found by go list", tc.pkg)
			continue
		}
		if d[Module+"/"+tc.mustNot] {
			t.Errorf("%s depends on %s: the layers run the other way", tc.pkg, tc.mustNot)
		}
	}
	if !deps[Module+"/runtime"][Module+"/runtime/wasm"] {
		t.Error("runtime does not use runtime/wasm: is go list output as expected?")
	}
}

// declared is every name the module's Go code declares, outside tests and testdata, and
// Go's predeclared ones: top-level names bare and qualified by their package's name,
// methods and struct fields as Type.Name (and pkg.Type.Name), methods also bare.
func declared(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, n := range types.Universe.Names() {
		names[n] = true
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		add := func(n string) { names[n], names[pkg+"."+n] = true, true }
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil || len(d.Recv.List) == 0 {
					add(d.Name.Name)
					continue
				}
				add(recvName(d.Recv.List[0].Type) + "." + d.Name.Name)
				names[d.Name.Name] = true // a method named alone, where the page says whose
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						add(s.Name.Name)
						if st, ok := s.Type.(*ast.StructType); ok {
							for _, fld := range st.Fields.List {
								for _, n := range fld.Names {
									add(s.Name.Name + "." + n.Name)
								}
								if len(fld.Names) == 0 {
									add(s.Name.Name + "." + recvName(fld.Type))
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							add(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// recvName is the type name of a receiver or embedded field: T, *T, T[P], pkg.T.
func recvName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return recvName(e.X)
	case *ast.IndexExpr:
		return recvName(e.X)
	case *ast.IndexListExpr:
		return recvName(e.X)
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}

var (
	codeSpanRE = regexp.MustCompile("`([^`]+)`")
	goNameRE   = regexp.MustCompile(`[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*`)
)

// whereToAddProblems checks every code span of the page's "Where to add" section: a
// path (it has a slash or a file ending) must exist in the repository, and every Go name
// in any other span must be declared.
func whereToAddProblems(page string, exists func(path string) bool, names map[string]bool) (problems []string, checked int) {
	_, section, ok := strings.Cut(page, "\n## Where to add\n")
	if !ok {
		return []string{pageFile + " has no \"Where to add\" section"}, 0
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	for _, m := range codeSpanRE.FindAllStringSubmatch(section, -1) {
		span := m[1]
		if strings.Contains(span, "/") || strings.HasSuffix(span, ".go") || strings.HasSuffix(span, ".md") {
			checked++
			if p, _, _ := strings.Cut(span, "#"); !exists(strings.TrimSuffix(p, "/")) {
				problems = append(problems, fmt.Sprintf("%s \"Where to add\" names the path %s, which does not exist", pageFile, span))
			}
			continue
		}
		for _, n := range goNameRE.FindAllString(span, -1) {
			checked++
			if !names[n] {
				problems = append(problems, fmt.Sprintf("%s \"Where to add\" names %s (in `%s`), which the code does not declare", pageFile, n, span))
			}
		}
	}
	return problems, checked
}

func TestWhereToAddNamesExist(t *testing.T) {
	root := repoRoot(t)
	page, err := os.ReadFile(filepath.Join(root, pageFile))
	if err != nil {
		t.Fatal(err)
	}
	exists := func(p string) bool { _, err := os.Stat(filepath.Join(root, filepath.FromSlash(p))); return err == nil }
	problems, checked := whereToAddProblems(string(page), exists, declared(t, root))
	for _, p := range problems {
		t.Error(p)
	}
	if checked < 10 {
		t.Errorf("checked only %d names and paths in \"Where to add\": is the section as expected?", checked)
	}
}

// The name check on a synthetic section: a missing field, a missing file and an
// undeclared name are each reported; what exists is not.
func TestWhereToAddProblemsNamed(t *testing.T) {
	page := "# A\n\n## Where to add\n\n- `session.host` in `runtime/run.go`; `Event(*runtime.Event) error`; `gone/file.go`\n\n## Next\n\n`notchecked`\n"
	names := map[string]bool{"Event": true, "runtime.Event": true}
	exists := func(p string) bool { return p == "runtime/run.go" }
	got, checked := whereToAddProblems(page, exists, names)
	want := []string{
		pageFile + " \"Where to add\" names session.host (in `session.host`), which the code does not declare",
		pageFile + " \"Where to add\" names the path gone/file.go, which does not exist",
		pageFile + " \"Where to add\" names error (in `Event(*runtime.Event) error`), which the code does not declare",
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) || checked != 6 {
		t.Errorf("got %q (%d checked)\nwant %q", got, checked, want)
	}
}
