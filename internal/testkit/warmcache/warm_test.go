// Package warmcache builds Go test guests and compiles each into a wazero compilation
// cache with the engine the runtime tests use. Their TestMain runs it without -race —
// the race detector slows wazero's compiler ~10×, and a cold run of the tests would
// otherwise compile some twenty guests under it — and as a test binary, as theirs is,
// which wazero names its cache folder after (a binary without module information is
// version "dev"). The tests still compile every guest themselves, through the cache.
//
//	go test -count=1 ./internal/testkit/warmcache -args [-listen=<export> -listened=<dir>,…] <cache dir> <guest package dir>...
//
// guestbuild.WarmCache runs it from a TestMain. Without arguments it warms a cache of
// its own with one guest and checks the cache holds code.
//
// wazero compiles a module that a function listener watches into other code, cached
// under another key (which functions are listened to is part of it): -listened guests
// are also compiled with a listener on each function exporting -listen, as a test that
// watches those calls compiles them.
package warmcache

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

var (
	listen   = flag.String("listen", "", "the export whose functions -listened guests are also compiled listened to")
	listened = flag.String("listened", "", "comma-separated guest package dirs to compile listened to as well")
)

func TestWarm(t *testing.T) {
	ctx := context.Background()
	cache, dirs := flag.Arg(0), flag.Args()
	if len(dirs) > 0 {
		dirs = dirs[1:]
	} else {
		// Run alone (go test ./...): warm a cache of its own with one guest, and check it
		// holds compiled code, so the tool is tested where it is not used.
		cache, dirs = t.TempDir(), []string{"../testguests/echo"}
	}
	if err := warm(ctx, cache, dirs); err != nil {
		t.Fatal(err)
	}
	if flag.NArg() == 0 {
		var files int
		filepath.WalkDir(cache, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files++
			}
			return nil
		})
		if files == 0 {
			t.Fatalf("the warmed cache %s holds no compiled code", cache)
		}
	}
	if *listen != "" && *listened != "" {
		// Another engine: an engine compiles the same bytes once, listened to or not.
		if err := warm(experimental.WithFunctionListenerFactory(ctx, exportListener(*listen)), flag.Arg(0), strings.Split(*listened, ",")); err != nil {
			t.Fatal(err)
		}
	}
}

// exportListener listens, doing nothing, to each function exporting it.
type exportListener string

func (x exportListener) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if slices.Contains(def.ExportNames(), string(x)) {
		return experimental.FunctionListenerFunc(func(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {})
	}
	return nil
}

// warm builds and compiles the guests in dirs, runtime.NumCPU() at a time, with one
// engine caching into cache.
func warm(ctx context.Context, cache string, dirs []string) error {
	e, err := wasm.NewEngine(ctx, wasm.WithCacheDir(cache), wasm.WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	work := make(chan string)
	errs := make(chan error, len(dirs))
	var wg sync.WaitGroup
	for range min(runtime.NumCPU(), len(dirs)) {
		wg.Go(func() {
			for dir := range work {
				errs <- compile(ctx, e, dir)
			}
		})
	}
	for _, d := range dirs {
		work <- d
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func compile(ctx context.Context, e *wasm.Engine, dir string) error {
	path, err := guestbuild.Build(ctx, dir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	// A core module compiles the same whatever its role; the role only picks its world.
	if _, err := e.Compile(ctx, "warmcache", filepath.Base(dir), "tool", nil, b); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
