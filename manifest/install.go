package manifest

import (
	"fmt"
	"strings"
)

// installForms names the accepted forms of a capabilities.install entry, for messages.
const installForms = "an artifact name (lowercase letters, digits and inner '-'), a prefix ending in a single trailing '*' (e.g. 'style-*'), or '*' alone"

// maxInstallPrefix bounds the prefix of a '<prefix>*' entry, as ValidName bounds a name.
const maxInstallPrefix = 100

// ValidInstallPattern reports whether s is a capabilities.install entry
// (docs/reference/manifest.md "Install grants"): '*' alone, a prefix followed by one
// trailing '*', or an artifact name (ValidName).
func ValidInstallPattern(s string) bool { return installPatternProblem(s) == "" }

// installPatternProblem returns why s is not an install entry, or "" if it is one.
func installPatternProblem(s string) string {
	if s == "*" {
		return ""
	}
	prefix, star := strings.CutSuffix(s, "*")
	if !star {
		switch {
		case strings.TrimSpace(s) == "":
			return "it is empty or blank"
		case !ValidName(s):
			return "it is not an artifact name: [a-z0-9-], 1–100 characters, no leading or trailing '-'"
		}
		return ""
	}
	switch {
	case strings.Contains(prefix, "*"):
		return "'*' may appear only once, as the last character"
	case len(prefix) > maxInstallPrefix:
		return fmt.Sprintf("its prefix is %d characters, over %d", len(prefix), maxInstallPrefix)
	case prefix[0] == '-':
		return "its prefix begins with '-', which no artifact name does"
	}
	for i := 0; i < len(prefix); i++ {
		if c := prefix[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Sprintf("its prefix holds %q (allowed: lowercase letters, digits and '-')", c)
		}
	}
	return ""
}

// InstallPatternMatches reports whether the install entry pattern covers the artifact
// name: never when name is not a valid artifact name (ValidName) or pattern not a valid
// entry; '*' covers every name, '<prefix>*' the names beginning with prefix, any other
// entry the one name it spells.
func InstallPatternMatches(pattern, name string) bool {
	if !ValidName(name) || !ValidInstallPattern(pattern) {
		return false
	}
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return name == pattern
}

// Patterns returns the entries granted for role: Tool for tools, Skill for skills, none
// for any other role (drivers and hooks are never pulled at run time).
func (in Install) Patterns(role Role) []string {
	switch role {
	case RoleTool:
		return in.Tool
	case RoleSkill:
		return in.Skill
	}
	return nil
}

// Allows reports whether the block lets the capsule pull the artifact name of that role:
// an entry of the role's list matches it (InstallPatternMatches).
func (in Install) Allows(role Role, name string) bool {
	for _, p := range in.Patterns(role) {
		if InstallPatternMatches(p, name) {
			return true
		}
	}
	return false
}

// InstallAllows reports whether m's capabilities.install lets its capsule pull the
// artifact name of that role at run time; a nil manifest allows nothing.
func InstallAllows(m *Manifest, role Role, name string) bool {
	return m != nil && m.Capabilities.Install.Allows(role, name)
}

// Describe prints the block on one line, for logs and the effective grants:
// "install tool: wordcount, text-*; install skill: <none>".
func (in Install) Describe() string {
	list := func(ps []string) string {
		if len(ps) == 0 {
			return "<none>"
		}
		return strings.Join(ps, ", ")
	}
	return "install tool: " + list(in.Tool) + "; install skill: " + list(in.Skill)
}

// suggestInstall is a valid entry near s for a fix text, or "" when none is near.
func suggestInstall(s string) string {
	star := strings.Contains(s, "*")
	out := nameChars(s, maxInstallPrefix)
	switch {
	case out == "" && star:
		out = "*"
	case star:
		out += "*"
	}
	if out == s || !ValidInstallPattern(out) {
		return ""
	}
	return out
}
