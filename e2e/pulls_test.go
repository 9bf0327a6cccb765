package e2e

import (
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
	reg := ocitest.Start(t)
	dsn := pgtest.NewDatabase(t)
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	os.MkdirAll(home, 0o755)

	// The echo tool, published to the OCI registry; the puller script capsule, granted echo*.
	art := filepath.Join(dir, "echo")
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: echo\nversion: 1.0.0\nruntime: tool\ndescription: echoes its input\n"), 0o644)
	os.WriteFile(filepath.Join(art, "echo.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/echo"), 0o644)
	zip := filepath.Join(dir, "echo.mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg.URL()}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: %s", args, r.stderr)
		}
	}
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
		}
	}
}

http://127.0.0.1:%s {
	handle_path /agents/puller/* {
		capsule %s
	}
}
`, admin, name, reg.URL(), port, manifestPath)), 0o644)
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
	expect(ask(a, "pull echo 1.0.0", "invoke echo from a", "pull echo-other 1.0.0"),
		`ok: {"name":"echo","version":"1.0.0","runtime":"wasm"}`,
		`ok: {"status":"passed","summary":"echo","data":"from a"}`,
		`error: pull: 'echo-other@1.0.0`)
	// The other replica, which never pulled it, fetches it by its pin and calls it.
	expect(ask(b, "list", "invoke echo from b"),
		`ok: [{"name":"echo","version":"1.0.0","runtime":"wasm"}]`,
		`ok: {"status":"passed","summary":"echo","data":"from b"}`)

	r := capsuleEnv(t, home, []string{"CAPSULE_STORE=" + dsn}, "doctor", manifestPath, "--store", "env:CAPSULE_STORE", "--registry", reg.URL())
	if r.code != 0 || !strings.Contains(r.stdout, "echo 1.0.0") || !strings.Contains(r.stdout, "origin: runtime") || !strings.Contains(r.stdout, reg.URL()) {
		t.Fatalf("doctor: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
}
