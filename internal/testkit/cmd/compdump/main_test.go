package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
)

// TestDump prints the tool component of the component package's tests and refuses a
// file that is not a component.
func TestDump(t *testing.T) {
	b := watbuild.Wasm(t, "../../../../runtime/wasm/component/testdata/tool.wat")
	dir := t.TempDir()
	good := filepath.Join(dir, "tool.wasm")
	bad := filepath.Join(dir, "bad.wasm")
	if err := os.WriteFile(good, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not wasm"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := dump(good); err != nil {
		t.Fatal(err)
	}
	if err := dump(bad); err == nil {
		t.Error("a file that is not a component was dumped")
	}
}
