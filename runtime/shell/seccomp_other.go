//go:build linux && !amd64 && !arm64

package shell

// No system call table for this architecture: seccompAvailable reports false, so the
// sealed and scoped tiers are unavailable here.
const (
	auditArch = 0
	x32Bit    = 0
)

func archDenied() []uintptr { return nil }

func modeRules() []modeRule { return nil }
