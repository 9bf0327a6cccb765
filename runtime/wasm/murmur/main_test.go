package murmur

import (
	"os"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// sharedCache is the compilation cache TestMain warms, for the tests that compile Go
// guests and test nothing of a cache of their own.
var sharedCache = wasm.WithCacheDir(guestbuild.WazeroCache())

// warmGuests are the Go guests the tests compile on sharedCache.
var warmGuests = []string{
	"../../../examples/drivers/anthropic-messages", "../../../examples/drivers/openai-chat",
	"../../../examples/guests/audit-hook", "../../../examples/guests/policy-hook",
	"../../../internal/testkit/testguests/procdriver", "../../../internal/testkit/testguests/stagehook",
	"../../../internal/testkit/testguests/summaryhook", "../../../internal/testkit/testguests/puller",
}

// TestMain, under the race detector, first compiles warmGuests into the compilation
// cache the tests share without it (guestbuild.RunWarmed): race-instrumented, wazero
// compiles a Go guest ~10× slower, and on a cold cache that was most of the test time.
func TestMain(m *testing.M) {
	os.Exit(guestbuild.RunWarmed(m, raceEnabled, warmGuests, "", nil))
}
