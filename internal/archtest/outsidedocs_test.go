package archtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// outsideDocRE matches a citation of a document that is not in the repository: the brief
// the code was first written from (the brief and its section numbers, its architecture
// page), and a
// bare "(§6.4)", which only ever meant the brief's sections. Case-sensitive, on word
// boundaries: "spec", "SPECIAL" and "SPEC_X" are not citations; neither is "RFC 9110 §7".
// The contract is cited as docs/reference/<page>.md "<Heading>" (reference_test.go).
// The names, spelt in pieces so that this file cites nothing itself.
const (
	spec = "SP" + "EC"
	arch = "ARCHI" + "TECTURE"
)

var outsideDocRE = regexp.MustCompile(`\bSPEC\b|\bARCHITECTURE\b|\(§\d`)

// outsideDocAllowed are files that may mention those names: this file, whose matcher
// and its tests must spell them.
var outsideDocAllowed = map[string]bool{
	"internal/archtest/outsidedocs_test.go": true,
}

// outsideDocMentions returns "line: text" for every match of outsideDocRE in src.
func outsideDocMentions(src []byte) []string {
	var out []string
	for i, line := range strings.Split(string(src), "\n") {
		for _, m := range outsideDocRE.FindAllString(line, -1) {
			out = append(out, fmt.Sprintf("%d: %s", i+1, m))
		}
	}
	return out
}

// outsideDocScanned reports whether the repository file name is checked: Go and
// markdown files outside vendor, node_modules and testdata folders.
func outsideDocScanned(name string) bool {
	if !strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, ".md") {
		return false
	}
	for _, dir := range strings.Split(name, "/")[:strings.Count(name, "/")] {
		if dir == "vendor" || dir == "node_modules" || dir == "testdata" {
			return false
		}
	}
	return !outsideDocAllowed[name]
}

// TestNoOutsideDocCitations checks that no Go or markdown file cites a document the
// repository does not hold; cite docs/ instead.
func TestNoOutsideDocCitations(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", "--", "*.go", "*.md").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	scanned := 0
	for _, name := range strings.Fields(string(out)) {
		if !outsideDocScanned(name) {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		scanned++
		for _, m := range outsideDocMentions(src) {
			t.Errorf("%s:%s: cites a document outside the repository; cite docs/ instead", name, m)
		}
	}
	if scanned < 50 {
		t.Fatalf("scanned only %d files; is the listing broken?", scanned)
	}
}

func TestOutsideDocMatcher(t *testing.T) {
	tests := []struct {
		src  string
		want []string
	}{
		{"// Limits (" + spec + " §6.4).", []string{"1: SPEC"}},
		{"// (" + spec + "\n// §5.4)", []string{"1: SPEC"}},
		{"The contract is `" + spec + ".md`.", []string{"1: SPEC"}},
		{"Decisions the SPEC leaves open; not SPEC's -c", []string{"1: SPEC", "1: SPEC"}},
		{"choice — " + arch + " keeps it; see " + arch + ".md", []string{"1: ARCHITECTURE", "1: ARCHITECTURE"}},
		{"native tools (§6.3) are confined", []string{"1: (§6"}},
		{"a\nb " + spec + " §2", []string{"2: SPEC"}},
		// Not citations of an outside document.
		{"// (RFC 9110 §7.6.1) and A2A §3.6", nil},
		{"spec, Spec, SPECIAL, SPECS, SPEC_VERSION, xSPEC, TestSPECx", nil},
		{"docs/architecture.md \"Packages\", the architecture", nil},
		{`docs/reference/manifest.md "Lifecycle"`, nil},
	}
	for _, tc := range tests {
		got := outsideDocMentions([]byte(tc.src))
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("outsideDocMentions(%q) = %q, want %q", tc.src, got, tc.want)
		}
	}

	files := map[string]bool{
		"a2a/a2a.go":        true,
		"docs/operators.md": true,
		"README.md":         true,
		"go.mod":            false,
		"Caddyfile.example": false,
		"vendor/x/y.go":     false,
		"a2a/testdata/jsclient/node_modules/a/README.md": false,
		"runtime/wasm/testdata/x.go":                     false,
		"internal/archtest/outsidedocs_test.go":          false,
		"internal/archtest/reference_test.go":            true,
		"testdatax/a.go":                                 true,
	}
	for name, want := range files {
		if got := outsideDocScanned(name); got != want {
			t.Errorf("outsideDocScanned(%q) = %v, want %v", name, got, want)
		}
	}
}
