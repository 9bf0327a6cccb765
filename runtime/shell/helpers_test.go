//go:build linux

package shell

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireTier skips when the host cannot give tier, printing why; on a host that can,
// every test runs.
func requireTier(t *testing.T, tier string) {
	t.Helper()
	r := DetectTier()
	if rank(r.Tier) < rank(tier) {
		t.Skipf("this host gives tier %q, not %q: %s", r.Tier, tier, strings.Join(r.Reasons, "; "))
	}
}

// newSandbox makes a sandbox over fresh folders; cfg.tier forces a weaker tier.
func newSandbox(t *testing.T, cfg Config) *Sandbox {
	t.Helper()
	if cfg.Workdir == "" {
		cfg.Workdir = t.TempDir()
	}
	if cfg.Records == "" {
		cfg.Records = t.TempDir()
	}
	if cfg.Allow == nil {
		cfg.Allow = []string{"bash"}
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if cfg.tier != "" && s.Tier() != cfg.tier {
		t.Fatalf("tier %q, want %q", s.Tier(), cfg.tier)
	}
	return s
}

// bash runs command with the bash tool and fails the test if the sandbox fails.
func bash(t *testing.T, s *Sandbox, command string) Result {
	t.Helper()
	return runTool(t, s, "bash", command, time.Minute)
}

func runTool(t *testing.T, s *Sandbox, tool, command string, timeout time.Duration) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	in, _ := json.Marshal(map[string]string{"command": command})
	r, err := s.RunShell(ctx, tool, in)
	if err != nil {
		t.Fatalf("%s %q: %v", tool, command, err)
	}
	return r
}

// streams splits a result text into its stdout and stderr.
func streams(t *testing.T, r Result) (stdout, stderr string) {
	t.Helper()
	_, rest, ok := strings.Cut(r.Text, "\nStdout:\n")
	if !ok {
		t.Fatalf("no Stdout in %q", r.Text)
	}
	stdout, stderr, ok = strings.Cut(rest, "Stderr:")
	if !ok {
		t.Fatalf("no Stderr in %q", r.Text)
	}
	return stdout, strings.TrimPrefix(stderr, "\n")
}

// tiers lists the confining tiers this host can give, for subtests run in each.
func tiers(t *testing.T) []string {
	r := DetectTier()
	var out []string
	for _, tier := range []string{TierSealed, TierScoped} {
		if rank(r.Tier) >= rank(tier) {
			out = append(out, tier)
		}
	}
	if len(out) == 0 {
		t.Skipf("this host gives tier %q: %s", r.Tier, strings.Join(r.Reasons, "; "))
	}
	return out
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
