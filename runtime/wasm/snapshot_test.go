package wasm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestInitSnapshots calls a Go guest repeatedly with init snapshots on and off: every call
// is a fresh instance (its call counter is 1), state computed by package initialisation
// survives into the snapshot, and the environment the guest saw at init is the one of
// its own grants — a different environment gets its own snapshot.
func TestInitSnapshots(t *testing.T) {
	ctx := context.Background()
	wasm := guestbuild.Wasm(t, "../../internal/testkit/testguests/counter")
	for _, tt := range []struct {
		name string
		opts []EngineOption
		snap bool
	}{
		{"snapshots, fresh instances", []EngineOption{WithoutInstanceReuse()}, true},
		{"initialize every call", []EngineOption{WithoutInitSnapshots()}, false},
		{"warm instances (the default)", nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, append([]EngineOption{WithCacheDir(guestbuild.WazeroCache())}, tt.opts...)...)
			mod, err := e.Compile(ctx, "c", "counter", "tool", nil, wasm)
			if err != nil {
				t.Fatal(err)
			}
			if got := mod.snapGlobals > 0; got != tt.snap {
				t.Fatalf("snapshot globals exported: %v (%d)", got, mod.snapGlobals)
			}
			for i, env := range []string{"a", "a", "b", "a", "b"} {
				g := Grants{Env: []string{"SNAP_TEST=" + env}, MemoryBytes: 128 << 20}
				out, err := callTool(ctx, e, mod, g, abi.ToolInput{})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				want := "calls=1 init-env=" + env + " env=" + env + " table[31]=961"
				if got := deref(out.Data); got != want {
					t.Fatalf("call %d (env %s) = %q, want %q", i, env, got, want)
				}
			}
			mod.snaps.mu.Lock()
			n := len(mod.snaps.byKey)
			mod.snaps.mu.Unlock()
			if want := map[bool]int{true: 2, false: 0}[tt.snap]; n != want {
				t.Errorf("%d snapshots kept, want %d", n, want)
			}
			mod.warm.mu.Lock()
			warm := 0
			for _, l := range mod.warm.byKey {
				warm += len(l)
			}
			mod.warm.mu.Unlock()
			if reuse := e.reuse; (warm > 0) != reuse {
				t.Errorf("%d warm instances kept with reuse %v", warm, reuse)
			}
		})
	}
}

// FuzzExportGlobals feeds the global-exporting rewrite arbitrary bytes (modules come from
// registries, so their encoding is hostile): it never panics, leaves what it cannot parse
// untouched, and what it rewrites still has the header and grows only by the exports.
func FuzzExportGlobals(f *testing.F) {
	f.Add(guestbuild.Wasm(f, "../../internal/testkit/testguests/counter"))
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

// TestWarmInstanceLimits runs a guest on warm instances: a call that sleeps past its
// deadline is stopped by that call's deadline (not the first call's), a call that fails
// does not return its instance to the pool, and the next call is served.
func TestWarmInstanceLimits(t *testing.T) {
	ctx := context.Background()
	e, _ := newEngine(t, WithCacheDir(guestbuild.WazeroCache()))
	mod, err := e.Compile(ctx, "c", "spin", "tool", nil, guestbuild.Wasm(t, "../../internal/testkit/testguests/hostile-spin"))
	if err != nil {
		t.Fatal(err)
	}
	call := func(data string, deadline time.Duration) error {
		_, err := callTool(ctx, e, mod, Grants{MemoryBytes: 128 << 20, Deadline: deadline}, abi.ToolInput{Data: &data})
		return err
	}
	warm := func() int {
		mod.warm.mu.Lock()
		defer mod.warm.mu.Unlock()
		n := 0
		for _, l := range mod.warm.byKey {
			n += len(l)
		}
		return n
	}
	for i := range 3 { // snapshot, then warm instances
		if err := call("hi", time.Minute); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if warm() != 1 {
		t.Fatalf("%d warm instances after clean calls, want 1", warm())
	}
	var ge *GuestError
	if err := call("sleep 60", 200*time.Millisecond); !errors.As(err, &ge) || ge.Reason != ReasonDeadline {
		t.Fatalf("sleep past the deadline on a warm instance: %v", err)
	}
	if err := call("spin", 200*time.Millisecond); !errors.As(err, &ge) || ge.Reason != ReasonDeadline {
		t.Fatalf("spin past the deadline: %v", err)
	}
	if warm() != 0 {
		t.Errorf("%d warm instances kept after failed calls", warm())
	}
	if err := call("hi", time.Minute); err != nil {
		t.Fatalf("call after failures: %v", err)
	}
}
