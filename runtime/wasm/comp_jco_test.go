package wasm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/internal/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// jcoToolWIT is our murmur:tool@0.1.0 WIT (wit/murmur-tool-0.1.0.wit) reduced to its run
// interface and a world that only exports it: the Go tools import nothing but preview1,
// and the full file's other packages are not needed to embed that.
func jcoToolWIT(t *testing.T, witFile string) string {
	t.Helper()
	src, err := os.ReadFile(witFile)
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, "\n/// A tool")
	if i < 0 {
		t.Fatalf("%s no longer has the tool world's comment", witFile)
	}
	path := filepath.Join(t.TempDir(), "tool.wit")
	os.WriteFile(path, []byte(s[:i]+"\nworld tool-component {\n  export run;\n}\n"), 0o644)
	return path
}

// TestJcoAdapterComponent runs a Go wasip1 tool (internal/testguests/benchtool) made
// into a component by the real `jco new --wasi-reactor` (wit-component and the preview1
// reactor adapter jco ships) on the Engine: it compiles as a tool and answers like the
// core module does.
func TestJcoAdapterComponent(t *testing.T) {
	core := guestbuild.Wasm(t, "../../internal/testguests/benchtool")
	comp := watbuild.Component(t, core, jcoToolWIT(t, "../../wit/murmur-tool-0.1.0.wit"), "tool-component")
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := e.Compile(ctx, "cap", "benchtool", manifest.RoleTool, comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := mod.CheckWorld(string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"hello component", ""} {
		out, err := e.CallTool(ctx, mod, Grants{MemoryBytes: 64 << 20}, &Imports{}, abi.ToolInput{Data: &in})
		if err != nil {
			t.Fatal(err)
		}
		want := strings.ToUpper(in)
		if out.Status != abi.StatusPassed || out.Data == nil || *out.Data != want || len(out.Metadata) != 1 || out.Metadata[0][0] != "len" {
			t.Fatalf("%q: %+v", in, out)
		}
	}
	t.Logf("component of %d bytes (core %d)", len(comp), len(core))
}
