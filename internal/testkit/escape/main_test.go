package escape

import (
	"os"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// warmGuests are the Go guests the suite compiles, on the shared cache.
var warmGuests = []string{
	"../testguests/echo", "../testguests/procdriver", "../testguests/hostile-abi", "../testguests/hostile-env",
	"../testguests/hostile-fs", "../testguests/hostile-grow", "../testguests/hostile-invoke",
	"../testguests/hostile-link", "../testguests/hostile-net", "../testguests/hostile-spin",
}

// TestMain, under the race detector, first compiles warmGuests into the compilation
// cache the suite shares without it (guestbuild.RunWarmed): race-instrumented, wazero
// compiles a Go guest ~10× slower, and on a cold cache that was most of the suite's time.
func TestMain(m *testing.M) {
	os.Exit(guestbuild.RunWarmed(m, raceEnabled, warmGuests, "", nil))
}
