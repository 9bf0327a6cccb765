package manifest

import (
	"testing"
)

// FuzzParse checks that no input panics the decoder and that whatever it accepts obeys
// the rules it claims to enforce.
func FuzzParse(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("name: a\nversion: 1\nartifacts: [{name: d, version: '1', runtime: driver}]\ninference: {driver: {artifact: d}, model: m}\n"))
	f.Add([]byte("name: a\nversion: ${X}\n"))
	f.Add([]byte("&a [*a]"))
	f.Add([]byte(base + "capabilities:\n  install:\n    tool: [wordcount, \"text-*\"]\n    skill: [\"*\"]\n"))
	f.Add([]byte(base + "capabilities:\n  install:\n    tool: [\"a*b\", \"**\", Foo*, -a*, a/b]\n    skill: []\n"))
	lookup := WithLookupEnv(func(k string) (string, bool) {
		if k == "X" {
			return "1.0", true
		}
		return "", false
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "f.yaml", lookup)
		if err != nil {
			return
		}
		if !ValidName(m.Name) || reservedVersions[m.Version] || m.Version == "" {
			t.Fatalf("accepted name %q version %q", m.Name, m.Version)
		}
		c := m.Capabilities
		if c.Limits.MemoryBytes <= 0 || c.Limits.DeadlineSeconds < 0 || c.Filesystem.Scope == "" {
			t.Fatalf("accepted limits %+v scope %q", c.Limits, c.Filesystem.Scope)
		}
		if containsDotDot(c.Filesystem.Scope) {
			t.Fatalf("accepted scope %q", c.Filesystem.Scope)
		}
		for _, name := range c.Env.Allow {
			if CredentialShaped(name, c.Shell.StripEnv) {
				t.Fatalf("accepted credential %q", name)
			}
		}
		if len(c.NetworkRules) != len(c.Network.Allow) {
			t.Fatalf("rules %d for %d entries", len(c.NetworkRules), len(c.Network.Allow))
		}
		for _, p := range append(append([]string{}, c.Install.Tool...), c.Install.Skill...) {
			if !ValidInstallPattern(p) {
				t.Fatalf("accepted install entry %q", p)
			}
		}
		if c.Install.Allows(RoleDriver, "a") || c.Install.Allows(RoleHook, "a") || c.Install.Allows(RoleTool, "../a") {
			t.Fatalf("install %s grants a driver, a hook or an invalid name", c.Install.Describe())
		}
		seen := map[string]bool{}
		for _, a := range m.Artifacts {
			if !ValidName(a.Name) || seen[a.Name] || (a.Source == "" && CheckVersion(a.Version) != "") {
				t.Fatalf("accepted artifact %+v", a)
			}
			seen[a.Name] = true
		}
		if inf := m.Inference; inf != nil {
			if d := m.Artifact(inf.Driver.Artifact); d == nil || d.Runtime != RoleDriver || inf.MaxTurns <= 0 || inf.MaxTokens <= 0 {
				t.Fatalf("accepted inference %+v", inf)
			}
		}
	})
}
