package manifest

import "strings"

// credentialNames are refused in env.allow and stripped from every guest and subprocess
// environment (docs/reference/manifest.md "Credential-shaped names").
var credentialNames = map[string]bool{
	"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GOOGLE_API_KEY": true,
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "NPM_TOKEN": true, "PYPI_TOKEN": true,
	"KUBECONFIG": true, "HUGGING_FACE_HUB_TOKEN": true,
}

// credentialGlobs are the credential-shaped patterns of docs/reference/manifest.md
// "Credential-shaped names".
var credentialGlobs = []string{"*_API_KEY", "*_TOKEN", "*_SECRET", "*_PASSWORD", "AWS_*"}

// CredentialShaped reports whether a variable name looks like a credential, by the fixed
// list (docs/reference/manifest.md "Credential-shaped names") plus the manifest's
// shell.strip_env globs.
func CredentialShaped(name string, extra []string) bool {
	if credentialNames[name] {
		return true
	}
	for _, g := range credentialGlobs {
		if globMatch(g, name) {
			return true
		}
	}
	for _, g := range extra {
		if globMatch(g, name) {
			return true
		}
	}
	return false
}

// globMatch matches name against a pattern with '*' only at the start and/or end.
func globMatch(pattern, name string) bool {
	pre := strings.HasPrefix(pattern, "*")
	suf := strings.HasSuffix(pattern, "*") && len(pattern) > 1
	core := strings.TrimSuffix(strings.TrimPrefix(pattern, "*"), "*")
	switch {
	case pre && suf:
		return strings.Contains(name, core)
	case pre:
		return strings.HasSuffix(name, core)
	case suf:
		return strings.HasPrefix(name, core)
	}
	return name == core
}

// validStripGlob reports whether g is a variable name with '*' only at its ends.
func validStripGlob(g string) bool {
	core := strings.TrimSuffix(strings.TrimPrefix(g, "*"), "*")
	if core == "" {
		return false
	}
	for i := 0; i < len(core); i++ {
		c := core[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// validEnvVar reports whether s is a portable environment variable name.
func validEnvVar(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
