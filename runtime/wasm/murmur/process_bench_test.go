package murmur

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// BenchmarkDriverOpen is what a run pays to start its process driver: an instance held
// for the run and its first call, for a core module and the same driver as a component
// (docs/benchmarks.md "Process drivers"; target: ≤ 5 ms mean).
func BenchmarkDriverOpen(b *testing.B) {
	for _, form := range procDriverForms {
		b.Run(form.name, func(b *testing.B) {
			e, _ := newEngine(b)
			mod := compileProcDriver(b, e, form.code(b))
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				d := OpenDriver(e, mod, wasm.Grants{MemoryBytes: 64 << 20, Deadline: 30 * time.Second})
				if _, err := d.Describe(ctx); err != nil {
					b.Fatal(err)
				}
				d.Close()
			}
		})
	}
}

// BenchmarkDriverParse is parse on a reused instance, per batch of 1 and 64 stdout
// lines of a streaming harness (target: p95 ≤ 1 ms for 64 lines).
func BenchmarkDriverParse(b *testing.B) {
	for _, form := range procDriverForms {
		b.Run(form.name, func(b *testing.B) { benchmarkDriverParse(b, form.code(b)) })
	}
}

func benchmarkDriverParse(b *testing.B, code []byte) {
	e, _ := newEngine(b)
	mod := compileProcDriver(b, e, code)
	ctx := context.Background()
	d := OpenDriver(e, mod, wasm.Grants{MemoryBytes: 64 << 20, Deadline: 30 * time.Second})
	defer d.Close()
	if _, _, err := d.Launch(ctx, abi.LaunchRequest{SessionID: "s", Task: "t"}); err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 64} {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = fmt.Sprintf("text-delta %s", strings.Repeat("word ", 12))
		}
		b.Run(fmt.Sprintf("lines=%d", n), func(b *testing.B) {
			var durs []time.Duration
			for b.Loop() {
				start := time.Now()
				events, err := d.Parse(ctx, lines)
				durs = append(durs, time.Since(start))
				if err != nil || len(events) != n {
					b.Fatalf("%d events, %v", len(events), err)
				}
			}
			slices.Sort(durs)
			q := func(p float64) float64 { return float64(durs[int(p*float64(len(durs)-1))].Nanoseconds()) / 1e3 }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.95), "p95-µs")
		})
	}
}
