package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// caddyBin is the real gateway binary every test of this package runs: built once per
// `go test` run by TestMain from ./cmd/caddy, with the sandbox helper
// (./cmd/capsulegate-sandbox) next to it as `make caddy` installs them.
var caddyBin string

// TestMain builds the gateway and the sandbox helper into one temporary folder, runs the
// tests against them, stops the shared PostgreSQL cluster if a test started it and
// removes the folder.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capsulegate-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	caddyBin = filepath.Join(dir, "caddy")
	// Both at once: the second build is mostly linking, which the first leaves a core for.
	var wg sync.WaitGroup
	failed := make(chan string, 2)
	for _, b := range []struct{ out, pkg string }{
		{caddyBin, "../cmd/caddy"},
		{filepath.Join(dir, "capsulegate-sandbox"), "../cmd/capsulegate-sandbox"},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The flags of `make caddy` (CADDY_FLAGS), which are xcaddy's: the three builds
			// of a test run share their compiled packages.
			build := exec.Command("go", "build", "-trimpath", "-tags", "nobadger,nomysql,nopgx", "-o", b.out, b.pkg)
			build.Stdout, build.Stderr = os.Stderr, os.Stderr
			if err := build.Run(); err != nil {
				failed <- fmt.Sprintf("building %s: %v", b.pkg, err)
			}
		}()
	}
	wg.Wait()
	close(failed)
	for msg := range failed {
		fmt.Fprintln(os.Stderr, msg)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	// The gateways' shared cache (gatewayCache) keeps, beside the machine code, the sums
	// of the script modules they staged by file identity; those of an earlier run name
	// folders gone since, so the file is begun anew rather than grown run after run.
	os.Remove(filepath.Join(gatewayCache(), "filesums"))
	flag.Parse() // m.Run would parse them too; startXcaddy reads -test.run
	startXcaddy()
	code := m.Run()
	pgtest.CloseShared() // the PostgreSQL tests' cluster, if one started: never outlives the binary
	if xcaddy.done != nil {
		<-xcaddy.done // make writes into bin/: never left running behind the test binary
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
