package a2a

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTraceContext: the server span of a request is parented on its traceparent header
// and names the method, task and state; the task runs under the message metadata's
// traceparent when it has one, else under the server span; bad trace context is none.
func TestTraceContext(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	ex := &echoExec{}
	_, srv := newServer(t, Config{Executor: ex, Tracer: tp})

	const (
		headerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		headerSpan  = "00f067aa0ba902b7"
		metaTrace   = "0af7651916cd43dd8448eb211c80319c"
		metaSpan    = "b7ad6b7169203331"
	)
	header := map[string]string{"traceparent": "00-" + headerTrace + "-" + headerSpan + "-01"}
	for _, tt := range []struct {
		name      string
		headers   map[string]string
		metadata  map[string]any
		wantTrace string // of the server span ("" for a trace of its own)
		jobTrace  string // of the job: the metadata's, else the server span's
		jobSpan   string // "" for the server span's own id
	}{
		{"header", header, nil, headerTrace, headerTrace, ""},
		{"metadata parents the task", header, map[string]any{"traceparent": "00-" + metaTrace + "-" + metaSpan + "-01"}, headerTrace, metaTrace, metaSpan},
		{"none", nil, nil, "", "", ""},
		{"malformed", map[string]string{"traceparent": "00-zz-yy-01"}, map[string]any{"traceparent": 7}, "", "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			exp.Reset()
			m := msg03("hi")
			if tt.metadata != nil {
				m["metadata"] = tt.metadata
			}
			task := decode[tObj](t, ok(t, callWith(t, srv, "", "message/send", map[string]any{"message": m}, tt.headers)))
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans", len(spans))
			}
			s := spans[0]
			at := map[string]string{}
			for _, kv := range s.Attributes {
				at[string(kv.Key)] = kv.Value.Emit()
			}
			if s.Name != "message/send" || at["a2a.method.name"] != "message/send" || at["a2a.task.id"] != task.ID || at["a2a.task.state"] != "completed" ||
				at["gen_ai.conversation.id"] != task.ContextID || at["a2a.protocol.version"] != "0.3" {
				t.Fatalf("span %s %v", s.Name, at)
			}
			if tt.wantTrace != "" && (s.SpanContext.TraceID().String() != tt.wantTrace || s.Parent.SpanID().String() != headerSpan) {
				t.Fatalf("server span in %s under %s", s.SpanContext.TraceID(), s.Parent.SpanID())
			}
			if tt.wantTrace == "" && s.Parent.IsValid() {
				t.Fatalf("server span has a parent %s", s.Parent.SpanID())
			}
			jobs := ex.recorded()
			job := jobs[len(jobs)-1]
			wantTrace, wantSpan := tt.jobTrace, tt.jobSpan
			if wantTrace == "" {
				wantTrace = s.SpanContext.TraceID().String()
			}
			if wantSpan == "" {
				wantSpan = s.SpanContext.SpanID().String()
			}
			if job.Trace.TraceID().String() != wantTrace || job.Trace.SpanID().String() != wantSpan {
				t.Fatalf("job trace %s/%s, want %s/%s", job.Trace.TraceID(), job.Trace.SpanID(), wantTrace, wantSpan)
			}
		})
	}
}
