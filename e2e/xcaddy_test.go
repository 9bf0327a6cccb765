package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestXcaddyGateway runs `make gateway` — xcaddy v0.4.5 building Caddy with this module,
// as an operator would for their own gateway — and serves Caddyfile.example with the
// result. It needs the Go module proxy; without it the test skips and says so.
func TestXcaddyGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy with xcaddy")
	}
	// 15 minutes, or until shortly before go test's own deadline: a build that runs out
	// of time fails here with make's output, not in a stack dump of the whole package.
	end := time.Now().Add(15 * time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-30*time.Second).Before(end) {
		end = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), end)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "list", "-m", "github.com/caddyserver/xcaddy@v0.4.5").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Go module proxy is unreachable, so xcaddy cannot fetch Caddy (CI=true: a missing component fails): %v: %s", err, out)
		}
		t.Skipf("the Go module proxy is unreachable, so xcaddy cannot fetch Caddy: %v: %s", err, out)
	}
	root, _ := filepath.Abs("..")
	make := exec.CommandContext(ctx, "make", "--no-print-directory", "gateway")
	make.Dir = root
	if out, err := make.CombinedOutput(); err != nil {
		t.Fatalf("make gateway: %v\n%s", err, out)
	}
	g := startGatewayWith(t, filepath.Join(root, "bin", "caddy-xcaddy"))
	tk := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("built by xcaddy")}))
	if tk.Status.State != "completed" || !strings.Contains(tk.text(), "3 words") {
		t.Fatalf("task = %v", tk)
	}
	if v := metricValue(t, g, `capsule_tasks_total{capsule="wordcount",state="completed"}`); v < 1 {
		t.Errorf("capsule_tasks_total = %v", v)
	}
}
