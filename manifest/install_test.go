package manifest

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// TestInstallPatternForms: the three forms of a capabilities.install entry are accepted,
// and everything else is refused, by ValidInstallPattern and by Parse (E-MAN-032, at the
// entry, quoting it and naming the accepted forms).
func TestInstallPatternForms(t *testing.T) {
	tests := []struct {
		entry string
		ok    bool
	}{
		// '*' alone.
		{"*", true},
		// '<prefix>*'.
		{"review-*", true},
		{"s*", true},
		{"style*", true},
		{"a-*", true},
		{"a--b*", true},
		{"0*", true},
		{strings.Repeat("a", 100) + "*", true},
		// An artifact name.
		{"wordcount", true},
		{"code-review", true},
		{"a", true},
		{"a-b-2", true},
		{strings.Repeat("a", 100), true},
		// Refused.
		{"", false},
		{" ", false},
		{"a*b", false},
		{"*x", false},
		{"**", false},
		{"a**", false},
		{"*a*", false},
		{"Foo", false},
		{"Foo*", false},
		{"-a", false},
		{"-a*", false},
		{"-*", false},
		{"a-", false},
		{"a/b", false},
		{"a/*", false},
		{"../*", false},
		{"github:owner/repo", false},
		{"a b", false},
		{"a b*", false},
		{"a:b", false},
		{"a_b", false},
		{"a.b*", false},
		{" a", false},
		{"a ", false},
		{"a\n", false},
		{"é*", false},
		{strings.Repeat("a", 101) + "*", false},
		{strings.Repeat("a", 101), false},
	}
	for _, tt := range tests {
		name := tt.entry
		if len(name) > 20 {
			name = name[:10] + "…" + name[len(name)-2:]
		}
		t.Run(name, func(t *testing.T) {
			if got := ValidInstallPattern(tt.entry); got != tt.ok {
				t.Errorf("ValidInstallPattern(%q) = %v, want %v", tt.entry, got, tt.ok)
			}
			for _, list := range []string{"tool", "skill"} {
				doc := base + "capabilities:\n  install:\n    " + list + ":\n      - wordcount\n      - " + strconv.Quote(tt.entry) + "\n"
				m, err := Parse([]byte(doc), "murmur.yaml", env(nil))
				if tt.ok {
					if err != nil {
						t.Fatalf("%s: refused: %v", list, err)
					}
					if got := m.Capabilities.Install.Patterns(Role(list)); len(got) != 2 || got[1] != tt.entry {
						t.Errorf("%s: decoded %q", list, got)
					}
					continue
				}
				var l errs.List
				if !errors.As(err, &l) || len(l) != 1 {
					t.Fatalf("%s: want one refusal, got %v", list, err)
				}
				e := l[0]
				path := "capabilities.install." + list + "[1]"
				if e.Code != CodeInstallPattern || e.Path != path || e.Pos != "murmur.yaml:7:9" {
					t.Errorf("%s: refusal = %s at %s %s, want %s at murmur.yaml:7:9 %s", list, e.Code, e.Pos, e.Path, CodeInstallPattern, path)
				}
				if !strings.Contains(e.Msg, strconv.Quote(tt.entry)) || !strings.Contains(e.Msg, installForms) || e.Fix == "" {
					t.Errorf("%s: message %q fix %q: want the entry quoted, the forms named and a fix", list, e.Msg, e.Fix)
				}
				if !strings.Contains(e.Error(), "murmur.yaml:7:9") || !strings.Contains(e.Error(), path) {
					t.Errorf("%s: %q lacks the position or the key path", list, e.Error())
				}
			}
		})
	}
}

