package e2e

import (
	"encoding/json"
	"maps"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
	"github.com/capsulegate/capsulegate/runtime"
)

// TestTraces: a task of the hello example through the built gateway, exported to a real
// OTLP/HTTP receiver that shares no code with the exporter: the A2A server span, then
// invoke_agent, a chat span per turn with the cassette's token counts and an
// execute_tool span per call, all in one trace parented on the client's traceparent.
// With Caddy's tracing directive on the route, Caddy's own span is the parent of ours.
func TestTraces(t *testing.T) {
	// Parallel: it waits on gateways and an exporter more than it computes, and the
	// package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	rcv := otlptest.Start(t)
	g := launchGatewayWith(t, caddyBin, "", gatewayExtra{
		app: "\t\totel {\n\t\t\tendpoint " + rcv.Endpoint() + "\n\t\t}",
		routes: `	handle_path /traced/* {
		tracing {
			span caddy-route
		}
		capsule examples/capsules/hello/murmur.yaml
	}`,
		// Caddy's tracing module exports on its own, configured from the environment.
		env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + rcv.URL(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_EXPORTER=otlp"},
	})

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentSpan = "00f067aa0ba902b7"
	before := scrape(t, g)
	tk := decodeTask(t, g.call(t, "/agents/hello/", "", "message/send", map[string]any{"message": msg03("count the words: one two three")},
		"traceparent", "00-"+traceID+"-"+parentSpan+"-01"))
	if tk.Status.State != "completed" {
		t.Fatalf("task %+v", tk)
	}
	spans := rcv.WaitFor(t, 30*time.Second, func(s []otlptest.Span) bool {
		return len(otlptest.ByName(s, "invoke_agent hello")) == 1 && len(otlptest.ByName(s, "message/send")) >= 1 && len(otlptest.ByName(s, "chat claude-sonnet-4-5")) == 2
	})
	var server otlptest.Span
	for _, s := range otlptest.ByName(spans, "message/send") {
		if s.TraceID == traceID {
			server = s
		}
	}
	if server.ParentSpanID != parentSpan || server.Str("a2a.method.name") != "message/send" || server.Str("a2a.task.id") != tk.ID ||
		server.Str("a2a.task.state") != "completed" || server.Str("gen_ai.conversation.id") != tk.ContextID || server.Str("a2a.protocol.version") != "0.3" {
		t.Fatalf("the A2A server span: %s", server)
	}
	agent := otlptest.ByName(spans, "invoke_agent hello")[0]
	if agent.TraceID != traceID || agent.ParentSpanID != server.SpanID {
		t.Fatalf("invoke_agent is not under the server span: %s", agent)
	}
	chats := otlptest.Children(spans, agent)
	var usage [][2]int64
	var tools []string
	for _, c := range chats {
		switch {
		case c.Name == "chat claude-sonnet-4-5":
			usage = append(usage, [2]int64{c.Int("gen_ai.usage.input_tokens"), c.Int("gen_ai.usage.output_tokens")})
			if c.Str("gen_ai.provider.name") != "anthropic" || c.Str("gen_ai.operation.name") != "chat" {
				t.Errorf("chat span %s", c)
			}
			for _, tool := range otlptest.Children(spans, c) {
				tools = append(tools, tool.Name+":"+tool.Str("gen_ai.tool.call.id"))
			}
		}
	}
	// The cassette's usage, turn by turn, and its two tool calls after the first turn.
	if len(usage) != 2 || usage[0] != [2]int64{412, 61} || usage[1] != [2]int64{530, 19} {
		t.Fatalf("chat usage %v", usage)
	}
	if len(tools) != 2 || !strings.HasPrefix(tools[0], "execute_tool greeting:") || !strings.HasPrefix(tools[1], "execute_tool wordcount:") {
		t.Fatalf("tool spans under the first turn: %v", tools)
	}
	checkReceiptTotals(t, g, tk, agent, before, usage, len(tools))

	// Behind Caddy's tracing: its span is the parent of the A2A server span.
	tk = decodeTask(t, g.call(t, "/traced/", "", "message/send", map[string]any{"message": msg03("count the words: four five")}))
	spans = rcv.WaitFor(t, 30*time.Second, func(s []otlptest.Span) bool {
		for _, sp := range otlptest.ByName(s, "message/send") {
			if sp.Str("a2a.task.id") == tk.ID {
				return len(otlptest.ByName(s, "caddy-route")) >= 1
			}
		}
		return false
	})
	var ours otlptest.Span
	for _, sp := range otlptest.ByName(spans, "message/send") {
		if sp.Str("a2a.task.id") == tk.ID {
			ours = sp
		}
	}
	var caddySpan otlptest.Span
	for _, sp := range otlptest.ByName(spans, "caddy-route") {
		if sp.SpanID == ours.ParentSpanID {
			caddySpan = sp
		}
	}
	if caddySpan.SpanID == "" || caddySpan.TraceID != ours.TraceID {
		t.Fatalf("Caddy's span is not the parent of ours: ours %s; Caddy's %v", ours, otlptest.ByName(spans, "caddy-route"))
	}
}

// checkReceiptTotals checks the receipt of task tk, the hello example's, against its
// trace (invoke_agent's totals, the chat spans' usage, the tool spans) and against what
// the gateway's Prometheus counters and histograms moved by since before.
func checkReceiptTotals(t *testing.T, g *gateway, tk task03, agent otlptest.Span, before map[string]float64, usage [][2]int64, tools int) {
	t.Helper()
	var rc runtime.Receipt
	if err := json.Unmarshal(tk.Metadata[runtime.ReceiptURI], &rc); err != nil {
		t.Fatalf("the task's receipt: %v in %s", err, tk.Metadata[runtime.ReceiptURI])
	}
	var in, out int64
	for _, u := range usage {
		in, out = in+u[0], out+u[1]
	}
	traps := 0
	for _, n := range rc.Traps {
		traps += n
	}
	// Against the trace: the chat spans' tokens, the tool spans, invoke_agent's totals.
	if rc.TraceID != agent.TraceID || len(rc.Tokens) != 1 || rc.Tokens[0] != (runtime.ModelTokens{Model: "claude-sonnet-4-5", Input: int(in), Output: int(out)}) ||
		!maps.Equal(rc.ToolCalls, map[string]int{runtime.KindSkill: 1, runtime.KindWasm: 1}) || tools != 2 { // greeting, wordcount
		t.Errorf("receipt %+v; the trace: tokens %d/%d, %d tool calls", rc, in, out, tools)
	}
	for _, c := range []struct {
		attr string
		span float64
		want float64
	}{
		{"gen_ai.usage.input_tokens", float64(agent.Int("gen_ai.usage.input_tokens")), float64(in)},
		{"gen_ai.usage.output_tokens", float64(agent.Int("gen_ai.usage.output_tokens")), float64(out)},
		{"capsule.task.tool_calls", float64(agent.Int("capsule.task.tool_calls")), float64(tools)},
		{"capsule.task.wall_seconds", agent.Float("capsule.task.wall_seconds"), rc.WallSeconds},
		{"capsule.task.guest_seconds", agent.Float("capsule.task.guest_seconds"), rc.GuestSeconds},
		{"capsule.task.peak_guest_memory_bytes", float64(agent.Int("capsule.task.peak_guest_memory_bytes")), float64(rc.PeakGuestMemoryBytes)},
		{"capsule.task.network_bytes_sent", float64(agent.Int("capsule.task.network_bytes_sent")), float64(rc.NetworkBytesSent)},
		{"capsule.task.network_bytes_received", float64(agent.Int("capsule.task.network_bytes_received")), float64(rc.NetworkBytesReceived)},
		{"capsule.task.network_denials", float64(agent.Int("capsule.task.network_denials")), float64(rc.NetworkDenials)},
		{"capsule.task.traps", float64(agent.Int("capsule.task.traps")), float64(traps)},
	} {
		if c.span != c.want {
			t.Errorf("invoke_agent's %s = %v, the receipt's %v", c.attr, c.span, c.want)
		}
	}
	if rc.GuestSeconds <= 0 || rc.GuestSeconds > rc.WallSeconds || rc.PeakGuestMemoryBytes == 0 || rc.NetworkBytesSent <= 0 || rc.NetworkBytesReceived <= 0 {
		t.Errorf("receipt's measured figures %+v", rc)
	}
	// Against Prometheus: each histogram's sum moved by the receipt's figure, each
	// counter by what the task did. Counters are bumped just after the answer: wait.
	const hello = `capsule="hello"`
	waitMetric(t, g, `capsule_task_wall_seconds_count{`+hello+`}`, before[`capsule_task_wall_seconds_count{`+hello+`}`]+1)
	after := scrape(t, g)
	delta := func(series string) float64 { return after[series] - before[series] }
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`capsule_task_wall_seconds_sum{` + hello + `}`, rc.WallSeconds},
		{`capsule_task_guest_seconds_sum{` + hello + `}`, rc.GuestSeconds},
		{`capsule_guest_call_duration_seconds_sum{` + hello + `,role="driver"}` + "+tool", rc.GuestSeconds},
		{`capsule_task_peak_guest_memory_bytes_sum{` + hello + `}`, float64(rc.PeakGuestMemoryBytes)},
		{`capsule_task_tokens_sum{` + hello + `,direction="input",model="claude-sonnet-4-5"}`, float64(in)},
		{`capsule_task_tokens_sum{` + hello + `,direction="output",model="claude-sonnet-4-5"}`, float64(out)},
		{`capsule_inference_requests_total{` + hello + `}` + "*", float64(len(usage))},
		{`capsule_task_tool_calls_sum{` + hello + `}` + "*", float64(tools)},
		{`capsule_task_network_bytes_sum{` + hello + `,direction="sent"}`, float64(rc.NetworkBytesSent)},
		{`capsule_task_network_bytes_sum{` + hello + `,direction="received"}`, float64(rc.NetworkBytesReceived)},
		{`capsule_task_network_denials_sum{` + hello + `}`, float64(rc.NetworkDenials)},
		{`capsule_network_denied_total{` + hello + `}` + "*", float64(rc.NetworkDenials)},
		{`capsule_task_traps_sum{` + hello + `}`, float64(traps)},
		{`capsule_guest_traps_total{` + hello + `}` + "*", float64(traps)},
	} {
		var got float64
		switch {
		case strings.HasSuffix(c.series, "+tool"): // the driver's calls and the tools'
			s := strings.TrimSuffix(c.series, "+tool")
			got = delta(s) + delta(strings.Replace(s, `role="driver"`, `role="tool"`, 1))
		case strings.HasSuffix(c.series, "*"): // every series of the family for the capsule
			got = deltaMatching(before, after, strings.TrimSuffix(c.series, "{"+hello+"}*"), hello)
		default:
			got = delta(c.series)
		}
		if math.Abs(got-c.want) > 1e-6 {
			t.Errorf("%s moved by %v, the receipt says %v", c.series, got, c.want)
		}
	}
}

// deltaMatching sums how far every series of family carrying label moved.
func deltaMatching(before, after map[string]float64, family, label string) float64 {
	var d float64
	for series, v := range after {
		if strings.HasPrefix(series, family+"{") && strings.Contains(series, label) {
			d += v - before[series]
		}
	}
	return d
}
