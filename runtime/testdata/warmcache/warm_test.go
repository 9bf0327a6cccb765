// Package warmcache builds Go test guests and compiles each into a wazero compilation
// cache with the engine the runtime tests use. Their TestMain runs it without -race —
// the race detector slows wazero's compiler ~10×, and a cold run of the tests would
// otherwise compile some twenty guests under it — and as a test binary, as theirs is,
// which wazero names its cache folder after (a binary without module information is
// version "dev"). The tests still compile every guest themselves, through the cache.
//
//	go test -count=1 ./testdata/warmcache -args <cache dir> <guest package dir>...
package warmcache

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

func TestWarm(t *testing.T) {
	if flag.NArg() == 0 {
		t.Skip("no cache folder given: -args <cache dir> <guest package dir>...")
	}
	if err := warm(context.Background(), flag.Arg(0), flag.Args()[1:]); err != nil {
		t.Fatal(err)
	}
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
	if _, err := e.Compile(ctx, "warmcache", filepath.Base(dir), manifest.RoleTool, b); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	return nil
}
