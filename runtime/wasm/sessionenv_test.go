package wasm

import (
	"context"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestPerSessionEnv calls a Go guest as sessions with their own per-session value: long
// values of one length share one snapshot and every call still sees its own value, both
// read at init and later; a short value keys its own snapshot as any variable does.
func TestPerSessionEnv(t *testing.T) {
	ctx := context.Background()
	wasm := guestbuild.Wasm(t, "../../internal/testkit/testguests/counter")
	const (
		a = "ses_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		b = "ses_bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
		c = "ses_cccccccccccccccccccccccccccccccc"
	)
	for _, tt := range []struct {
		name  string
		opts  []EngineOption
		vals  []string
		snaps int
	}{
		{"one length, one snapshot", nil, []string{a, b, a, c, b}, 1},
		{"warm instances", []EngineOption{WithInstanceReuse()}, []string{a, b, a, c, b}, 1},
		{"other lengths, own snapshots", nil, []string{a, "ses_dddddddddddddddddd", a}, 2},
		{"short values key the snapshot", nil, []string{"x", "y", "x"}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, append([]EngineOption{WithCacheDir(guestbuild.WazeroCache())}, tt.opts...)...)
			mod, err := e.Compile(ctx, "c", "counter", "tool", nil, wasm)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range tt.vals {
				g := Grants{Env: []string{"OTHER=1", "SNAP_TEST=" + v}, PerSession: []string{"SNAP_TEST"}, MemoryBytes: 128 << 20}
				out, err := callTool(ctx, e, mod, g, abi.ToolInput{})
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				want := "calls=1 init-env=" + v + " env=" + v + " table[31]=961"
				if got := deref(out.Data); got != want {
					t.Fatalf("call %d = %q, want %q", i, got, want)
				}
			}
			mod.snaps.mu.Lock()
			n := len(mod.snaps.byKey)
			mod.snaps.mu.Unlock()
			if n != tt.snaps {
				t.Errorf("%d snapshots kept, want %d", n, tt.snaps)
			}
		})
	}
}
