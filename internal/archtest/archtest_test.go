package archtest

import (
	"os/exec"
	"strings"
	"testing"
)

const module = Module

func TestOnlyCaddyGlueImportsCaddy(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Deps \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// The module's root package exists only so `xcaddy --with` can plug caddymodule in.
	allowed := map[string]bool{module + "/cmd/caddy": true, module: true}
	glue := func(pkg string) bool {
		return pkg == module+"/caddymodule" || strings.HasPrefix(pkg, module+"/caddymodule/")
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := fields[0]
		if !strings.HasPrefix(pkg, module) || allowed[pkg] || glue(pkg) {
			continue
		}
		checked++
		for _, dep := range fields[1:] {
			if strings.HasPrefix(dep, "github.com/caddyserver/") || glue(dep) {
				t.Errorf("%s depends on %s; only caddymodule/... and cmd/caddy may", pkg, dep)
			}
		}
	}
	if checked < 5 {
		t.Fatalf("checked only %d packages; is go list output as expected?", checked)
	}
}
