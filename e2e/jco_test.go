package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
)

// TestRunJcoComponentTool runs, through `caddy capsule run`, a script capsule invoking a
// tool that is a component made by the real `jco new --wasi-reactor` from one of our Go
// wasip1 tools (internal/testkit/testguests/benchtool, which uppercases its input): the capsule's
// out/result.txt holds the tool's answer.
func TestRunJcoComponentTool(t *testing.T) {
	comp := watbuild.Component(t, guestbuild.Wasm(t, "../internal/testkit/testguests/benchtool"),
		watbuild.RunOnlyWIT(t, "../wit/murmur-tool-0.1.0.wit", "tool-component"), "tool-component")
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	art := filepath.Join(tmp, "echo")
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: echo\nversion: 1.0.0\nruntime: tool\nimplementation: wasm\ndescription: benchtool as a jco component\n"), 0o644)
	os.WriteFile(filepath.Join(art, "echo.wasm"), comp, 0o644)
	zip := filepath.Join(tmp, "echo.mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	capDir := filepath.Join(tmp, "capsule")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte("name: jco-script\nversion: 0.0.1\nartifacts:\n  - name: echo\n    version: 1.0.0\n"), 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/script"), 0o644)
	r := capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", filepath.Join(tmp, "work"), "--json")
	var out struct{ Status, Workdir string }
	if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil {
		t.Fatalf("exit %d (%v)\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(filepath.Join(out.Workdir, "out", "result.txt"))
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("status %s: out/result.txt = %q (%v)", out.Status, got, err)
	}
	t.Logf("status %s, result %q (component of %d bytes)", out.Status, got, len(comp))
}
