package guestbuild

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// tempGuest writes a standalone guest module with a local library package.
func tempGuest(t *testing.T, libValue string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":     "module tmpguest\n\ngo 1.26\n",
		"lib/lib.go": "package lib\n\nconst V = " + libValue + "\n",
		"main.go": "//go:build wasip1\n\npackage main\n\nimport \"tmpguest/lib\"\n\n" +
			"//go:wasmexport get\nfunc get() uint32 { return lib.V }\n\nfunc main() {}\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBuildCachesByContent(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	ctx := context.Background()
	dir := tempGuest(t, "1")

	first, err := Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(first)
	if err != nil || !bytes.HasPrefix(wasm, []byte("\x00asm")) {
		t.Fatalf("output %s is not a wasm module: %v", first, err)
	}
	st, _ := os.Stat(first)

	again, err := Build(ctx, dir)
	if err != nil || again != first {
		t.Fatalf("rebuild of unchanged guest: %s, %v; want cached %s", again, err, first)
	}
	if st2, _ := os.Stat(again); !st2.ModTime().Equal(st.ModTime()) {
		t.Errorf("cached output was rewritten")
	}

	// A change in a local dependency, not just the main package, is a new key.
	if err := os.WriteFile(filepath.Join(dir, "lib", "lib.go"), []byte("package lib\n\nconst V = 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Build(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Fatalf("changing lib/lib.go kept the cache entry %s", first)
	}
	if entries, _ := filepath.Glob(filepath.Join(CacheDir(), ".build-*")); len(entries) != 0 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestBuildConcurrent(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	dir := tempGuest(t, "3")
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		paths [n]string
		errs  [n]error
	)
	for i := range n {
		wg.Go(func() {
			<-start
			paths[i], errs[i] = Build(context.Background(), dir)
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || paths[i] != paths[0] {
			t.Fatalf("build %d: %s, %v; want %s", i, paths[i], errs[i], paths[0])
		}
	}
}

func TestBuildError(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	dir := tempGuest(t, `"not a number"`)
	if _, err := Build(context.Background(), dir); err == nil {
		t.Fatal("building a broken guest succeeded")
	}
}
