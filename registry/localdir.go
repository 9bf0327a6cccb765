package registry

import (
	"fmt"
	"path/filepath"

	"github.com/capsulegate/capsulegate/errs"
)

// EnvDir is the environment variable naming the registry (a folder or a URL) when the
// config or the command line names none.
const EnvDir = "CAPSULE_REGISTRY"

// Choose is the one rule that chooses the registry, for the gateway's capsule app and
// the `caddy capsule` commands alike (docs/rationale.md): configured (the app's registry
// option, a command's --registry), else $CAPSULE_REGISTRY, else the folder
// <dataDir>/capsule/registry, dataDir being Caddy's data folder. A URL is read by
// ParseSource.
func Choose(configured string, getenv func(string) string, dataDir string) (Source, error) {
	spec := configured
	if spec == "" {
		spec = getenv(EnvDir)
	}
	if spec == "" {
		spec = filepath.Join(dataDir, "capsule", "registry")
	}
	return ParseSource(spec)
}

// LocalDir is Choose for what only a folder can be (the folder a capsule_registry
// handler serves): a URL is refused with E-REG-080.
func LocalDir(configured string, getenv func(string) string, dataDir string) (string, error) {
	src, err := Choose(configured, getenv, dataDir)
	if err != nil {
		return "", err
	}
	if src.Remote() {
		return "", errs.New(CodeRemote, "registry", fmt.Sprintf("registry %q is remote; a folder is needed here", src.Spec),
			"name the registry folder with root, --registry or $CAPSULE_REGISTRY")
	}
	return src.Dir, nil
}
