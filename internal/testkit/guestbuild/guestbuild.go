// Package guestbuild compiles Go guests for tests and make: GOOS=wasip1 GOARCH=wasm
// go build -buildmode=c-shared, cached on disk by a hash of everything the build reads.
//
// The key covers the go version, the build settings, go.mod and go.sum of the guest's
// module, and the contents of every Go file of every package the guest depends on that
// lives in a module without a version (the main module or a replace directory);
// versioned dependencies are covered by their module version. Outputs are written to a
// temporary file and renamed into place, so concurrent test processes never see a
// partial module; at worst two of them build the same key once each.
package guestbuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero"
)

// CacheEnv names the environment variable that overrides the cache directory.
const CacheEnv = "CAPSULEGATE_GUEST_CACHE"

var buildFlags = []string{"-buildmode=c-shared", "-trimpath"}

// CacheDir returns $CAPSULEGATE_GUEST_CACHE, else <user cache dir>/capsulegate-guests.
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "capsulegate-guests")
}

// keyLocks makes builds of one key within a process happen once.
var keyLocks sync.Map // key -> *sync.Mutex

// Build compiles the main package in pkgDir and returns the path of the cached .wasm.
func Build(ctx context.Context, pkgDir string) (string, error) {
	dir, err := filepath.Abs(pkgDir)
	if err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	key, err := Key(ctx, dir)
	if err != nil {
		return "", err
	}
	cache := CacheDir()
	out := filepath.Join(cache, filepath.Base(dir)+"-"+key[:32]+".wasm")
	mu, _ := keyLocks.LoadOrStore(key, new(sync.Mutex))
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	tmp, err := os.CreateTemp(cache, ".build-*.wasm")
	if err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	args := append([]string{"build", "-o", tmp.Name()}, buildFlags...)
	cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = guestEnv()
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("guestbuild: go build %s: %v\n%s", pkgDir, err, msg)
	}
	if err := os.Rename(tmp.Name(), out); err != nil {
		return "", fmt.Errorf("guestbuild: %w", err)
	}
	return out, nil
}

// Wasm builds the guest in pkgDir (relative to the test's directory) and returns its
// bytes, failing t on error.
func Wasm(t testing.TB, pkgDir string) []byte {
	t.Helper()
	path, err := Build(context.Background(), pkgDir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func guestEnv() []string {
	return append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
}

type listedPkg struct {
	ImportPath string
	Dir        string
	Standard   bool
	GoFiles    []string
	EmbedFiles []string
	Module     *struct {
		Path, Version, GoMod string
		Main                 bool
	}
	Error *struct{ Err string }
}

// Key returns the cache key of the guest in dir (an absolute path).
func Key(ctx context.Context, dir string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-json=ImportPath,Dir,Standard,GoFiles,EmbedFiles,Module,Error", ".")
	cmd.Dir = dir
	cmd.Env = guestEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("guestbuild: go list %s: %v\n%s", dir, err, stderr.Bytes())
	}
	h := sha256.New()
	fmt.Fprintf(h, "flags %q env %s\n", buildFlags, goEnvKey())
	mods := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return "", fmt.Errorf("guestbuild: go list output: %w", err)
		}
		if p.Error != nil {
			return "", fmt.Errorf("guestbuild: %s: %s", p.ImportPath, p.Error.Err)
		}
		if p.Standard {
			continue
		}
		if p.Module != nil && p.Module.Version != "" {
			fmt.Fprintf(h, "pkg %s %s@%s\n", p.ImportPath, p.Module.Path, p.Module.Version)
			continue
		}
		if p.Module != nil && p.Module.GoMod != "" && !mods[p.Module.GoMod] {
			mods[p.Module.GoMod] = true
			for _, f := range []string{p.Module.GoMod, strings.TrimSuffix(p.Module.GoMod, ".mod") + ".sum"} {
				if err := hashFile(h, f); err != nil && !errors.Is(err, os.ErrNotExist) {
					return "", err
				}
			}
		}
		fmt.Fprintf(h, "pkg %s\n", p.ImportPath)
		files := append(append([]string(nil), p.GoFiles...), p.EmbedFiles...)
		sort.Strings(files)
		for _, f := range files {
			if err := hashFile(h, filepath.Join(p.Dir, f)); err != nil {
				return "", err
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("guestbuild: %w", err)
	}
	fmt.Fprintf(h, "file %s %d\n", filepath.Base(path), len(b))
	h.Write(b)
	return nil
}

var (
	goEnvOnce sync.Once
	goEnvVal  string
)

// goEnvKey is the go version and the settings of the go command that change its output.
func goEnvKey() string {
	goEnvOnce.Do(func() {
		cmd := exec.Command("go", "env", "GOVERSION", "GOFLAGS", "GOEXPERIMENT", "GOWASM", "GOROOT")
		cmd.Env = guestEnv()
		out, err := cmd.Output()
		if err != nil {
			goEnvVal = "unknown " + err.Error()
			return
		}
		goEnvVal = strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "|")
	})
	return goEnvVal
}

var (
	compCacheOnce sync.Once
	compCache     wazero.CompilationCache
	compCacheErr  error
)

// CompilationCache returns a process-wide wazero compilation cache stored under
// CacheDir()/wazero, so tests compile each guest once per wazero version, not per run.
func CompilationCache(t testing.TB) wazero.CompilationCache {
	t.Helper()
	compCacheOnce.Do(func() {
		compCache, compCacheErr = wazero.NewCompilationCacheWithDir(filepath.Join(CacheDir(), "wazero"))
	})
	if compCacheErr != nil {
		t.Fatalf("guestbuild: %v", compCacheErr)
	}
	return compCache
}

// WarmCache compiles the Go guests in dirs (package folders, relative to the calling
// test's folder) into the wazero compilation cache at cache, from a test binary built
// without the race detector (internal/testkit/warmcache): race-instrumented, wazero
// compiles a Go guest ~10× slower, and on a cold cache that was most of a package's test
// time. listened guests are also compiled with a listener on each function exporting
// listen, as a test that watches those calls compiles them. A TestMain calls it under
// -race; the tests still compile every guest, through the cache, so a failed warm-up
// only costs time.
func WarmCache(cache string, dirs []string, listen string, listened []string) error {
	abs := func(ds []string) []string { // the tool runs in its own folder
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i], _ = filepath.Abs(d)
		}
		return out
	}
	args := []string{"test", "-count=1", "-run=^TestWarm$", "github.com/capsulegate/capsulegate/internal/testkit/warmcache", "-args"}
	if listen != "" && len(listened) > 0 {
		args = append(args, "-listen="+listen, "-listened="+strings.Join(abs(listened), ","))
	}
	args = append(append(args, cache), abs(dirs)...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("warming the compilation cache %s: %w\n%s", cache, err, out)
	}
	return nil
}

// WazeroCache is the wazero compilation cache that the tests warming one share.
func WazeroCache() string { return filepath.Join(CacheDir(), "wazero") }

// RunWarmed is a TestMain's body: under the race detector (race) and without -short it
// first warms WazeroCache with dirs (WarmCache), telling a failure on stderr and going
// on, then runs the tests and returns their exit code.
func RunWarmed(m *testing.M, race bool, dirs []string, listen string, listened []string) int {
	flag.Parse()
	if race && !testing.Short() {
		if err := WarmCache(WazeroCache(), dirs, listen, listened); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	return m.Run()
}