// TestInstallPatternMatches: '*' covers every valid name, a prefix the names it begins,
// a name itself alone, and nothing covers a name that is not a valid artifact name.
func TestInstallPatternMatches(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "anything", true},
		{"*", "a", true},
		{"*", "../escape", false},
		{"*", "Upper", false},
		{"*", "", false},
		{"*", "a-", false},
		{"*", "-a", false},
		{"*", "a/b", false},
		{"*", strings.Repeat("a", 101), false},
		{"style-*", "style-rust", true},
		{"style-*", "style-", false},
		{"style-*", "stylist", false},
		{"style-*", "style", false},
		{"style*", "style", true},
		{"style*", "styles", true},
		{"style*", "stylist", false},
		{"style*", "Style", false},
		{"s*", "s", true},
		{"s*", "sa", true},
		{"s*", "a", false},
		{"code-review", "code-review", true},
		{"code-review", "code-review-2", false},
		{"code-review", "code", false},
		{"code-review", "Code-review", false},
		// An entry that is no valid pattern matches nothing.
		{"a*b", "a*b", false},
		{"a*b", "ab", false},
		{"**", "a", false},
		{"*x", "x", false},
		{"Foo*", "foo", false},
		{"-a*", "a", false},
		{"", "", false},
		{"", "a", false},
	}
	for _, tt := range tests {
		if got := InstallPatternMatches(tt.pattern, tt.name); got != tt.want {
			t.Errorf("InstallPatternMatches(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestInstallAllows: each list grants its own role only; drivers and hooks are never
// granted; an absent or empty block grants nothing.
func TestInstallAllows(t *testing.T) {
	m, err := Parse([]byte(base+"capabilities:\n  install:\n    tool: [wordcount, \"text-*\"]\n    skill: [\"*\"]\n"), "murmur.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	empty, err := Parse([]byte(base+"capabilities:\n  install:\n    tool: []\n"), "murmur.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	absent, err := Parse([]byte(base), "murmur.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		m    *Manifest
		role Role
		name string
		want bool
	}{
		{m, RoleTool, "wordcount", true},
		{m, RoleTool, "text-stats", true},
		{m, RoleTool, "text", false},
		{m, RoleTool, "wordcount-2", false},
		{m, RoleTool, "style-rust", false},
		{m, RoleSkill, "style-rust", true},
		{m, RoleSkill, "wordcount", true},
		{m, RoleSkill, "../x", false},
		{m, RoleDriver, "wordcount", false},
		{m, RoleHook, "wordcount", false},
		{m, Role(""), "wordcount", false},
		{empty, RoleTool, "wordcount", false},
		{empty, RoleSkill, "wordcount", false},
		{absent, RoleTool, "wordcount", false},
		{absent, RoleSkill, "a", false},
		{nil, RoleTool, "wordcount", false},
	}
	for _, tt := range tests {
		if got := InstallAllows(tt.m, tt.role, tt.name); got != tt.want {
			t.Errorf("InstallAllows(%v, %s, %q) = %v, want %v", tt.m != nil, tt.role, tt.name, got, tt.want)
		}
		if tt.m != nil {
			if got := tt.m.Capabilities.Install.Allows(tt.role, tt.name); got != tt.want {
				t.Errorf("Allows(%s, %q) = %v, want %v", tt.role, tt.name, got, tt.want)
			}
		}
	}
	if got, want := m.Capabilities.Install.Describe(), "install tool: wordcount, text-*; install skill: *"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got, want := absent.Capabilities.Install.Describe(), "install tool: <none>; install skill: <none>"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if got, want := (Install{Tool: []string{"a", "text-*"}}).Describe(), "install tool: a, text-*; install skill: <none>"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	for _, d := range []string{m.Capabilities.Install.Describe(), absent.Capabilities.Install.Describe()} {
		if strings.Contains(d, "\n") {
			t.Errorf("Describe is not one line: %q", d)
		}
	}
	if len(m.Warnings) != 0 || len(empty.Warnings) != 0 {
		t.Errorf("install keys warned: %v %v", m.Warnings, empty.Warnings)
	}
}

// TestSuggestInstall: the fix offers a valid entry near the refused one, or none.
func TestSuggestInstall(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Foo", "foo"},
		{"Foo*", "foo*"},
		{"a**", "a*"},
		{"**", "*"},
		{"a b", "a-b"},
		{"a-", "a"},
		{"-a*", "a*"},
		{"github:owner/repo", "github-owner-repo"},
		{"", ""},
		{" ", ""},
	}
	for _, tt := range tests {
		got := suggestInstall(tt.in)
		if got != tt.want {
			t.Errorf("suggestInstall(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got != "" && !ValidInstallPattern(got) {
			t.Errorf("suggestInstall(%q) = %q, not a valid entry", tt.in, got)
		}
	}
}
