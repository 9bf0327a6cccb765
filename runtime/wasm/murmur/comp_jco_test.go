package murmur

import (
	"context"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestJcoAdapterComponent runs a Go wasip1 tool (internal/testkit/testguests/benchtool) made
// into a component by the real `jco new --wasi-reactor` (wit-component and the preview1
// reactor adapter jco ships) on the Engine: it compiles as a tool and answers like the
// core module does.
func TestJcoAdapterComponent(t *testing.T) {
	core := guestbuild.Wasm(t, "../../../internal/testkit/testguests/benchtool")
	comp := watbuild.Component(t, core, watbuild.RunOnlyWIT(t, "../../../wit/murmur-tool-0.1.0.wit", "tool-component"), "tool-component")
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := Compile(ctx, e, "cap", "benchtool", manifest.RoleTool, comp)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, string(manifest.RoleTool)); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{"hello component", ""} {
		out, err := CallTool(ctx, e, mod, wasm.Grants{MemoryBytes: 64 << 20}, &Imports{}, abi.ToolInput{Data: &in})
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
