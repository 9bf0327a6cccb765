package registry

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
)

// EnvDir is the environment variable naming the registry folder when the config or the
// command line names none.
const EnvDir = "CAPSULE_REGISTRY"

// LocalDir is the one rule that chooses the registry folder, for the gateway's capsule
// app and the `caddy capsule` commands alike (docs/rationale.md): configured (the app's
// registry option, a command's --registry), else $CAPSULE_REGISTRY, else
// <dataDir>/capsule/registry, dataDir being Caddy's data folder. A registry named by a
// URL (anything holding "://") is refused.
func LocalDir(configured string, getenv func(string) string, dataDir string) (string, error) {
	dir := configured
	if dir == "" {
		dir = getenv(EnvDir)
	}
	if dir == "" {
		dir = filepath.Join(dataDir, "capsule", "registry")
	}
	if strings.Contains(dir, "://") {
		return "", errs.New(CodeRemote, "registry", fmt.Sprintf("registry %q is remote; this release serves local-directory registries only", dir),
			"mirror the artifacts into a local folder and name it with --registry, $CAPSULE_REGISTRY or the capsule app's registry option")
	}
	return dir, nil
}
