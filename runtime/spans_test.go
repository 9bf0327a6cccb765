package runtime

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/manifest"
)

// TestAgentSpans: an agent task's spans in the GenAI conventions — invoke_agent under
// the caller's span, a chat span per turn with the cassette's token counts, an
// execute_tool span per call — and the provider's requests carry the task's context.
func TestAgentSpans(t *testing.T) {
	f := newAgentFixture(t, "anthropic-messages", agentCassette, "traceparent")
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+f.srv.URL+`", api_key: "k"}}
  - {name: echo, version: 1.0.0}
inference:
  driver: {artifact: anthropic-messages}
  model: claude-test
  max_turns: 5
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.e.Serve(context.Background(), m, ServeOptions{Registry: f.reg, Session: SessionConfig{WorkRoot: t.TempDir(), Tracer: tp}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	// The caller's span: the A2A request's, as the a2a package hands it on.
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true})
	out := h.RunTask(context.Background(), TaskRequest{ContextID: "c1", TaskID: "task-1", Text: "please echo hi", Trace: parent})
	if out.State != StateCompleted {
		t.Fatalf("outcome %+v", out)
	}
	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		if s.SpanContext.TraceID() != parent.TraceID() {
			t.Errorf("span %s is in trace %s, not the caller's", s.Name, s.SpanContext.TraceID())
		}
	}
	agent := byName["invoke_agent agent"]
	chats := byName["chat claude-test"]
	tools := byName["execute_tool echo"]
	if len(agent) != 1 || len(chats) != 2 || len(tools) != 1 {
		t.Fatalf("spans %v", names(spans))
	}
	if agent[0].Parent.SpanID() != parent.SpanID() {
		t.Errorf("invoke_agent's parent is %s, not the caller's span", agent[0].Parent.SpanID())
	}
	want := [][2]int64{{10, 5}, {20, 6}} // the cassette's usage, turn by turn
	for i, c := range chats {
		if c.Parent.SpanID() != agent[0].SpanContext.SpanID() {
			t.Errorf("chat %d is not under invoke_agent", i)
		}
		at := attrs(c.Attributes)
		if at["gen_ai.usage.input_tokens"].AsInt64() != want[i][0] || at["gen_ai.usage.output_tokens"].AsInt64() != want[i][1] ||
			at["gen_ai.provider.name"].AsString() != "anthropic" || at["gen_ai.request.model"].AsString() != "claude-test" {
			t.Errorf("chat %d attributes %v", i, c.Attributes)
		}
	}
	ta := attrs(tools[0].Attributes)
	if ta["gen_ai.tool.name"].AsString() != "echo" || ta["gen_ai.tool.call.id"].AsString() != "tu_1" || ta["gen_ai.tool.type"].AsString() != "function" {
		t.Errorf("execute_tool attributes %v", tools[0].Attributes)
	}
	// The receipt: the trace's tokens and tool calls, the meters' time, memory and bytes.
	rc := out.Receipt
	if rc == nil {
		t.Fatal("no receipt")
	}
	if rc.TraceID != parent.TraceID().String() || !slices.Equal(rc.Tokens, []ModelTokens{{Model: "claude-test", Input: 30, Output: 11}}) ||
		!maps.Equal(rc.ToolCalls, map[string]int{KindWasm: 1}) || rc.NetworkDenials != 0 || len(rc.Traps) != 0 {
		t.Errorf("receipt %+v", *rc)
	}
	if rc.GuestSeconds <= 0 || rc.GuestSeconds > rc.WallSeconds || rc.PeakGuestMemoryBytes == 0 || rc.NetworkBytesSent <= 0 || rc.NetworkBytesReceived <= 0 {
		t.Errorf("receipt's measured figures %+v", *rc)
	}
	// Each provider request carried the task's trace context.
	for i, tp := range f.headers() {
		if !strings.HasPrefix(tp, "00-"+parent.TraceID().String()+"-"+agent[0].SpanContext.SpanID().String()) {
			t.Errorf("provider request %d traceparent %q", i, tp)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

func attrs(kvs []attribute.KeyValue) map[string]attribute.Value {
	out := map[string]attribute.Value{}
	for _, kv := range kvs {
		out[string(kv.Key)] = kv.Value
	}
	return out
}
