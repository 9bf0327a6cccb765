package murmur

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// sharedCache is the compilation cache TestMain warms, for the tests that compile Go
// guests and test nothing of a cache of their own.
var sharedCache = wasm.WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero"))

// warmGuests are the Go guests the tests compile on sharedCache.
var warmGuests = []string{
	"../../../examples/drivers/anthropic-messages", "../../../examples/drivers/openai-chat",
	"../../../examples/guests/audit-hook", "../../../examples/guests/policy-hook",
	"../../../internal/testkit/testguests/procdriver", "../../../internal/testkit/testguests/stagehook",
	"../../../internal/testkit/testguests/summaryhook",
}

// TestMain, under the race detector, first compiles warmGuests into sharedCache without
// it (guestbuild.WarmCache); a failed warm-up only costs time.
func TestMain(m *testing.M) {
	flag.Parse()
	if raceEnabled && !testing.Short() {
		if err := guestbuild.WarmCache(filepath.Join(guestbuild.CacheDir(), "wazero"), warmGuests, "", nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(m.Run())
}
