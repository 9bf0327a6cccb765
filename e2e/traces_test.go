package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
)

// TestTraces: a task of the hello example through the built gateway, exported to a real
// OTLP/HTTP receiver that shares no code with the exporter: the A2A server span, then
// invoke_agent, a chat span per turn with the cassette's token counts and an
// execute_tool span per call, all in one trace parented on the client's traceparent.
// With Caddy's tracing directive on the route, Caddy's own span is the parent of ours.
func TestTraces(t *testing.T) {
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
