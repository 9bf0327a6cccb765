package errs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// codeRE is every code family: E-MAN-001, W-SEC-002, E-A2A-007, …
var codeRE = regexp.MustCompile(`\b[EW]-[A-Z][A-Z0-9]*-[0-9]+\b`)

// TestEveryCodeIsDocumented keeps docs/errors.md and the code in step: every code a
// string literal of a non-test Go file holds is listed there, and every code listed there
// exists in the code, unless it is listed under "Retired codes" (which no code may use).
func TestEveryCodeIsDocumented(t *testing.T) {
	root := ".."
	inCode, err := codesInGo(root)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc, retired := codesInDoc(string(doc))
	var missing, stale, reused []string
	for c, p := range inCode {
		switch {
		case retired[c]:
			reused = append(reused, c+" ("+p+")")
		case !inDoc[c]:
			missing = append(missing, c+" ("+p+")")
		}
	}
	for c := range inDoc {
		if _, ok := inCode[c]; !ok {
			stale = append(stale, c)
		}
	}
	for _, l := range [][]string{missing, stale, reused} {
		sort.Strings(l)
	}
	if len(missing) > 0 {
		t.Errorf("codes missing from docs/errors.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("docs/errors.md lists codes no code uses (move them to \"Retired codes\"): %v", stale)
	}
	if len(reused) > 0 {
		t.Errorf("retired codes used again (a retired code is never reused): %v", reused)
	}
	for _, family := range []string{"E-MAN", "W-MAN", "E-CAP", "E-NET", "E-LOCK", "E-REG", "E-RUN", "E-A2A", "E-RPL", "E-SEC", "W-SEC", "E-STORE"} {
		found := false
		for c := range inCode {
			found = found || strings.HasPrefix(c, family+"-")
		}
		if !found {
			t.Errorf("no %s-… code found in the code; is the walk broken?", family)
		}
	}
}

// codesInGo returns each code held by a string literal of a non-test Go file under root,
// with one file that holds it.
func codesInGo(root string) (map[string]string, error) {
	inCode := map[string]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					s = lit.Value
				}
				for _, c := range codeRE.FindAllString(s, -1) {
					inCode[c] = p
				}
			}
			return true
		})
		return nil
	})
	return inCode, err
}

// codesInDoc returns the codes docs/errors.md lists (each in backquotes), those under
// its "Retired codes" heading apart.
func codesInDoc(doc string) (listed, retired map[string]bool) {
	listed, retired = map[string]bool{}, map[string]bool{}
	head, tail, _ := strings.Cut(doc, "\n## Retired codes")
	if i := strings.Index(tail, "\n## "); i >= 0 {
		head += tail[i:]
		tail = tail[:i]
	}
	quoted := regexp.MustCompile("`(" + codeRE.String() + ")`")
	for _, m := range quoted.FindAllStringSubmatch(head, -1) {
		listed[m[1]] = true
	}
	for _, m := range quoted.FindAllStringSubmatch(tail, -1) {
		retired[m[1]] = true
	}
	return listed, retired
}
