package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/ocitest"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// TestRuntimePullsAcrossAFleet: a script capsule on one replica of a two-replica fleet
// pulls a tool from a real OCI registry through Murmur's artifact manager and calls it
// in the same task; a session on the other replica sees the runtime pin and calls the
// tool; the runtime pin shows in `caddy capsule doctor`; a pull outside the trust policy
// is refused with the string the guest reads.
func TestRuntimePullsAcrossAFleet(t *testing.T) {
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	reg := ocitest.Start(t)
	dsn := pgtest.NewDatabase(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)

	// The echo tool under three names, published to the OCI registry: echo, echo-bad
	// (whose blob is then altered in the registry's storage) and echo-pinned (for which
	// the trust policy pins another digest); the puller script capsule, granted echo*.
	sums := map[string]string{}
	for _, name := range []string{"echo", "echo-bad", "echo-pinned"} {
		art := filepath.Join(dir, name)
		os.MkdirAll(art, 0o755)
		os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: "+name+"\nversion: 1.0.0\nruntime: tool\ndescription: echoes its input\n"), 0o644)
		os.WriteFile(filepath.Join(art, name+".wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/echo"), 0o644)
		zip := filepath.Join(dir, name+".mur.zip")
		for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg.URL(), "--json"}} {
			r := capsule(t, home, args...)
			if r.code != 0 {
				t.Fatalf("%v: %s", args, r.stderr)
			}
			var out struct{ SHA256 string }
			if json.Unmarshal([]byte(r.stdout), &out) == nil && out.SHA256 != "" {
				sums[name] = out.SHA256
			}
		}
	}
	bad := filepath.Join(reg.Storage, "docker", "registry", "v2", "blobs", "sha256", sums["echo-bad"][:2], sums["echo-bad"], "data")
	data, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	os.WriteFile(bad, data, 0o644)
	wrongPin := strings.Repeat("0f", 32)
	capDir := filepath.Join(dir, "puller")
	os.MkdirAll(capDir, 0o755)
	manifestPath := filepath.Join(capDir, "murmur.yaml")
	os.WriteFile(manifestPath, []byte("name: puller\nversion: 1.0.0\ncapabilities:\n  install: {tool: [\"echo*\"]}\n"+
		"  limits: {memory_bytes: 134217728, deadline_seconds: 120}\nlifecycle: {task_acceptance: queue}\n"), 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/puller"), 0o644)

	start := func(name string) *gateway {
		port, admin := freePort(t), freePort(t)
		g := &gateway{dir: filepath.Join(dir, name), home: home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
			logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
		os.MkdirAll(g.dir, 0o755)
		g.caddyfile = filepath.Join(g.dir, "Caddyfile")
		os.WriteFile(g.caddyfile, []byte(fmt.Sprintf(`{
	admin 127.0.0.1:%s
	default_bind 127.0.0.1
	capsule {
		store {env.CAPSULE_STORE}
		instance %s
		lease 2s
		runtime_pulls {
			registry %s
			pin echo-pinned@1.0.0 sha256:%s
		}
	}
}

http://127.0.0.1:%s {
	handle_path /agents/puller/* {
		capsule %s
	}
	handle /metrics {
		metrics
	}
}
`, admin, name, reg.URL(), wrongPin, port, manifestPath)), 0o644)
		g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
		g.cmd.Dir = g.dir
		g.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "CAPSULE_STORE=" + dsn,
			"XDG_DATA_HOME=" + filepath.Join(g.dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(g.dir, "config")}
		waitServing(t, g.cmd, g.logs)
		return g
	}
	a, b := start("gw-a"), start("gw-b")
	ask := func(g *gateway, cmds ...string) []string {
		t.Helper()
		tk := decodeTask(t, g.call(t, "/agents/puller/", "", "message/send", map[string]any{"message": msg03(strings.Join(cmds, "\n"))}))
		if tk.Status.State != "completed" {
			t.Fatalf("%s: task %+v", g.base, tk)
		}
		return strings.Split(strings.TrimSpace(tk.text()), "\n")
	}
	expect := func(got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("answers %q, want %d", got, len(want))
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Fatalf("answer %d: %s, want %s…", i+1, got[i], want[i])
			}
		}
	}
	got := ask(a, "pull echo 1.0.0", "invoke echo from a", "pull echo-other 1.0.0", "pull other 1.0.0", "pull echo-bad 1.0.0", "pull echo-pinned 1.0.0")
	expect(got,
		`ok: {"name":"echo","version":"1.0.0","runtime":"wasm"}`,
		`ok: {"status":"passed","summary":"echo","data":"from a"}`,
		`error: pull: 'echo-other@1.0.0' is in none of the trusted registries`,
		`error: not-granted: 'other' matches no capabilities.install entry`,
		`error: pull: 'echo-bad@1.0.0`,
		`error: pull: 'echo-pinned@1.0.0`)
	if !strings.Contains(got[4], "E-REG-033") || !strings.Contains(got[4], sums["echo-bad"]) || !strings.Contains(got[5], "E-REG-092") || !strings.Contains(got[5], wrongPin) {
		t.Fatalf("the refusals do not name their checks:\n%s", strings.Join(got, "\n"))
	}
	// Counted, and nothing of the refused pulls written: the cache holds echo alone.
	if n := metricValue(t, a, `capsule_artifact_pulls_total{capsule="puller",result="refused"}`); n != 4 {
		t.Fatalf("refused pulls counted %v, want 4", n)
	}
	ents, _ := os.ReadDir(filepath.Join(a.dir, "data", "caddy", "capsule", "cache", "artifacts", "sha256"))
	if len(ents) != 1 || ents[0].Name() != sums["echo"] {
		t.Fatalf("the artifact cache holds %v, want echo's %s alone", ents, sums["echo"])
	}
	// The other replica, which never pulled it, fetches it by its pin and calls it.
	expect(ask(b, "list", "invoke echo from b"),
		`ok: [{"name":"echo","version":"1.0.0","runtime":"wasm"}]`,
		`ok: {"status":"passed","summary":"echo","data":"from b"}`)

	r := capsuleEnv(t, home, []string{"CAPSULE_STORE=" + dsn}, "doctor", manifestPath, "--store", "env:CAPSULE_STORE", "--registry", reg.URL())
	if r.code != 0 || !strings.Contains(r.stdout, "echo 1.0.0") || !strings.Contains(r.stdout, "origin: runtime") || !strings.Contains(r.stdout, reg.URL()) ||
		strings.Contains(r.stdout, "echo-bad") || strings.Contains(r.stdout, "echo-pinned") {
		t.Fatalf("doctor: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
