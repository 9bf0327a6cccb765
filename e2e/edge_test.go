package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// TestInstallWithoutKey: a CI job pins and verifies a capsule whose driver key comes from
// ${HELLO_TEST_KEY} without holding the key — the lock is the same as with it — and packs
// and publishes artifacts likewise; only running the capsule asks for the key.
func TestInstallWithoutKey(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	if testing.Short() {
		t.Skip("builds guests and runs the binary")
	}
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	publish(t, home, reg, "../examples/artifacts/greeting", "greeting", nil)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	capDir := filepath.Join(tmp, "hello")
	copyDir(t, "../examples/capsules/hello", capDir)
	manifest := filepath.Join(capDir, "murmur.yaml")
	lock := filepath.Join(capDir, "murmur.lock")
	os.Remove(lock)
	m, _ := os.ReadFile(manifest)
	live := strings.Replace(string(m), "      endpoint: http://127.0.0.1:8089\n", "      endpoint: http://127.0.0.1:8089\n      api_key: ${HELLO_TEST_KEY}\n", 1)
	if live == string(m) {
		t.Fatal("the hello manifest no longer has the endpoint line this test extends")
	}
	os.WriteFile(manifest, []byte(live), 0o644)
	withKey := []string{"HELLO_TEST_KEY=sk-test-sentinel"}

	if r := capsuleEnv(t, home, withKey, "install", manifest, "--registry", reg); r.code != 0 {
		t.Fatalf("install with the key: exit %d: %s", r.code, r.stderr)
	}
	want, err := os.ReadFile(lock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(lock)
	if r := capsule(t, home, "install", manifest, "--registry", reg); r.code != 0 {
		t.Fatalf("install without the key: exit %d: %s", r.code, r.stderr)
	}
	got, err := os.ReadFile(lock)
	if err != nil || !bytes.Equal(got, want) || bytes.Contains(got, []byte("sk-test")) {
		t.Fatalf("lock without the key:\n%s\nwith it:\n%s", got, want)
	}
	if r := capsule(t, home, "verify", manifest, "--registry", reg); r.code != 0 {
		t.Fatalf("verify without the key: exit %d: %s", r.code, r.stderr)
	}
	zip := filepath.Join(tmp, "greeting.mur.zip")
	if r := capsule(t, home, "pack", "../examples/artifacts/greeting", "--output", zip); r.code != 0 {
		t.Fatalf("pack: exit %d: %s", r.code, r.stderr)
	}
	if r := capsule(t, home, "publish", zip, "--registry", filepath.Join(tmp, "other-registry")); r.code != 0 {
		t.Fatalf("publish: exit %d: %s", r.code, r.stderr)
	}
	// Running needs the key: refused before anything is staged, naming the variable.
	r := capsule(t, home, "run", manifest, "--registry", reg, "--work-root", filepath.Join(tmp, "work"), "--task", "hi")
	if r.code != 1 || !strings.Contains(r.stderr, "E-MAN-008") || !strings.Contains(r.stderr, "HELLO_TEST_KEY") {
		t.Fatalf("run without the key: exit %d\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(tmp, "work")); err == nil {
		t.Error("a refused run left a work folder")
	}
}

// TestAdaptAbsolutePath: `caddy adapt` reads `capsule /abs/murmur.yaml` and
// `capsule_replay /abs/dir` as paths, the way Caddy's own root directive reads one
// argument.
func TestAdaptAbsolutePath(t *testing.T) {
	dir := t.TempDir()
	manifest := filepath.Join(dir, "hello", "murmur.yaml")
	cassettes := filepath.Join(dir, "cassettes")
	cf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(cf, []byte("http://127.0.0.1:8080 {\n\thandle_path /agents/hello/* {\n\t\tcapsule "+manifest+
		"\n\t}\n}\n\nhttp://127.0.0.1:8089 {\n\tcapsule_replay "+cassettes+"\n}\n"), 0o644)
	cmd := exec.Command(caddyBin, "adapt", "--config", cf, "--adapter", "caddyfile")
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v\n%s", err, out)
	}
	if !json.Valid(out) || !bytes.Contains(out, []byte(`"manifest":"`+manifest+`"`)) || !bytes.Contains(out, []byte(`"cassettes":"`+cassettes+`"`)) {
		t.Errorf("adapted to %s", out)
	}
}
