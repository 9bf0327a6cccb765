package manifest

import (
	"cmp"
	"fmt"
	"reflect"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
)

// Role is what an artifact is for (docs/reference/manifest.md "Artifacts").
type Role string

// The artifact roles.
const (
	RoleTool   Role = "tool"
	RoleDriver Role = "driver"
	RoleHook   Role = "hook"
	RoleSkill  Role = "skill"
)

// Implementation kinds of an artifact's payload.
const (
	ImplWasm   = "wasm"
	ImplNative = "native"
)

// ArtifactManifest is the murmur.yaml at the root of a .mur.zip
// (docs/reference/manifest.md "The artifact manifest").
type ArtifactManifest struct {
	Name           string         `yaml:"name" required:"true"`
	Version        string         `yaml:"version" required:"true"`
	Runtime        Role           `yaml:"runtime"`
	Implementation string         `yaml:"implementation"`
	Description    string         `yaml:"description"`
	Tags           []string       `yaml:"tags"`
	InputSchema    map[string]any `yaml:"input_schema"`
	OutputSchema   map[string]any `yaml:"output_schema"`
	// UpstreamAuth is how a driver's provider expects the gateway key; nil means
	// "Authorization: Bearer {key}".
	UpstreamAuth *UpstreamAuth `yaml:"upstream_auth"`

	// Binding is the one event a hook answers; "" answers every session event.
	Binding string `yaml:"binding"`
	// ExecutionMode is blocking or async; set to blocking for a hook that names none.
	ExecutionMode string `yaml:"execution_mode"`
	// CommitPolicy is which answer of the hook the host honours; none when unwritten.
	CommitPolicy string `yaml:"commit_policy"`
	// OnOverflow is what an async hook's full queue does to a new event: drop or block.
	OnOverflow string `yaml:"on_overflow"`
}

// UpstreamAuth names the header a driver's provider reads its key from and the header's
// value, in which {key} stands for the key (docs/reference/manifest.md "The artifact
// manifest").
type UpstreamAuth struct {
	Header string `yaml:"header" required:"true"`
	Value  string `yaml:"value" required:"true"`
}

// DefaultUpstreamAuth is the key's header for a driver that names none.
var DefaultUpstreamAuth = UpstreamAuth{Header: "Authorization", Value: "Bearer {key}"}

// Headers returns the request headers that carry key.
func (u UpstreamAuth) Headers(key string) [][2]string {
	return [][2]string{{u.Header, strings.ReplaceAll(u.Value, "{key}", key)}}
}

// ParseArtifactManifest decodes and validates an artifact's own murmur.yaml (the one at
// the root of a .mur.zip); file names it in errors. Warnings (unknown keys) are returned
// beside the manifest. Artifact manifests are never interpolated: ${…} stays literal,
// because the packager's environment is not the gateway's.
func ParseArtifactManifest(data []byte, file string) (*ArtifactManifest, []*errs.Error, error) {
	if len(data) > MaxFileSize {
		return nil, nil, errs.New(CodeTooLarge, "manifest", fmt.Sprintf("%s is %d bytes, over the %d-byte limit", file, len(data), MaxFileSize), "keep the artifact manifest small")
	}
	d := newDecoder(file, nil)
	d.literal = true
	root := d.parseYAML(data)
	if root == nil {
		return nil, nil, d.errs
	}
	a := &ArtifactManifest{}
	d.decode(root, reflect.ValueOf(a).Elem(), "")
	if len(d.errs) == 0 {
		v := validator{d: d, root: root}
		if !ValidName(a.Name) {
			v.fail("name", CodeName, fmt.Sprintf("artifact name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", a.Name),
				"use lowercase letters, digits and '-', e.g. "+suggestName(a.Name))
		}
		if why := CheckVersion(a.Version); why != "" {
			code := CodeVersion
			if reservedVersions[a.Version] {
				code = CodeReservedVersion
			}
			v.fail("version", code, fmt.Sprintf("version %q is not usable: %s", a.Version, why), "give a concrete version such as 1.0.0")
		}
		v.enum("runtime", "artifact.runtime", string(a.Runtime))
		v.enum("implementation", "artifact.implementation", a.Implementation)
		if a.Implementation == ImplNative && a.Runtime != "" && a.Runtime != RoleTool {
			v.fail("implementation", CodeEnum, fmt.Sprintf("runtime %q cannot be native: only tools may ship native binaries", a.Runtime), "set implementation: wasm, or runtime: tool")
		}
		if a.Implementation != "" && a.Runtime == RoleSkill {
			v.fail("implementation", CodeEnum, "a skill has no implementation: its payload is skill.md", "remove implementation")
		}
		v.hookKeys(a)
		if u := a.UpstreamAuth; u != nil {
			switch {
			case a.Runtime != RoleDriver:
				v.fail("upstream_auth", CodeUpstreamAuth, "upstream_auth is for drivers: only a driver's requests carry a gateway key", "remove upstream_auth, or set runtime: driver")
			case !httpToken(u.Header):
				v.fail("upstream_auth.header", CodeUpstreamAuth, fmt.Sprintf("header %q is not an HTTP header name", u.Header), "write a header name such as x-api-key or Authorization")
			case strings.Count(u.Value, "{key}") != 1 || strings.ContainsAny(u.Value, "\r\n"):
				v.fail("upstream_auth.value", CodeUpstreamAuth, fmt.Sprintf("value %q must hold {key} exactly once, on one line", u.Value), `write the header's value with {key} where the key goes, such as "Bearer {key}" or "{key}"`)
			}
		}
	}
	if len(d.errs) > 0 {
		return nil, nil, d.errs
	}
	if a.Runtime == "" {
		a.Runtime = RoleTool
	}
	if a.Implementation == "" && a.Runtime != RoleSkill {
		a.Implementation = ImplWasm
	}
	if a.Runtime == RoleHook {
		a.ExecutionMode = cmp.Or(a.ExecutionMode, ModeBlocking)
		a.CommitPolicy = cmp.Or(a.CommitPolicy, CommitNone)
		if a.ExecutionMode == ModeAsync {
			a.OnOverflow = cmp.Or(a.OnOverflow, OverflowDrop)
		}
	}
	return a, d.warns, nil
}

// httpToken reports whether s is an RFC 9110 token (a header field name).
func httpToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > 0x7e || c <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			return false
		}
	}
	return true
}
