package watbuild

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildCachesByContent(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "one.wat")
	if err := os.WriteFile(src, []byte(`(module (memory (export "memory") 1))`), 0o644); err != nil {
		t.Fatal(err)
	}
	b := Wasm(t, src)
	if !bytes.HasPrefix(b, []byte("\x00asm\x01\x00\x00\x00")) {
		t.Fatalf("not a core module: % x", b[:min(8, len(b))])
	}
	first, err := Build(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Build(context.Background(), src)
	if err != nil || again != first {
		t.Fatalf("same source built to %s then %s (%v)", first, again, err)
	}
	if err := os.WriteFile(src, []byte(`(module (memory (export "memory") 2))`), 0o644); err != nil {
		t.Fatal(err)
	}
	changed, err := Build(context.Background(), src)
	if err != nil || changed == first {
		t.Fatalf("a changed source reused %s (%v)", changed, err)
	}
}

func TestBuildReportsAssemblerErrors(t *testing.T) {
	Wasm(t, filepath.Join("..", "testguests", "tinytool", "tinytool.wat")) // skips without node
	src := filepath.Join(t.TempDir(), "bad.wat")
	if err := os.WriteFile(src, []byte(`(module (func (not-an-instruction)))`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Build(context.Background(), src)
	if err == nil || errors.Is(err, ErrNoNode) || !strings.Contains(err.Error(), "jco parse") {
		t.Fatalf("want a jco parse error, got %v", err)
	}
}
