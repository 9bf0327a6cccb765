package otlptest_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
)

// TestOTelSDKExporter: what the OpenTelemetry SDK's OTLP/HTTP exporter sends, the
// receiver reads — two independent readings of the same published protocol agree.
func TestOTelSDKExporter(t *testing.T) {
	tests := []struct {
		name string
		opts []otlptracehttp.Option
	}{
		{"protobuf", nil},
		{"gzip", []otlptracehttp.Option{otlptracehttp.WithCompression(otlptracehttp.GzipCompression)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := otlptest.Start(t)
			ctx := context.Background()
			exp, err := otlptracehttp.New(ctx, append([]otlptracehttp.Option{
				otlptracehttp.WithEndpointURL(r.URL()),
				otlptracehttp.WithInsecure(),
			}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(
				sdktrace.WithBatcher(exp),
				sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "otlptest"))),
			)
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			tracer := tp.Tracer("capsulegate/otlptest", trace.WithInstrumentationVersion("0.0.1"))

			pctx, parent := tracer.Start(ctx, "a2a.message", trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(
					attribute.String("capsule", "echo"),
					attribute.Int64("turns", 3),
					attribute.Bool("stream", true),
					attribute.Float64("ratio", 0.25),
					attribute.StringSlice("tools", []string{"grep", "cat"}),
				))
			_, child := tracer.Start(pctx, "tool.call", trace.WithAttributes(attribute.String("tool", "grep")))
			child.AddEvent("retry", trace.WithAttributes(attribute.Int("attempt", 2)))
			child.SetStatus(codes.Error, "exit 2")
			child.End()
			parent.End()
			if err := tp.ForceFlush(ctx); err != nil {
				t.Fatalf("ForceFlush: %v", err)
			}

			spans := r.WaitFor(t, 10*time.Second, func(s []otlptest.Span) bool { return len(s) >= 2 })
			if err := r.Err(); err != nil {
				t.Fatalf("receiver refused a request: %v", err)
			}
			if len(spans) != 2 {
				t.Fatalf("got %d spans, want 2: %v", len(spans), spans)
			}
			ps, cs := otlptest.ByName(spans, "a2a.message"), otlptest.ByName(spans, "tool.call")
			if len(ps) != 1 || len(cs) != 1 {
				t.Fatalf("spans by name: %v", spans)
			}
			p, c := ps[0], cs[0]

			psc, csc := parent.SpanContext(), child.SpanContext()
			if p.TraceID != psc.TraceID().String() || p.SpanID != psc.SpanID().String() || p.ParentSpanID != "" {
				t.Errorf("parent ids %s/%s/%q, want %s/%s/\"\"", p.TraceID, p.SpanID, p.ParentSpanID, psc.TraceID(), psc.SpanID())
			}
			if c.TraceID != p.TraceID || c.SpanID != csc.SpanID().String() || c.ParentSpanID != p.SpanID {
				t.Errorf("child ids %s/%s parent %s, want %s/%s parent %s", c.TraceID, c.SpanID, c.ParentSpanID, p.TraceID, csc.SpanID(), p.SpanID)
			}
			if kids := otlptest.Children(spans, p); len(kids) != 1 || kids[0].Name != "tool.call" {
				t.Errorf("Children(parent) = %v", kids)
			}
			if p.Kind != 2 || c.Kind != 1 {
				t.Errorf("kinds %d, %d; want 2 (server), 1 (internal)", p.Kind, c.Kind)
			}
			if p.Str("capsule") != "echo" || p.Int("turns") != 3 || p.Attrs["stream"] != true || p.Attrs["ratio"] != 0.25 {
				t.Errorf("parent attributes %v", p.Attrs)
			}
			if tools, _ := p.Attrs["tools"].([]any); len(tools) != 2 || tools[0] != "grep" || tools[1] != "cat" {
				t.Errorf("tools attribute %#v", p.Attrs["tools"])
			}
			if c.Str("tool") != "grep" {
				t.Errorf("child attributes %v", c.Attrs)
			}
			if len(c.Events) != 1 || c.Events[0].Name != "retry" || c.Events[0].Attrs["attempt"] != int64(2) || c.Events[0].Time.IsZero() {
				t.Errorf("child events %v", c.Events)
			}
			if c.StatusCode != 2 || c.StatusMessage != "exit 2" || p.StatusCode != 0 {
				t.Errorf("statuses: child %d %q, parent %d", c.StatusCode, c.StatusMessage, p.StatusCode)
			}
			if c.Start.IsZero() || c.End.Before(c.Start) || p.Start.After(c.Start) || p.End.Before(c.End) {
				t.Errorf("times: parent %v..%v, child %v..%v", p.Start, p.End, c.Start, c.End)
			}
			if p.Scope != "capsulegate/otlptest" || p.Resource["service.name"] != "otlptest" {
				t.Errorf("scope %q, resource %v", p.Scope, p.Resource)
			}
		})
	}
}
