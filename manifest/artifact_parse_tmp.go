package manifest

import (
	"github.com/capsulegate/capsulegate/internal/errs"
	"go.yaml.in/yaml/v3"
)

// ParseArtifactManifest decodes and validates an artifact's murmur.yaml; file names it in
// errors. It returns warnings (unknown keys) beside the manifest.
// TEMPORARY body: replaced by the strict decoder.
func ParseArtifactManifest(data []byte, file string) (*ArtifactManifest, []*errs.Error, error) {
	var a ArtifactManifest
	if err := yaml.Unmarshal(data, &a); err != nil {
		return nil, nil, errs.Wrap(err, "E-MAN-001", "manifest", "cannot parse "+file, "fix the YAML")
	}
	if a.Runtime == "" {
		a.Runtime = RoleTool
	}
	return &a, nil, nil
}
