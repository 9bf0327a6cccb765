package wasm

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"

	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
)

// callHeavy is one million calls of an empty function from a loop: the worst case for
// checks at function entries and loop headers.
var callHeavy = wasmtest.Module{Funcs: []wasmtest.Func{
	{Body: wasmtest.Nop}, // 0: the leaf
	{Export: "work", Locals: 1, Body: wasmtest.CallLoop(0, 1_000_000)},
}}

// BenchmarkDeadlineCost measures what deadline enforcement costs a call-heavy guest, in
// one run: the module as it is on a plain runtime (no deadline enforced), the module with
// the interrupt checks and an armed flag under a deadline (what the engine does), and the
// module as it is on a runtime with WithCloseOnContextDone under the same deadline (what
// the engine did before). The three run in turn, three rounds, so that a shared machine's
// drifting load touches them alike: compare ratios within a round.
func BenchmarkDeadlineCost(b *testing.B) {
	plain := callHeavy.Encode()
	checked, _, err := addInterrupts(plain)
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name     string
		wasm     []byte
		close    bool
		deadline bool
	}{
		{"none", plain, false, false},
		{"interrupt", checked, false, true},
		{"closeondone", plain, true, true},
	}
	for round := range 3 {
		for _, tc := range cases {
			benchDeadlineCase(b, fmt.Sprintf("round%d/%s", round, tc.name), tc.wasm, tc.close, tc.deadline)
		}
	}
}

func benchDeadlineCase(b *testing.B, name string, wasm []byte, closeOnDone, deadline bool) {
	b.Run(name, func(b *testing.B) {
		ctx := context.Background()
		rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(closeOnDone))
		defer rt.Close(ctx)
		m, err := rt.Instantiate(ctx, wasm)
		if err != nil {
			b.Fatal(err)
		}
		work := m.ExportedFunction("work")
		cctx := ctx
		if deadline {
			var cancel context.CancelFunc
			cctx, cancel = context.WithTimeout(ctx, time.Hour)
			defer cancel()
		}
		disarm := newInterrupter(m).arm(cctx) // nil interrupter for the plain module: a no-op
		defer disarm()
		for b.Loop() {
			if _, err := work.Call(cctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDeadlineOvershoot measures how late a guest that runs past its deadline is
// stopped: each op is one engine call of a guest that never ends (a loop without calls,
// or a loop of calls), under a parent context whose deadline is 2 ms away; the overshoot
// is the time from that deadline to the call's return. It reports the median, p99 and
// maximum over all ops. The closeondone cases run the same module, unrewritten, on the
// engine's fallback runtime (wazero's close-on-context-done), for comparison.
func BenchmarkDeadlineOvershoot(b *testing.B) {
	endless := wasmtest.Module{Funcs: []wasmtest.Func{
		{Body: wasmtest.Nop},
		{Export: "spin", Body: wasmtest.Spin},
		{Export: "calls", Locals: 1, Body: wasmtest.CallLoop(0, 1<<31-1)},
	}}.Encode()
	for _, tc := range []struct {
		export   string
		fallback bool
	}{{"spin", false}, {"calls", false}, {"spin", true}, {"calls", true}} {
		name := tc.export + "/interrupt"
		if tc.fallback {
			name = tc.export + "/closeondone"
		}
		b.Run(name, func(b *testing.B) {
			bg := context.Background()
			e, err := NewEngine(bg, WithHost(testHost))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(bg)
			mod, err := e.Compile(bg, "bench", "endless", "tool", nil, endless)
			if err != nil {
				b.Fatal(err)
			}
			if tc.fallback {
				rt, err := e.fallbackRuntime(bg)
				if err != nil {
					b.Fatal(err)
				}
				cm, err := rt.CompileModule(bg, endless)
				if err != nil {
					b.Fatal(err)
				}
				mod = &Module{Capsule: "bench", Artifact: "endless", Role: "tool", compiled: newCompiled(cm, rt)}
			}
			var over []time.Duration
			for b.Loop() {
				deadline := time.Now().Add(2 * time.Millisecond)
				ctx, cancel := context.WithDeadline(bg, deadline)
				err := e.Call(ctx, mod, Grants{MemoryBytes: 1 << 20}, func(ctx context.Context, inst *Instance) error {
					_, err := inst.ExportedFunction(tc.export).Call(ctx)
					return err
				})
				over = append(over, time.Since(deadline))
				cancel()
				if ge, ok := err.(*GuestError); !ok || ge.Reason != ReasonDeadline {
					b.Fatalf("want a deadline, got %v", err)
				}
			}
			slices.Sort(over)
			q := func(p float64) float64 { return float64(over[int(p*float64(len(over)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(q(1), "max-µs")
		})
	}
}
