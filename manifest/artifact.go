package manifest

import (
	"fmt"
	"reflect"

	"github.com/capsulegate/capsulegate/internal/errs"
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
	return a, d.warns, nil
}
