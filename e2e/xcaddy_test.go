package e2e

import (
	"context"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// xcaddy is `make gateway`, started by TestMain (startXcaddy) beside the other tests —
// its build is CPU work, theirs mostly waiting on a gateway — and awaited by
// TestXcaddyGateway.
var xcaddy struct {
	done chan struct{} // closed when the build ended; nil when it was not started
	out  []byte
	err  error
}

// xcaddyLimit bounds the build: one that runs out of time fails the test with make's
// output, not with a stack dump of the whole package.
const xcaddyLimit = 15 * time.Minute

// startXcaddy starts `make gateway` unless the run's flags leave TestXcaddyGateway out.
func startXcaddy() {
	if testing.Short() {
		return
	}
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
		top, _, _ := strings.Cut(f.Value.String(), "/")
		if ok, err := regexp.MatchString(top, "TestXcaddyGateway"); err != nil || !ok {
			return
		}
	}
	root, _ := filepath.Abs("..")
	xcaddy.done = make(chan struct{})
	go func() {
		defer close(xcaddy.done)
		ctx, cancel := context.WithTimeout(context.Background(), xcaddyLimit)
		defer cancel()
		make := exec.CommandContext(ctx, "make", "--no-print-directory", "gateway")
		make.Dir = root
		xcaddy.out, xcaddy.err = make.CombinedOutput()
	}()
}

// TestXcaddyGateway waits for `make gateway` — xcaddy v0.4.5 building Caddy with this
// module, as an operator would for their own gateway — and serves Caddyfile.example with
// the result. It needs the Go module proxy; without it the test skips and says so (and
// fails under CI=true).
func TestXcaddyGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds Caddy with xcaddy")
	}
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	if out, err := exec.Command("go", "list", "-m", "github.com/caddyserver/xcaddy@v0.4.5").CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the Go module proxy is unreachable, so xcaddy cannot fetch Caddy (CI=true: a missing component fails): %v: %s", err, out)
		}
		t.Skipf("the Go module proxy is unreachable, so xcaddy cannot fetch Caddy: %v: %s", err, out)
	}
	if xcaddy.done == nil {
		t.Fatal("TestMain did not start `make gateway` (startXcaddy)")
	}
	// Until shortly before go test's own deadline, for the same reason as xcaddyLimit.
	var deadline <-chan time.Time
	if d, ok := t.Deadline(); ok {
		deadline = time.After(time.Until(d.Add(-30 * time.Second)))
	}
	select {
	case <-xcaddy.done:
	case <-deadline:
		t.Fatal("make gateway is still running 30 s before go test's deadline")
	}
	if xcaddy.err != nil {
		t.Fatalf("make gateway: %v\n%s", xcaddy.err, xcaddy.out)
	}
	root, _ := filepath.Abs("..")
	g := startGatewayWith(t, filepath.Join(root, "bin", "caddy-xcaddy"))
	tk := decodeTask(t, g.call(t, "/agents/wordcount/", "", "message/send", map[string]any{"message": msg03("built by xcaddy")}))
	if tk.Status.State != "completed" || !strings.Contains(tk.text(), "3 words") {
		t.Fatalf("task = %v", tk)
	}
	if v := metricValue(t, g, `capsule_tasks_total{capsule="wordcount",state="completed"}`); v < 1 {
		t.Errorf("capsule_tasks_total = %v", v)
	}
}
