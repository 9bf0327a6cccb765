package murmur

import (
	"context"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// BenchmarkComponent times the stage (Compile on a new engine, in-memory cache) and one
// CallTool of upstream Murmur's echo-tool component against core-module tools: upstream
// has no core-module echo-tool, so the comparison is with this repository's benchtool (a
// Go wasip1 tool: uppercases its input) and tinytool (hand-written wat, the same). A
// component call instantiates its whole graph afresh; core calls are timed fresh (no
// init snapshots) and with the engine's defaults (warm instances). The component's
// cases skip without the upstream mirror ($MURMUR_MIRROR); the core ones run always.
func BenchmarkComponent(b *testing.B) {
	ctx := context.Background()
	guests := []struct {
		name string
		code func(b *testing.B) []byte
	}{
		{"component-echo-tool", func(b *testing.B) []byte { return upstreamFixture(b, "run/components/echo-tool.wasm") }},
		{"core-benchtool", func(b *testing.B) []byte { return guestbuild.Wasm(b, "../../../internal/testkit/testguests/benchtool") }},
		{"core-tinytool", func(b *testing.B) []byte {
			return watbuild.Wasm(b, "../../../internal/testkit/testguests/tinytool/tinytool.wat")
		}},
	}
	for _, gu := range guests {
		b.Run("stage/"+gu.name, func(b *testing.B) {
			code := gu.code(b)
			for b.Loop() {
				b.StopTimer()
				e, err := wasm.NewEngine(ctx)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, err := Compile(ctx, e, "c", gu.name, manifest.RoleTool, code); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				e.Close(ctx)
				b.StartTimer()
			}
		})
		for _, mode := range []struct {
			name string
			opts []wasm.EngineOption
		}{{"fresh", []wasm.EngineOption{wasm.WithoutInitSnapshots()}}, {"default", nil}} {
			b.Run("call-"+mode.name+"/"+gu.name, func(b *testing.B) {
				code := gu.code(b)
				e, err := wasm.NewEngine(ctx, mode.opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close(ctx)
				mod, err := Compile(ctx, e, "c", gu.name, manifest.RoleTool, code)
				if err != nil {
					b.Fatal(err)
				}
				data := "hello"
				g := wasm.Grants{MemoryBytes: 64 << 20}
				for b.Loop() {
					if _, err := CallTool(ctx, e, mod, g, &Imports{}, abi.ToolInput{Data: &data}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
