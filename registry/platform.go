package registry

import "runtime"

// The platforms native artifacts are built for (docs/reference/archive.md "Platforms").
const (
	PlatformLinuxX86_64   = "linux-x86_64"
	PlatformLinuxAarch64  = "linux-aarch64"
	PlatformDarwinX86_64  = "darwin-x86_64"
	PlatformDarwinAarch64 = "darwin-aarch64"
)

// Platforms returns every supported platform, in a fixed order.
func Platforms() []string {
	return []string{PlatformLinuxX86_64, PlatformLinuxAarch64, PlatformDarwinX86_64, PlatformDarwinAarch64}
}

// ValidPlatform reports whether p is one of Platforms.
func ValidPlatform(p string) bool {
	switch p {
	case PlatformLinuxX86_64, PlatformLinuxAarch64, PlatformDarwinX86_64, PlatformDarwinAarch64:
		return true
	}
	return false
}

// HostPlatform names the platform this binary runs on, e.g. "linux-x86_64". On a host
// that is not a supported platform it still answers "<os>-<arch>" (so messages can name
// it); ValidPlatform(HostPlatform()) tells whether native artifacts can run here.
func HostPlatform() string { return platformOf(runtime.GOOS, runtime.GOARCH) }

func platformOf(goos, goarch string) string {
	switch goarch {
	case "amd64":
		goarch = "x86_64"
	case "arm64":
		goarch = "aarch64"
	}
	return goos + "-" + goarch
}
