package a2a

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads and writes W3C trace context (traceparent, tracestate): the one
// propagation format of the gateway (docs/reference/a2a.md "Trace context").
var traceContext = propagation.TraceContext{}

// Attribute keys of the A2A server span (docs/reference/a2a.md "Trace context").
const (
	attrMethod   = "a2a.method.name"
	attrTaskID   = "a2a.task.id"
	attrState    = "a2a.task.state"
	attrProtocol = "a2a.protocol.version"
	attrContext  = "gen_ai.conversation.id"
)

// setTracer makes the tracer of tp the requests' (nil: tracing off).
func (h *Handler) setTracer(tp trace.TracerProvider) {
	if tp == nil {
		h.tracer.Store(nil)
		return
	}
	t := tp.Tracer("github.com/capsulegate/capsulegate/a2a")
	h.tracer.Store(&t)
}

// noEnd is what traceCall returns with tracing off.
func noEnd() {}

// traceCall starts the server span of one A2A operation, named as the client called
// the method, and puts it in a.r's context. Its parent is the span already in the
// request's context (Caddy's, when its tracing directive is on), else the request's
// traceparent header. The returned func ends it. With tracing off it does nothing.
func (h *Handler) traceCall(a *answer, name string) func() {
	tracer := h.tracer.Load()
	if tracer == nil {
		return noEnd
	}
	ctx := a.r.Context()
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(a.r.Header))
	}
	ctx, span := (*tracer).Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(attrMethod, name), attribute.String(attrProtocol, a.d.String())))
	a.r = a.r.WithContext(ctx)
	return func() { span.End() }
}

// traceTask names the task on the request's span.
func traceTask(r *http.Request, id, contextID, state string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String(attrTaskID, id), attribute.String(attrContext, contextID))
	if state != "" {
		span.SetAttributes(attribute.String(attrState, state))
		if state == stateFailed || state == stateRejected {
			span.SetStatus(codes.Error, "task "+state)
		}
	}
}

// taskParent is the span context a new task runs under: the message's own
// traceparent (its metadata) when it carries one, else the request's span; none with
// tracing off.
func (h *Handler) taskParent(ctx context.Context, in incoming) trace.SpanContext {
	if h.tracer.Load() == nil {
		return trace.SpanContext{}
	}
	if in.traceparent != "" {
		carrier := propagation.MapCarrier{"traceparent": in.traceparent}
		if in.tracestate != "" {
			carrier["tracestate"] = in.tracestate
		}
		if sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), carrier)); sc.IsValid() {
			return sc
		}
	}
	return trace.SpanContextFromContext(ctx)
}
