package wasm

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// sharedCache is the compilation cache TestMain warms, for the tests that compile Go
// guests and test nothing of a cache of their own.
var sharedCache = WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero"))

// warmGuests are the Go guests the tests compile on sharedCache.
var warmGuests = []string{
	"../../examples/drivers/anthropic-messages", "../../examples/drivers/openai-chat",
	"../../examples/guests/audit-hook", "../../examples/guests/policy-hook",
	"../../internal/testguests/abiecho", "../../internal/testguests/echo", "../../internal/testguests/hostile-spin",
	"../../internal/testguests/procdriver", "../../internal/testguests/stagehook", "../../internal/testguests/summaryhook",
	"../../internal/testguests/warmprobe",
}

// TestMain, under the race detector, first compiles warmGuests into sharedCache without
// it, as runtime's TestMain does (../testdata/warmcache says why); a failed warm-up only
// costs time.
func TestMain(m *testing.M) {
	flag.Parse()
	if raceEnabled && !testing.Short() {
		args := []string{"test", "-count=1", "-run=^TestWarm$", "../testdata/warmcache", "-args", filepath.Join(guestbuild.CacheDir(), "wazero")}
		for _, g := range warmGuests {
			abs, _ := filepath.Abs(g) // the helper runs in its own folder
			args = append(args, abs)
		}
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "warming the compilation cache: %v\n%s", err, out)
		}
	}
	os.Exit(m.Run())
}
