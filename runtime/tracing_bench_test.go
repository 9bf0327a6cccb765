package runtime

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// discard is a span exporter that drops what it is given: the cost measured is making
// and batching spans, not a receiver's.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkScriptTaskTracing runs the gateway test script capsule's tasks (one echo
// each: the guest call, its tool invoke, the task's records) in one context, with
// tracing off, on with every trace sampled, and on with 1 % sampled; each task comes
// with a caller span context, as an A2A request's does, unsampled for the ratio to
// decide (a caller that samples decides for it).
func BenchmarkScriptTaskTracing(b *testing.B) {
	for _, tt := range []struct {
		name     string
		sampling float64 // < 0: tracing off
	}{{"off", -1}, {"on-1.0", 1}, {"on-0.01", 0.01}} {
		b.Run(tt.name, func(b *testing.B) {
			e, _ := newRuntime(b, wasm.WithCacheDir(guestbuild.WazeroCache()))
			var opts ServeOptions
			if tt.sampling >= 0 {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(discard{}),
					sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tt.sampling))))
				b.Cleanup(func() { tp.Shutdown(context.Background()) })
				opts.Session.Tracer = tp
			}
			h := hostGatewayCapsuleWith(b, e, "", opts)
			defer h.Close()
			i := 0
			for b.Loop() {
				i++
				var parent trace.SpanContext
				if tt.sampling >= 0 {
					var tid trace.TraceID
					copy(tid[:], fmt.Sprintf("%016d", i))
					parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, Remote: true})
				}
				out := h.RunTask(context.Background(), TaskRequest{ContextID: "bench", Text: "hello", Trace: parent})
				if out.State != StateCompleted {
					b.Fatalf("task %+v", out)
				}
			}
		})
	}
}
