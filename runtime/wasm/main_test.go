package wasm

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// sharedCache is the compilation cache TestMain warms, for the tests that compile Go
// guests and test nothing of a cache of their own.
var sharedCache = WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero"))

// warmGuests are the Go guests the tests compile on sharedCache.
var warmGuests = []string{
	"../../internal/testkit/testguests/abiecho", "../../internal/testkit/testguests/counter",
	"../../internal/testkit/testguests/echo", "../../internal/testkit/testguests/hostile-spin",
	"../../internal/testkit/testguests/warmprobe",
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
