package escape

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated table of docs/escapes.md from the suite")

// pageMarks bound the part of docs/escapes.md generated from the table.
const (
	pageStart = "<!-- escape-table: generated from the suite's table; `go test ./internal/testkit/escape -run TestEscapePage -update` rewrites it -->"
	pageEnd   = "<!-- /escape-table -->"
)

// pageTable is the generated part of docs/escapes.md: per surface, its rows, how many
// attack a running capsule and how many hold a parser to a rule, and how many need the
// sealed tier or cgroup limits to run.
func pageTable(rows []row) string {
	type count struct{ rows, attacks, checks, sealed, cgroups int }
	by := map[Surface]*count{}
	var total count
	for _, r := range rows {
		c := by[r.surface]
		if c == nil {
			c = &count{}
			by[r.surface] = c
		}
		for _, k := range []*count{c, &total} {
			k.rows++
			if r.check {
				k.checks++
			} else {
				k.attacks++
			}
			switch r.need {
			case needSealed:
				k.sealed++
			case needHarness:
				k.cgroups++
			}
		}
	}
	var b strings.Builder
	b.WriteString(pageStart + "\n\n| surface | rows | attacks | parser checks | need the sealed tier | need sealed + cgroups |\n|---|---|---|---|---|---|\n")
	for _, sf := range Surfaces {
		c := by[sf]
		if c == nil {
			c = &count{}
		}
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d |\n", sf, c.rows, c.attacks, c.checks, c.sealed, c.cgroups)
	}
	fmt.Fprintf(&b, "| all | **%d** | %d | %d | %d | %d |\n\n", total.rows, total.attacks, total.checks, total.sealed, total.cgroups)
	b.WriteString("Each detector a row relies on is shown able to fire by a control, a subtest of `TestEscapeDetectorsFire` (the file sentinels, `leaked` and the process and tree checks by `TestEscapeDetectors`):\n\n| detector | notices | control |\n|---|---|---|\n")
	for _, d := range detectors {
		fmt.Fprintf(&b, "| %s | %s | `TestEscapeDetectorsFire/%s` |\n", d.name, d.notices, strings.ReplaceAll(d.name, " ", "_"))
	}
	b.WriteString("\n" + pageEnd)
	return b.String()
}

// TestEscapePage holds docs/escapes.md's generated table to the suite's: it fails when
// a row is added, removed or relabelled and the page was not rewritten (-update).
func TestEscapePage(t *testing.T) {
	path := filepath.Join("..", "..", "..", "docs", "escapes.md")
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i, j := strings.Index(string(page), pageStart), strings.Index(string(page), pageEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/escapes.md has no generated table between %q and %q", pageStart, pageEnd)
	}
	want := pageTable(table())
	got := string(page[i : j+len(pageEnd)])
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(path, []byte(string(page[:i])+want+string(page[j+len(pageEnd):])), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/escapes.md's generated table differs from the suite's; rewrite it with -update:\n%s", want)
}
