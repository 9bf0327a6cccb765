package harnesstest

import (
	"context"
	"errors"
	"os"
	"testing"
)

// Claude returns the path of the pinned Claude Code CLI, installing it first when
// needed (Install). It skips t, saying why, only when npm or its registry is
// unreachable, and fails t instead when CI=true.
func Claude(t testing.TB) string { t.Helper(); return need(t, ClaudeCode) }

// Codex returns the path of the pinned Codex CLI as Claude does Claude Code's.
func Codex(t testing.TB) string { t.Helper(); return need(t, CodexCLI) }

func need(t testing.TB, h Harness) string {
	t.Helper()
	path, err := Install(context.Background(), h)
	if errors.Is(err, ErrNoRegistry) && os.Getenv("CI") != "true" {
		t.Skipf("%s@%s is not installed and cannot be: %v", h.Package, h.Version, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}
