package runtime

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// BenchmarkTinyToolCall is BenchmarkToolCall's full call — staged module, a session's
// grants, CallTool with metrics — for the tiny tool guest written in the wasm text format
// (internal/testkit/testguests/tinytool) instead of a Go guest. "fresh" instantiates per call
// (wasm.WithoutInstanceReuse; instances start from the init snapshot); "warm" resets a
// kept instance (the default). Besides ns/op it reports the median and 99th percentile of
// the per-call wall times, in µs; issue 14's target is a warm p50 of at most 100 µs.
func BenchmarkTinyToolCall(b *testing.B) {
	for _, mode := range tinyModes {
		b.Run(mode.name, func(b *testing.B) {
			rig := newTinyRig(b, mode.opts...)
			in := abi.ToolInput{Data: strp(benchInput)}
			want := strings.ToUpper(benchInput)
			// Warm up outside the timing: the first call runs _initialize and takes the
			// snapshot, the second leaves an instance warm.
			for range 2 {
				if _, err := rig.call(in); err != nil {
					b.Fatal(err)
				}
			}
			durs := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				out, err := rig.call(in)
				durs = append(durs, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				checkBenchResult(b, out.Data, out.Metadata)
				if *out.Data != want {
					b.Fatalf("data %q", *out.Data)
				}
			}
			b.StopTimer()
			slices.Sort(durs)
			b.ReportMetric(percentileMicros(durs, 50), "p50-µs")
			b.ReportMetric(percentileMicros(durs, 99), "p99-µs")
		})
	}
}

// percentileMicros returns the p-th percentile (nearest rank) of sorted, in µs.
func percentileMicros(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	i = min(max(i, 1), len(sorted)) - 1
	return float64(sorted[i]) / float64(time.Microsecond)
}
