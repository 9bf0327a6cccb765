package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayers pins the direction of the big dependencies (docs/architecture.md): the
// sessions use the engine, never the reverse; the engine knows modules and calls, not
// Murmur's host side (runtime/wasm/murmur) nor what it needs; the A2A server knows neither.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string]map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		set := map[string]bool{}
		for _, d := range fields[1:] {
			set[d] = true
		}
		deps[fields[0]] = set
	}
	for _, tc := range []struct{ pkg, mustNot string }{
		{"/runtime/wasm", "/runtime"},
		{"/runtime/wasm", "/runtime/shell"},
		{"/runtime/wasm", "/registry"},
		{"/runtime/wasm", "/runtime/wasm/murmur"},
		{"/runtime/wasm", "/manifest"},
		{"/runtime/wasm", "/netpolicy"},
		{"/a2a", "/runtime"},
		{"/a2a", "/runtime/wasm"},
		{"/runtime/shell", "/runtime"},
	} {
		d, ok := deps[module+tc.pkg]
		if !ok {
			t.Errorf("package %s not found by go list", tc.pkg)
			continue
		}
		if d[module+tc.mustNot] {
			t.Errorf("%s depends on %s: the layers run the other way", tc.pkg, tc.mustNot)
		}
	}
	if !deps[module+"/runtime"][module+"/runtime/wasm"] {
		t.Error("runtime does not use runtime/wasm: is go list output as expected?")
	}
}
