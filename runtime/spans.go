package runtime

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// SemconvVersion is the version of the OpenTelemetry GenAI semantic conventions the
// spans follow (development status; docs/reference/trace.md "OpenTelemetry").
const SemconvVersion = "1.37.0"

// spanSink turns a session's events into OpenTelemetry spans in the GenAI semantic
// conventions: one sink of the stream like any other, so the loop never touches a span.
// Events arrive when what they record has ended, so a span is made with the event's
// time as its end and its duration before it as its start; a task's span, started at
// task_start and ended at task_end, is the parent of the spans of its turns, tools,
// shell commands, hooks and compactions.
type spanSink struct {
	tracer   trace.Tracer
	capsule  string
	model    string
	provider string // gen_ai.provider.name of the capsule's driver

	mu sync.Mutex
	// spans are the parents of later spans by event id: each running task's span, and
	// its current turn's (a chat span, or a harness's turn-started standing for the task's).
	spans map[string]trace.Span
	task  map[string]string // a turn's event id → its task's event id; one turn per task
}

// turnLocked makes turn (an event id) the current turn of task, forgetting its last.
func (s *spanSink) turnLocked(turn, task string, sp trace.Span) {
	for old, t := range s.task {
		if t == task {
			delete(s.spans, old)
			delete(s.task, old)
		}
	}
	s.spans[turn], s.task[turn] = sp, task
}

func newSpanSink(tp trace.TracerProvider, s *Staged) *spanSink {
	m := s.Manifest
	sink := &spanSink{tracer: tp.Tracer("github.com/capsulegate/capsulegate/runtime"), capsule: m.Name, spans: map[string]trace.Span{}, task: map[string]string{}}
	if m.Inference != nil { // a script capsule has none
		sink.model, sink.provider = m.Inference.Model, providerName(m.Inference.Driver.Artifact)
	}
	return sink
}

// providerName is gen_ai.provider.name for a driver artifact: the known drivers' provider,
// else the artifact's name.
func providerName(driver string) string {
	switch driver {
	case "anthropic-messages", "claude-code":
		return "anthropic"
	case "openai-chat", "codex":
		return "openai"
	}
	return driver
}

// parentCtx is the context a span under the event parent starts in.
func (s *spanSink) parentCtx(parent string) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.spans[parent]; ok {
		return trace.ContextWithSpan(context.Background(), sp)
	}
	return context.Background()
}

