package wasm

import (
	"context"
	"testing"

	"github.com/tetratelabs/wazero"

	"github.com/capsulegate/capsulegate/internal/wasmtest"
)

// BenchmarkCloseOnContextDone measures what deadline enforcement costs a call-heavy
// guest: the same loop of one million calls on a runtime with and without
// WithCloseOnContextDone (which checks at every function entry and loop back-edge).
func BenchmarkCloseOnContextDone(b *testing.B) {
	mod := wasmtest.Module{Funcs: []wasmtest.Func{
		{Body: wasmtest.Nop}, // 0: the leaf
		{Export: "work", Locals: 1, Body: wasmtest.CallLoop(0, 1_000_000)},
	}}.Encode()
	for _, tc := range []struct {
		name  string
		close bool
	}{{"without", false}, {"with", true}} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(tc.close))
			defer rt.Close(ctx)
			m, err := rt.Instantiate(ctx, mod)
			if err != nil {
				b.Fatal(err)
			}
			work := m.ExportedFunction("work")
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := work.Call(cctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
