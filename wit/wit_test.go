package wit

import (
	"io/fs"
	"strings"
	"testing"
)

func TestFilesDeclareTheirPackage(t *testing.T) {
	want := map[string]string{
		"murmur-tool-0.1.0.wit":             "package murmur:tool@0.1.0;",
		"murmur-tool-0.2.0.wit":             "package murmur:tool@0.2.0;",
		"murmur-capsule-0.1.0.wit":          "package murmur:capsule@0.1.0;",
		"murmur-tool-registry-0.1.0.wit":    "package murmur:tool-registry@0.1.0;",
		"murmur-stream-0.1.0.wit":           "package murmur:stream@0.1.0;",
		"murmur-task-0.1.0.wit":             "package murmur:task@0.1.0;",
		"capsulegate-http-0.1.0.wit":        "package capsulegate:http@0.1.0;",
		"capsulegate-http-0.2.0.wit":        "package capsulegate:http@0.2.0;",
		"murmur-hook-0.9.0.wit":             "package murmur:hook@0.9.0;",
		"murmur-runtime-0.4.0.wit":          "package murmur:runtime@0.4.0;",
		"murmur-task-io-0.1.0.wit":          "package murmur:task-io@0.1.0;",
		"murmur-conversation-0.2.0.wit":     "package murmur:conversation@0.2.0;",
		"murmur-driver-process-0.6.0.wit":   "package murmur:driver@0.6.0;",
		"murmur-artifact-manager-0.1.0.wit": "package murmur:artifact-manager@0.1.0;",
		"murmur-message-0.1.0.wit":          "package murmur:message@0.1.0;",
	}
	names, err := fs.Glob(Files, "*.wit")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != len(want) {
		t.Errorf("embedded %v, want %d files", names, len(want))
	}
	for name, pkg := range want {
		b, err := fs.ReadFile(Files, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if first, _, _ := strings.Cut(string(b), "\n"); first != pkg {
			t.Errorf("%s starts %q, want %q", name, first, pkg)
		}
	}
	for name, world := range map[string]string{
		"murmur-tool-0.1.0.wit":           "world driver {",
		"murmur-tool-0.2.0.wit":           "world tool {",
		"murmur-capsule-0.1.0.wit":        "world script-capsule {",
		"murmur-runtime-0.4.0.wit":        "world hook {",
		"murmur-driver-process-0.6.0.wit": "world process-driver {",
	} {
		if b, _ := fs.ReadFile(Files, name); !strings.Contains(string(b), world) {
			t.Errorf("%s lacks %q", name, world)
		}
	}
}
