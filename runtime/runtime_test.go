package runtime

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// raceEnabled is set by race_test.go when the tests run under the race detector.
var raceEnabled bool

// warmGuests are the Go guests the tests compile, as they name them.
var warmGuests = []string{
	"../examples/drivers/anthropic-messages", "../examples/drivers/openai-chat",
	"../examples/guests/audit-hook", "../examples/guests/policy-hook",
	"../internal/testguests/badprocdriver", "../internal/testguests/echo", "../internal/testguests/envdump-driver",
	"../internal/testguests/gatetool", "../internal/testguests/gateway", "../internal/testguests/procdriver",
	"../internal/testguests/readerhook", "../internal/testguests/recdriver", "../internal/testguests/script",
	"../internal/testguests/stagehook", "../internal/testguests/summaryhook",
	"../internal/testguests/hostile-abi", "../internal/testguests/hostile-env", "../internal/testguests/hostile-fs",
	"../internal/testguests/hostile-grow", "../internal/testguests/hostile-invoke", "../internal/testguests/hostile-net",
	"../internal/testguests/hostile-spin",
}

// listenedGuests are the warmGuests TestSecretsStayInTheHost compiles with its memory
// scan listening to each tool run (memScan), which wazero compiles and caches apart.
var listenedGuests = []string{
	"../examples/drivers/anthropic-messages", "../examples/drivers/openai-chat",
	"../internal/testguests/envdump-driver", "../internal/testguests/echo",
}

// TestMain, under the race detector, first compiles warmGuests into the compilation
// cache the tests share (<guest cache>/wazero) from a test binary built without it
// (testdata/warmcache): race-instrumented, wazero compiles a Go guest ~10× slower, and
// on a cold cache that was most of this package's test time. The tests still compile
// each guest, through the cache; if warming fails they compile it as before.
func TestMain(m *testing.M) {
	flag.Parse()
	if raceEnabled && !testing.Short() {
		abs := func(dirs []string) []string { // the helper runs in its own folder
			var out []string
			for _, d := range dirs {
				a, _ := filepath.Abs(d)
				out = append(out, a)
			}
			return out
		}
		args := append([]string{"test", "-count=1", "-run=^TestWarm$", "./testdata/warmcache", "-args",
			"-listen=" + abi.ExportToolRun01, "-listened=" + strings.Join(abs(listenedGuests), ","),
			filepath.Join(guestbuild.CacheDir(), "wazero")}, abs(warmGuests)...)
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "warming the compilation cache: %v\n%s", err, out)
		}
	}
	os.Exit(m.Run())
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
