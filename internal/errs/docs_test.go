package errs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var codeRE = regexp.MustCompile(`"((?:E|W)-[A-Z]+-\d{3})"`)

// TestEveryCodeIsDocumented keeps docs/errors.md and the code in step: every code a
// non-test Go file defines is listed there, and every code listed there exists.
func TestEveryCodeIsDocumented(t *testing.T) {
	root := "../.."
	inCode := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && p != root || d.Name() == "testdata" || d.Name() == "examples") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range codeRE.FindAllStringSubmatch(string(src), -1) {
			inCode[m[1]] = p
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	inDoc := map[string]bool{}
	for _, m := range regexp.MustCompile("`((?:E|W)-[A-Z]+-\\d{3})`").FindAllStringSubmatch(string(doc), -1) {
		inDoc[m[1]] = true
	}
	var missing, stale []string
	for c, p := range inCode {
		if !inDoc[c] {
			missing = append(missing, c+" ("+p+")")
		}
	}
	for c := range inDoc {
		if _, ok := inCode[c]; !ok {
			stale = append(stale, c)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("codes missing from docs/errors.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("docs/errors.md lists codes no code uses: %v", stale)
	}
	if len(inCode) < 10 {
		t.Errorf("found only %d codes; is the walk broken?", len(inCode))
	}
}
