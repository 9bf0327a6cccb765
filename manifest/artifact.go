package manifest

// Role is what an artifact is for (SPEC §2.2).
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

// ArtifactManifest is the murmur.yaml at the root of a .mur.zip (SPEC §3.1).
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
