package runtime

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestInitSnapshots calls a Go guest repeatedly with init snapshots on and off: every call
// is a fresh instance (its call counter is 1), state computed by package initialisation
// survives into the snapshot, and the environment the guest saw at init is the one of
// its own grants — a different environment gets its own snapshot.
func TestInitSnapshots(t *testing.T) {
	ctx := context.Background()
	wasm := guestbuild.Wasm(t, "../internal/testguests/counter")
	for _, tt := range []struct {
		name string
		opts []EngineOption
		snap bool
	}{
		{"snapshots", nil, true},
		{"initialize every call", []EngineOption{WithoutInitSnapshots()}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, append([]EngineOption{WithCacheDir(filepath.Join(guestbuild.CacheDir(), "wazero"))}, tt.opts...)...)
			mod, err := e.Compile(ctx, "c", "counter", manifest.RoleTool, wasm)
			if err != nil {
				t.Fatal(err)
			}
			if got := mod.snapGlobals > 0; got != tt.snap {
				t.Fatalf("snapshot globals exported: %v (%d)", got, mod.snapGlobals)
			}
			for i, env := range []string{"a", "a", "b", "a", "b"} {
				g := Grants{Env: []string{"SNAP_TEST=" + env}, MemoryBytes: 128 << 20}
				out, err := e.CallTool(ctx, mod, g, &Host{}, abi.ToolInput{})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				want := "calls=1 init-env=" + env + " env=" + env + " table[31]=961"
				if got := value(out.Data); got != want {
					t.Fatalf("call %d (env %s) = %q, want %q", i, env, got, want)
				}
			}
			mod.snaps.mu.Lock()
			n := len(mod.snaps.byKey)
			mod.snaps.mu.Unlock()
			if want := map[bool]int{true: 2, false: 0}[tt.snap]; n != want {
				t.Errorf("%d snapshots kept, want %d", n, want)
			}
		})
	}
}

// FuzzExportGlobals feeds the global-exporting rewrite arbitrary bytes (modules come from
// registries, so their encoding is hostile): it never panics, leaves what it cannot parse
// untouched, and what it rewrites still has the header and grows only by the exports.
func FuzzExportGlobals(f *testing.F) {
	f.Add(guestbuild.Wasm(f, "../internal/testguests/counter"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00"))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x06\x06\x01\x7f\x01\x41\x00\x0b\x07\x01\x00"))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		out, n, ok := exportGlobals(wasm)
		if !ok {
			if string(out) != string(wasm) || n != 0 {
				t.Fatal("an unparsed module was changed")
			}
			return
		}
		if n == 0 || len(out) <= len(wasm) || string(out[:8]) != string(wasm[:8]) {
			t.Fatalf("rewrite: %d globals, %d → %d bytes", n, len(wasm), len(out))
		}
	})
}
