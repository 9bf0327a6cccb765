package runtime

import (
	"context"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// warmGuests are the Go guests the tests compile, as they name them.
var warmGuests = []string{
	"../examples/drivers/anthropic-messages", "../examples/drivers/openai-chat",
	"../examples/guests/audit-hook", "../examples/guests/policy-hook",
	"../internal/testkit/testguests/badprocdriver", "../internal/testkit/testguests/echo", "../internal/testkit/testguests/envdump-driver",
	"../internal/testkit/testguests/gatetool", "../internal/testkit/testguests/gateway", "../internal/testkit/testguests/procdriver",
	"../internal/testkit/testguests/readerhook", "../internal/testkit/testguests/recdriver", "../internal/testkit/testguests/script",
	"../internal/testkit/testguests/stagehook", "../internal/testkit/testguests/summaryhook",
	"../internal/testkit/testguests/hostile-abi", "../internal/testkit/testguests/hostile-env", "../internal/testkit/testguests/hostile-fs",
	"../internal/testkit/testguests/hostile-grow", "../internal/testkit/testguests/hostile-invoke", "../internal/testkit/testguests/hostile-net",
	"../internal/testkit/testguests/hostile-spin", "../internal/testkit/testguests/puller",
}

// listenedGuests are the warmGuests TestSecretsStayInTheHost compiles with its memory
// scan listening to each tool run (memScan), which wazero compiles and caches apart.
var listenedGuests = []string{
	"../examples/drivers/anthropic-messages", "../examples/drivers/openai-chat",
	"../internal/testkit/testguests/envdump-driver", "../internal/testkit/testguests/echo",
}

// TestMain, under the race detector, first compiles warmGuests into the compilation
// cache the tests share without it (guestbuild.RunWarmed): race-instrumented, wazero
// compiles a Go guest ~10× slower, and on a cold cache that was most of the test time.
func TestMain(m *testing.M) {
	os.Exit(guestbuild.RunWarmed(m, raceEnabled, warmGuests, abi.ExportToolRun01, listenedGuests))
}

// newRuntime starts a Runtime with its metrics on a registry of its own, closed when the
// test ends.
func newRuntime(t testing.TB, opts ...wasm.EngineOption) (*Runtime, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	r, err := New(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(reg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r, reg
}
