// Package upstream gives tests upstream Murmur's own fixtures (its committed wasm
// components) from a git mirror of its repository that the environment names: no
// registry serves them, so the tests over them are the suite's one set allowed to skip,
// in CI too, and they say so on stderr, not only under -v.
package upstream

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// Env names the environment variable holding the path of a (bare) git mirror of
// murmur-nexus/murmur.
const Env = "MURMUR_MIRROR"

// FixtureDir is where upstream keeps its test fixtures in its repository.
const FixtureDir = "crates/murmur-cli/tests/fixtures/"

var told sync.Once

// Mirror returns the mirror's path, or skips tb, saying on stderr (once per test binary)
// that the upstream fixture tests did not run and why.
func Mirror(tb testing.TB) string {
	tb.Helper()
	m := os.Getenv(Env)
	why := ""
	switch {
	case m == "":
		why = Env + " is not set"
	default:
		if _, err := os.Stat(m); err != nil {
			why = fmt.Sprintf("%s=%s: %v", Env, m, err)
		}
	}
	if why != "" {
		told.Do(func() {
			fmt.Fprintf(os.Stderr, "upstream Murmur's fixture tests did not run: %s (set it to a git mirror of murmur-nexus/murmur)\n", why)
		})
		tb.Skipf("upstream Murmur's fixtures: %s", why)
	}
	return m
}

// Fixture returns the bytes of path under FixtureDir at the mirror's HEAD, skipping tb
// without a mirror.
func Fixture(tb testing.TB, path string) []byte {
	tb.Helper()
	out, err := exec.Command("git", "-C", Mirror(tb), "show", "HEAD:"+FixtureDir+path).Output()
	if err != nil {
		tb.Fatalf("git show %s: %v", path, err)
	}
	return out
}
