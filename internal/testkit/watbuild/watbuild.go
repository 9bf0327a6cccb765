// Package watbuild assembles guests written in the WebAssembly text format (.wat) for
// tests, the sibling of guestbuild for Go guests. It runs `jco parse` (npm
// @bytecodealliance/jco, pinned in jco/package-lock.json) and caches the binary under
// guestbuild.CacheDir(), keyed by a hash of the .wat source and the lock file, so built
// .wasm files never live in the repository.
//
// jco is installed on first use into the cache directory too (npm ci into a temporary
// folder renamed into place), not into the source tree: concurrent test processes then
// never share a half-written node_modules; at worst two of them install it once each.
package watbuild

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

var (
	//go:embed jco/package.json
	packageJSON []byte
	//go:embed jco/package-lock.json
	packageLock []byte
)

// ErrNoNode is returned (wrapped) when node or npm is not on PATH.
var ErrNoNode = errors.New("watbuild: node and npm are needed to assemble .wat guests")

// toolsKey identifies the pinned jco installation.
func toolsKey() string {
	h := sha256.New()
	h.Write(packageJSON)
	h.Write([]byte{0})
	h.Write(packageLock)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Key returns the cache key of the .wat source src.
func Key(src []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "jco %s\n", toolsKey())
	h.Write(src)
	return hex.EncodeToString(h.Sum(nil))
}

var (
	installMu sync.Mutex
	buildLock sync.Map // key -> *sync.Mutex
)

// jco returns the path of the jco command, installing it into the cache when absent.
func jco(ctx context.Context) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	dir := filepath.Join(guestbuild.CacheDir(), "jco-"+toolsKey())
	bin := filepath.Join(dir, "node_modules", "@bytecodealliance", "jco", "dist", "jco.js")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoNode, err)
	}
	if err := os.MkdirAll(guestbuild.CacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	tmp, err := os.MkdirTemp(guestbuild.CacheDir(), ".jco-*")
	if err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	defer os.RemoveAll(tmp) // after a successful rename there is nothing left to remove
	for name, b := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			return "", fmt.Errorf("watbuild: %w", err)
		}
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("watbuild: npm ci (jco): %w\n%s", err, out)
	}
	if err := os.Rename(tmp, dir); err != nil {
		// Another process installed the same key meanwhile: use its copy.
		if _, serr := os.Stat(bin); serr != nil {
			return "", fmt.Errorf("watbuild: %w", err)
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("watbuild: jco installed without %s: %w", bin, err)
	}
	return bin, nil
}

// Build assembles the .wat file at path and returns the path of the cached .wasm.
func Build(ctx context.Context, path string) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	key := Key(src)
	name := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	return cached(ctx, key, name+"-wat-"+key[:32]+".wasm", func(node, bin, tmp string) (string, error) {
		out := filepath.Join(tmp, "out.wasm")
		cmd := exec.CommandContext(ctx, node, bin, "parse", abs, "-o", out)
		if msg, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("watbuild: jco parse %s: %w\n%s", path, err, msg)
		}
		return out, nil
	})
}

// cached returns the cache's file name for key, making it first when it is missing:
// make runs with node and jco in a fresh temporary folder and returns the file it
// wrote there, which is renamed into the cache, so a reader never sees half a file.
func cached(ctx context.Context, key, name string, make func(node, jco, tmp string) (string, error)) (string, error) {
	cache := guestbuild.CacheDir()
	out := filepath.Join(cache, name)
	mu, _ := buildLock.LoadOrStore(key, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrNoNode, err)
	}
	bin, err := jco(ctx)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(cache, ".build-*")
	if err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	defer os.RemoveAll(tmp)
	built, err := make(node, bin, tmp)
	if err != nil {
		return "", err
	}
	if err := os.Rename(built, out); err != nil {
		return "", fmt.Errorf("watbuild: %w", err)
	}
	return out, nil
}

// Wasm assembles the .wat file at path (relative to the test's directory) and returns
// its bytes. Without node or npm it skips t, unless $CI is "true": CI installs them
// (.ci/run), so a missing one there is a failure, not a reason to skip.
func Wasm(t testing.TB, path string) []byte {
	t.Helper()
	out, err := Build(context.Background(), path)
	return readBuilt(t, out, err)
}

// readBuilt returns the bytes of the built file out, or skips t when err says node or
// npm is missing (failing instead when $CI is "true"), or fails t on any other err.
func readBuilt(t testing.TB, out string, err error) []byte {
	t.Helper()
	if errors.Is(err, ErrNoNode) && os.Getenv("CI") != "true" {
		t.Skipf("%v; skipping", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
