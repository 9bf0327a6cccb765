package wasm

import (
	"context"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestTinyToolKeptWarm: the hand-written tiny tool guest (internal/testkit/testguests/tinytool)
// takes the engine's fast paths like a Go guest — its data becomes a memory image, its
// mutable global is snapshotted — so with reuse on its second call runs on a warm
// instance, which the runtime benchmark's "warm" case relies on, with the exported
// functions it looked up before.
func TestTinyToolKeptWarm(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	mod, err := e.Compile(ctx, "tiny", "tinytool", "tool", nil, watbuild.Wasm(t, "../../internal/testkit/testguests/tinytool/tinytool.wat"))
	if err != nil {
		t.Fatal(err)
	}
	if imagesSupported && mod.snapGlobals == 0 {
		t.Fatal("no mutable global exported for snapshots")
	}
	g := Grants{MemoryBytes: 16 << 20}
	data := "warm"
	for i := range 3 {
		out, err := callTool(ctx, e, mod, g, abi.ToolInput{Data: &data})
		if err != nil || out.Data == nil || *out.Data != "WARM" {
			t.Fatalf("call %d: %+v, %v", i, out, err)
		}
		if !imagesSupported {
			continue
		}
		mod.warm.mu.Lock()
		kept, cached := 0, 0
		for _, l := range mod.warm.byKey {
			kept += len(l)
			for _, w := range l {
				cached += len(w.fns.byName)
			}
		}
		mod.warm.mu.Unlock()
		// The first call runs _initialize and takes the snapshot; from the second on an
		// instance started from it is kept, and the third runs on it.
		if want := min(i, 1); kept != want {
			t.Fatalf("after call %d, %d warm instances kept, want %d", i, kept, want)
		}
		// The warm instance keeps run, cabi_realloc and cabi_post, so later calls do not
		// build new wazero call engines for them.
		if want := min(i, 1) * 3; cached != want {
			t.Fatalf("after call %d, %d functions cached, want %d", i, cached, want)
		}
	}
}