// ended makes a span of what ran for d until at, under parent.
func (s *spanSink) ended(parent, name string, at time.Time, d time.Duration, kind trace.SpanKind, attrs ...attribute.KeyValue) trace.Span {
	_, sp := s.tracer.Start(s.parentCtx(parent), name, trace.WithTimestamp(at.Add(-d)), trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return sp
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func (s *spanSink) Event(e *Event) error {
	switch d := e.Data.(type) {
	case TaskStart:
		ctx := context.Background()
		if d.parent.IsValid() {
			ctx = trace.ContextWithRemoteSpanContext(ctx, d.parent)
		}
		_, sp := s.tracer.Start(ctx, "invoke_agent "+s.capsule, trace.WithTimestamp(e.Time), trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.name", s.capsule),
				attribute.String("gen_ai.conversation.id", d.ContextID), attribute.String("a2a.task.id", d.TaskID)))
		s.mu.Lock()
		s.spans[e.ID] = sp
		s.mu.Unlock()
	case TaskEnd:
		s.mu.Lock()
		sp := s.spans[e.ParentID]
		delete(s.spans, e.ParentID)
		for turn, task := range s.task { // its one current turn
			if task == e.ParentID {
				delete(s.spans, turn)
				delete(s.task, turn)
			}
		}
		s.mu.Unlock()
		if sp != nil {
			sp.SetAttributes(attribute.String("a2a.task.state", d.State))
			if rc := d.receipt; rc != nil {
				// The receipt's totals (the receipt sink, ahead in the stream, has
				// completed it): what the trace says the task cost.
				sp.SetAttributes(receiptAttrs(*rc)...)
			}
			if d.State != StateCompleted {
				sp.SetStatus(codes.Error, d.State)
			}
			sp.End(trace.WithTimestamp(e.Time))
		}
	case Inference:
		sp := s.ended(e.ParentID, "chat "+s.model, e.Time, ms(d.DurationMS), trace.SpanKindClient,
			attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", s.provider),
			attribute.String("gen_ai.request.model", s.model), attribute.Int("gen_ai.usage.input_tokens", d.InputTokens),
			attribute.Int("gen_ai.usage.output_tokens", d.OutputTokens), attribute.StringSlice("gen_ai.response.finish_reasons", []string{d.StopReason}))
		if d.Error != "" {
			sp.SetStatus(codes.Error, d.Error)
		}
		sp.End(trace.WithTimestamp(e.Time))
		s.mu.Lock()
		s.turnLocked(e.ID, e.ParentID, sp)
		s.mu.Unlock()
	case HarnessEvent:
		// A process capsule's one turn: what the harness does through the bridge hangs
		// under it, and so under the task's span.
		if d.Case == "turn-started" {
			s.mu.Lock()
			if task, ok := s.spans[e.ParentID]; ok {
				s.turnLocked(e.ID, e.ParentID, task)
			}
			s.mu.Unlock()
		}
	case ToolCall:
		sp := s.ended(e.ParentID, "execute_tool "+d.ToolName, e.Time, ms(d.DurationMS), trace.SpanKindInternal,
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", d.ToolName),
			attribute.String("gen_ai.tool.type", "function"), attribute.String("capsule.tool.kind", d.Kind))
		if d.CallID != "" {
			sp.SetAttributes(attribute.String("gen_ai.tool.call.id", d.CallID))
		}
		if d.Origin != "" {
			sp.SetAttributes(attribute.String("capsule.tool.origin", d.Origin))
		}
		if d.Trap != "" {
			sp.AddEvent("trap", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("reason", d.Trap)))
		}
		if d.Status != "passed" {
			sp.SetStatus(codes.Error, d.Status)
		}
		sp.End(trace.WithTimestamp(e.Time))
	case ShellRun:
		sp := s.ended(e.ParentID, "shell "+d.Binary, e.Time, ms(d.DurationMS), trace.SpanKindInternal,
			attribute.String("process.executable.name", d.Binary), attribute.Int("process.exit.code", d.ExitCode), attribute.Int64("capsule.shell.bytes", d.Bytes))
		if d.ExitCode != 0 {
			sp.SetStatus(codes.Error, "exit code")
		}
		sp.End(trace.WithTimestamp(e.Time))
	case HookCall:
		sp := s.ended(e.ParentID, "hook "+d.Hook, e.Time, ms(d.DurationMS), trace.SpanKindInternal,
			attribute.String("capsule.hook.name", d.Hook), attribute.String("capsule.hook.binding", d.Binding), attribute.String("capsule.hook.output", d.Output),
			attribute.Bool("capsule.hook.honoured", d.Honoured))
		if d.Error != "" {
			sp.SetStatus(codes.Error, d.Error)
		}
		sp.End(trace.WithTimestamp(e.Time))
	case Compaction:
		sp := s.ended(e.ParentID, "compaction "+s.capsule, e.Time, ms(d.DurationMS), trace.SpanKindInternal,
			attribute.Int("capsule.compaction.tokens_before", d.TokensBefore), attribute.Int("capsule.compaction.tokens_after", d.TokensAfter),
			attribute.String("capsule.compaction.summariser", d.Summariser))
		if d.Summariser == SummariserDriver {
			// The summary is a model call: its tokens count in the task's totals.
			sp.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", d.SummaryInput), attribute.Int("gen_ai.usage.output_tokens", d.SummaryOutput))
		}
		sp.End(trace.WithTimestamp(e.Time))
	case ArtifactCall:
		sp := s.ended(e.ParentID, "artifact_manager "+d.Op, e.Time, ms(d.DurationMS), trace.SpanKindInternal,
			attribute.String("capsule.artifact.op", d.Op), attribute.String("capsule.artifact.name", d.Name), attribute.String("capsule.artifact.status", d.Status))
		if d.Status != "ok" {
			sp.SetStatus(codes.Error, d.Error)
		}
		sp.End(trace.WithTimestamp(e.Time))
	case PeerCall:
		// The message to a peer, naming both tasks: the peer's spans, in the same trace,
		// hang under the sending task's.
		sp := s.ended(e.ParentID, "send_message "+d.Peer, e.Time, ms(d.DurationMS), trace.SpanKindClient,
			attribute.String("a2a.task.id", d.TaskID), attribute.String("capsule.peer.name", d.Peer), attribute.String("capsule.peer.url", d.URL),
			attribute.String("capsule.peer.task.id", d.PeerTaskID), attribute.String("capsule.peer.task.state", d.PeerState),
			attribute.Int("capsule.peer.depth", d.Depth), attribute.String("capsule.peer.from", d.From))
		if d.Status != statusPassed {
			sp.SetStatus(codes.Error, d.Error)
		}
		sp.End(trace.WithTimestamp(e.Time))
	case NetworkDenied:
		// A denial is an event of its task's span, still open (a turn's has ended).
		s.mu.Lock()
		id := e.ParentID
		if task, ok := s.task[id]; ok {
			id = task
		}
		sp := s.spans[id]
		s.mu.Unlock()
		if sp != nil {
			sp.AddEvent("network_denied", trace.WithTimestamp(e.Time), trace.WithAttributes(attribute.String("who", d.Who),
				attribute.String("host", d.Host), attribute.Int("port", d.Port), attribute.String("rule_check", d.Check)))
		}
	}
	return nil
}

// contextOf is the span context of the task whose task_start event is evt (invalid
// when there is none).
func (s *spanSink) contextOf(evt string) trace.SpanContext {
	if s == nil {
		return trace.SpanContext{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.spans[evt]; ok {
		return sp.SpanContext()
	}
	return trace.SpanContext{}
}

// receiptAttrs are a task receipt's totals as attributes of its invoke_agent span
// (docs/reference/receipts.md "In the trace").
func receiptAttrs(rc Receipt) []attribute.KeyValue {
	in, out := 0, 0
	for _, t := range rc.Tokens {
		in, out = in+t.Input, out+t.Output
	}
	tools, traps := 0, 0
	for _, n := range rc.ToolCalls {
		tools += n
	}
	for _, n := range rc.Traps {
		traps += n
	}
	return []attribute.KeyValue{attribute.Int("gen_ai.usage.input_tokens", in), attribute.Int("gen_ai.usage.output_tokens", out),
		attribute.Float64("capsule.task.wall_seconds", rc.WallSeconds), attribute.Float64("capsule.task.guest_seconds", rc.GuestSeconds),
		attribute.Int64("capsule.task.peak_guest_memory_bytes", int64(rc.PeakGuestMemoryBytes)), attribute.Int("capsule.task.tool_calls", tools),
		attribute.Int64("capsule.task.network_bytes_sent", rc.NetworkBytesSent), attribute.Int64("capsule.task.network_bytes_received", rc.NetworkBytesReceived),
		attribute.Int("capsule.task.network_denials", rc.NetworkDenials), attribute.Int("capsule.task.traps", traps)}
}
