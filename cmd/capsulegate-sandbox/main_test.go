package main

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestRunByHand: started any other way than as the wrapper, the helper says what it is
// in one line and exits 2.
func TestRunByHand(t *testing.T) {
	if os.Getenv("CAPSULEGATE_SANDBOX_TEST_MAIN") == "1" {
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunByHand$")
	cmd.Env = append(os.Environ(), "CAPSULEGATE_SANDBOX_TEST_MAIN=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit %v, want 2", err)
	}
	line := stderr.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, "sandbox helper") || !strings.Contains(line, "not meant to be run by hand") {
		t.Errorf("usage %q", line)
	}
}

// TestLinksOnlyTheSandbox keeps the helper small: it links runtime/shell and what that
// imports, nothing more (no Caddy, no other capsulegate package), so a spawn does not
// pay for initialising them.
func TestLinksOnlyTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skipf("no go command: %v", err)
	}
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	shell := deps("github.com/capsulegate/capsulegate/runtime/shell")
	for _, d := range deps(".") {
		if d != "github.com/capsulegate/capsulegate/cmd/capsulegate-sandbox" && !slices.Contains(shell, d) {
			t.Errorf("the helper links %s, which runtime/shell does not import", d)
		}
	}
}
