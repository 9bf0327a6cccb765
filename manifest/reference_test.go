package manifest

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// referencePage is the contract page that documents every manifest key.
const referencePage = "../docs/reference/manifest.md"

// Header cells of the key tables in the reference page: "key" tables document the
// capsule manifest (Manifest), "artifact key" tables the artifact manifest
// (ArtifactManifest).
const (
	capsuleKeyHeader  = "key"
	artifactKeyHeader = "artifact key"
)

// TestReferenceDocumentsEveryKey keeps docs/reference/manifest.md and the parser in step,
// both ways: every key path the decoder accepts is a row of the page's key tables, and
// every row names a key the decoder accepts.
func TestReferenceDocumentsEveryKey(t *testing.T) {
	page, err := os.ReadFile(referencePage)
	if err != nil {
		t.Fatal(err)
	}
	documented, problems := docKeys(string(page))
	for _, p := range problems {
		t.Error(p)
	}
	for _, c := range []struct {
		header   string
		typ      reflect.Type
		accepted []string
	}{
		{capsuleKeyHeader, reflect.TypeFor[Manifest](), KeyPaths()},
		{artifactKeyHeader, reflect.TypeFor[ArtifactManifest](), ArtifactKeyPaths()},
	} {
		accepted := c.accepted
		if len(accepted) < 5 {
			t.Fatalf("%s: found only %d key paths; is the walk broken?", c.typ, len(accepted))
		}
		undocumented, unknown := compareKeys(accepted, documented[c.header])
		for _, k := range undocumented {
			t.Errorf("%s accepts key %q, but no %q table of %s lists it", c.typ, k, c.header, referencePage)
		}
		for _, k := range unknown {
			t.Errorf("%s documents key %q in a %q table, but %s does not accept it", referencePage, k, c.header, c.typ)
		}
	}
}

// keyCellRE is the first cell of a key table row: one backticked key path.
var keyCellRE = regexp.MustCompile("^`([a-z0-9_*\\[\\].]+)`$")

// docKeys reads the key tables of a markdown page: tables whose first header cell is
// capsuleKeyHeader or artifactKeyHeader. It returns the keys of each kind and the
// problems found (a row that is not one backticked key, a key listed twice).
func docKeys(md string) (map[string][]string, []string) {
	keys := map[string][]string{}
	var problems []string
	header := "" // the kind of the table being read; "" outside key tables
	inTable := false
	for i, line := range strings.Split(md, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			header, inTable = "", false
			continue
		}
		cells := splitRow(line)
		if !inTable { // the header row
			inTable = true
			if first := strings.TrimSpace(cells[0]); first == capsuleKeyHeader || first == artifactKeyHeader {
				header = first
			}
			continue
		}
		if header == "" || strings.Trim(line, "|-: ") == "" { // another table, or the separator
			continue
		}
		m := keyCellRE.FindStringSubmatch(strings.TrimSpace(cells[0]))
		if m == nil {
			problems = append(problems, "line "+strconv.Itoa(i+1)+": the first cell of a key table row must be one backticked key path, got "+cells[0])
			continue
		}
		if slices.Contains(keys[header], m[1]) {
			problems = append(problems, "line "+strconv.Itoa(i+1)+": key "+m[1]+" is listed twice")
			continue
		}
		keys[header] = append(keys[header], m[1])
	}
	return keys, problems
}

// splitRow splits a table row into cells; `\|` inside a cell is not a separator.
func splitRow(line string) []string {
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	var cells []string
	var b strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			b.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, b.String())
			b.Reset()
		default:
			b.WriteByte(line[i])
		}
	}
	return append(cells, b.String())
}

// compareKeys returns the accepted keys not documented and the documented keys not
// accepted, each sorted.
func compareKeys(accepted, documented []string) (undocumented, unknown []string) {
	for _, k := range accepted {
		if !slices.Contains(documented, k) {
			undocumented = append(undocumented, k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(accepted, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(undocumented)
	slices.Sort(unknown)
	return undocumented, unknown
}

// The checker on synthetic input: a key added to a struct but not documented, and a key
// documented but not accepted, are both reported.
func TestReferenceKeyCheck(t *testing.T) {
	type inner struct {
		Allow []string `yaml:"allow"`
	}
	type item struct {
		Name string `yaml:"name" required:"true"`
		Sub  *inner `yaml:"sub"`
	}
	type doc struct {
		Name    string           `yaml:"name"`
		Items   []item           `yaml:"items"`
		ByName  map[string]inner `yaml:"by_name"`
		Config  map[string]any   `yaml:"config"`
		Skipped string           `yaml:"-"`
		Hidden  string
	}
	accepted := []string{"by_name", "by_name.*.allow", "config", "items", "items[].name", "items[].sub", "items[].sub.allow", "name"}
	if got := keyPaths(reflect.TypeFor[doc]()); !slices.Equal(got, accepted) {
		t.Fatalf("keyPaths = %v, want %v", got, accepted)
	}
	table := func(rows ...string) string {
		return "# Page\n\n| key | type |\n|---|---|\n" + strings.Join(rows, "\n") + "\n\nText.\n"
	}
	complete := []string{"| `name` | string |", "| `items` | list |", "| `items[].name` | string |", "| `items[].sub` | mapping |",
		"| `items[].sub.allow` | list |", "| `by_name` | mapping |", "| `by_name.*.allow` | list |", "| `config` | free-form |"}
	tests := []struct {
		name                  string
		md                    string
		undocumented, unknown []string
		problems              int
	}{
		{name: "complete", md: table(complete...)},
		{name: "a key not documented", md: table(complete[1:]...), undocumented: []string{"name"}},
		{name: "a documented key not accepted", md: table(append(complete, "| `items[].version` | string |")...), unknown: []string{"items[].version"}},
		{name: "a renamed key", md: table(append(complete[1:], "| `title` | string |")...), undocumented: []string{"name"}, unknown: []string{"title"}},
		{name: "other tables do not count", md: table(complete...) + "\n| value | default |\n|---|---|\n| `extra` | 1 |\n"},
		{name: "a row without a key", md: table(append(complete, "| extra | string |")...), problems: 1},
		{name: "a key twice", md: table(append(complete, complete[0])...), problems: 1},
		{name: "an escaped pipe stays in its cell", md: table(append(complete[:len(complete)-1], "| `config` | a \\| b |")...)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			keys, problems := docKeys(tc.md)
			if len(problems) != tc.problems {
				t.Errorf("problems = %q, want %d", problems, tc.problems)
			}
			undocumented, unknown := compareKeys(accepted, keys[capsuleKeyHeader])
			if !slices.Equal(undocumented, tc.undocumented) || !slices.Equal(unknown, tc.unknown) {
				t.Errorf("undocumented %v, unknown %v; want %v, %v", undocumented, unknown, tc.undocumented, tc.unknown)
			}
		})
	}
}
