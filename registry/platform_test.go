package registry

import (
	"runtime"
	"testing"
)

func TestPlatforms(t *testing.T) {
	tests := []struct{ goos, goarch, want string }{
		{"linux", "amd64", "linux-x86_64"},
		{"linux", "arm64", "linux-aarch64"},
		{"darwin", "amd64", "darwin-x86_64"},
		{"darwin", "arm64", "darwin-aarch64"},
		{"windows", "amd64", "windows-x86_64"},
		{"linux", "riscv64", "linux-riscv64"},
	}
	for _, tt := range tests {
		if got := platformOf(tt.goos, tt.goarch); got != tt.want {
			t.Errorf("platformOf(%s, %s) = %s, want %s", tt.goos, tt.goarch, got, tt.want)
		}
	}
	for _, p := range Platforms() {
		if !ValidPlatform(p) {
			t.Errorf("ValidPlatform(%q) = false", p)
		}
	}
	for _, p := range []string{"", "linux", "linux-amd64", "Linux-x86_64", "windows-x86_64", "linux-x86_64 ", "darwin-arm64"} {
		if ValidPlatform(p) {
			t.Errorf("ValidPlatform(%q) = true", p)
		}
	}
	if HostPlatform() != platformOf(runtime.GOOS, runtime.GOARCH) {
		t.Errorf("HostPlatform() = %s", HostPlatform())
	}
	if (runtime.GOOS == "linux" || runtime.GOOS == "darwin") && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") && !ValidPlatform(HostPlatform()) {
		t.Errorf("host %s/%s maps to unsupported %s", runtime.GOOS, runtime.GOARCH, HostPlatform())
	}
}
