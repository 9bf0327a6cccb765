package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/upstream"
)

// upstreamFixture returns the bytes of one of upstream's committed wasm fixtures
// (crates/murmur-cli/tests/fixtures/<rel>), from the mirror $MURMUR_MIRROR names,
// skipping t (and saying so) without one.
func upstreamFixture(t *testing.T, rel string) []byte {
	t.Helper()
	return upstream.Fixture(t, rel)
}

// TestUpstreamFixtures runs upstream Murmur's own script-capsule components through
// `caddy capsule run`, each with the expectations of upstream's tests (run.rs,
// limits.rs): the echo-tool component published as a wasm tool, the capsule component as
// the capsule's module, the capabilities upstream's test grants.
func TestUpstreamFixtures(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	art := filepath.Join(tmp, "echo-tool")
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: echo-tool\nversion: 0.1.0\nruntime: tool\nimplementation: wasm\ndescription: upstream Murmur's echo tool component\n"), 0o644)
	os.WriteFile(filepath.Join(art, "echo-tool.wasm"), upstreamFixture(t, "run/components/echo-tool.wasm"), 0o644)
	zipPath := filepath.Join(tmp, "echo-tool.mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zipPath}, {"publish", zipPath, "--registry", reg}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
	const tool = "artifacts:\n  - name: echo-tool\n    version: 0.1.0\n"
	for _, tt := range []struct {
		name, fixture, manifest string
		env                     []string
		wantCode                int
		result                  func(string) bool // out/result.txt
		output                  []string          // in stdout+stderr
	}{
		{name: "allowlisted tool call answers ok", fixture: "capsule-allowlisted", manifest: tool,
			result: func(s string) bool { return s == "ok" }},
		{name: "unlisted tool call returns the error to the capsule", fixture: "capsule-unlisted", manifest: tool,
			result: func(s string) bool { return s != "" && s != "ok" }},
		{name: "env allowlist", fixture: "capsule-env-echo", manifest: tool + "capabilities:\n  env:\n    allow:\n      - MURMUR_TEST_ALLOWED_VAR\n",
			env: []string{"MURMUR_TEST_ALLOWED_VAR=visible-value", "GITHUB_TOKEN=leaked-token"},
			result: func(s string) bool {
				return strings.Contains(s, "MURMUR_TEST_ALLOWED_VAR=present:visible-value") && strings.Contains(s, "GITHUB_TOKEN=absent")
			}},
		{name: "no env grant hides the host's", fixture: "capsule-env-echo", manifest: tool,
			env:    []string{"GITHUB_TOKEN=leaked-token"},
			result: func(s string) bool { return strings.Contains(s, "GITHUB_TOKEN=absent") }},
		{name: "network attempt denied", fixture: "capsule-network-attempt", manifest: tool + "capabilities:\n  network:\n    allow:\n      - https://allowed.example.com\n",
			result: func(s string) bool { return s == "denied" }},
		{name: "allowlisted host is not denied at handle time", fixture: "capsule-network-attempt", manifest: tool + "capabilities:\n  network:\n    allow:\n      - https://blocked.example.com\n",
			result: func(s string) bool { return s == "allowed" }},
		{name: "filesystem escape blocked", fixture: "capsule-filesystem-escape", manifest: tool,
			result: func(s string) bool { return s == "blocked" }},
		{name: "spin loop stopped at its deadline", fixture: "capsule-spin-loop", manifest: "capabilities:\n  limits:\n    deadline_seconds: 2\n",
			wantCode: 1, output: []string{"deadline", "deadline_seconds"}},
		{name: "memory balloon stopped at its limit", fixture: "capsule-memory-balloon", manifest: "capabilities:\n  limits:\n    memory_bytes: 16777216\n",
			wantCode: 1, output: []string{"memory", "memory_bytes"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			capDir := filepath.Join(tmp, "capsules", strings.ReplaceAll(tt.name, " ", "-"))
			os.MkdirAll(capDir, 0o755)
			os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte("name: capsule\nversion: 0.0.1\n"+tt.manifest), 0o644)
			os.WriteFile(filepath.Join(capDir, "capsule.wasm"), upstreamFixture(t, "run/components/"+tt.fixture+".wasm"), 0o644)
			r := capsuleEnv(t, home, tt.env, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg,
				"--work-root", filepath.Join(tmp, "work"), "--json")
			if r.code != tt.wantCode {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, tt.wantCode, r.stdout, r.stderr)
			}
			for _, s := range tt.output {
				if !strings.Contains(r.stdout+r.stderr, s) {
					t.Errorf("output lacks %q:\n%s\n%s", s, r.stdout, r.stderr)
				}
			}
			if tt.result == nil {
				return
			}
			var out struct{ Status, Workdir string }
			if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			got, err := os.ReadFile(filepath.Join(out.Workdir, "out", "result.txt"))
			if err != nil {
				t.Fatalf("status %s: %v", out.Status, err)
			}
			if !tt.result(string(got)) {
				t.Errorf("out/result.txt = %q", got)
			}
			t.Logf("%s: status %s, result %q", tt.fixture, out.Status, got)
		})
	}
}
