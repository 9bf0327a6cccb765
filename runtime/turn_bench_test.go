package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// benchTurns is the length of the long task: benchTurns-1 turns that call the echo tool,
// then the answer.
const benchTurns = 9

// benchCassette answers "bench one" in one turn and "bench many" in benchTurns turns.
func benchCassette() string {
	toolTurn := `{"id": "t", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
	  "content": [{"type": "tool_use", "id": "tu_%d", "name": "echo", "input": {"text": "hi"}}], "usage": {"input_tokens": 1, "output_tokens": 1}}`
	answer := `{"id": "a", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
	  "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}`
	var many []string
	for i := 1; i < benchTurns; i++ {
		many = append(many, fmt.Sprintf(toolTurn, i))
	}
	many = append(many, answer)
	return `{"provider": "anthropic-messages", "conversations": [
	  {"match": "bench one", "turns": [` + answer + `]},
	  {"match": "bench many", "turns": [` + strings.Join(many, ",") + `]}]}`
}

// BenchmarkAgentTurn measures what the runtime adds to an agent turn, the provider being a
// replay server on 127.0.0.1 that answers at once. A turn is one driver call (the
// anthropic-messages guest, whose request goes through the host to the provider) and one
// call of the echo tool guest.
//
//   - turn: per op a whole RunOnce (stage, session, trace, task) of a task that ends after
//     1 turn and one that ends after 9. turn-ns is (run-9 − run-1)/8, the cost of one
//     more turn; guest-ns is the part of it spent in guest calls (Engine.Call, from
//     instantiation to close, as the engine's call-duration histogram sums it, so the
//     driver's provider round trip is in it); overhead-ns/turn is the rest: the loop,
//     dispatch, the trace and everything else the runtime does per turn.
//   - driver-call, tool-call: the first turn's guest calls made bare through CallTool with
//     a session's grants.
//   - http-send: the driver's provider request sent bare through murmur.Outgoing.Send, the host's
//     share of a driver call (an upper bound: the replay server's own work is in it).
func BenchmarkAgentTurn(b *testing.B) {
	ctx := context.Background()
	e, reg := agentRig(b, map[string][2]string{
		"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"},
		"echo":               {"tool", "../internal/testkit/testguests/echo"},
	})
	p := newProvider(b, benchCassette())
	const key = "sk-bench"
	m := agentManifest(b, "anthropic-messages", p.srv.URL, "20", "", func(k string) (string, bool) { return key, k == "TEST_KEY" })
	workRoot := b.TempDir()
	// guestTime is the total wall time of every guest call the engine has made.
	guestTime := func() time.Duration {
		ch := make(chan prometheus.Metric, 16)
		go func() { e.engine.Metrics().Duration.Collect(ch); close(ch) }()
		var sum float64
		for c := range ch {
			var pb dto.Metric
			if err := c.Write(&pb); err != nil {
				b.Fatal(err)
			}
			sum += pb.GetHistogram().GetSampleSum()
		}
		return time.Duration(sum * float64(time.Second))
	}
	run := func(task string) (wall, guest time.Duration) {
		p.reset(nil) // the provider's record of requests would grow with b.N
		g0, start := guestTime(), time.Now()
		res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: task, Session: SessionConfig{WorkRoot: workRoot}})
		wall = time.Since(start)
		if err != nil || res.Status != StateCompleted || res.Result != "done" {
			b.Fatalf("run %q: %+v, %v", task, res, err)
		}
		return wall, guestTime() - g0
	}

	// The bare calls: the staged modules, grants as a session builds them.
	staged, err := e.Stage(ctx, m, StageOptions{Registry: reg})
	if err != nil {
		b.Fatal(err)
	}
	gfs, err := guestfs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { gfs.Close() })
	u, _ := url.Parse(p.srv.URL)
	rules, err := netpolicy.ParseRules([]string{"http://" + u.Host})
	if err != nil {
		b.Fatal(err)
	}
	hh := &murmur.Outgoing{Capsule: m.Name, Rules: rules, Metrics: e.engine.Metrics(),
		Credentials: []murmur.Credential{{Endpoint: p.srv.URL, Headers: [][2]string{{"x-api-key", key}}}}}
	hh.Init()
	env := append(GuestEnv(m, func(string) (string, bool) { return "", false }, RuntimeEnv(m, "ses_bench", "")),
		"MURMUR_INFERENCE_TRANSPORT=http", "MURMUR_INFERENCE_MODEL=m-test", "MURMUR_INFERENCE_ENDPOINT="+p.srv.URL,
		"MURMUR_INFERENCE_DRIVER=anthropic-messages", "MURMUR_INFERENCE_DRIVER_CONFIG={}")
	grants := wasm.Grants{FS: gfs, Env: env, MemoryBytes: m.Capabilities.Limits.MemoryBytes, Deadline: time.Minute}
	driverIn, _ := json.Marshal(driverRequest{Model: "m-test", MaxTokens: m.Inference.MaxTokens,
		Messages: []agentMessage{{Role: "user", Content: []agentBlock{{Type: "text", Text: "bench many"}}}},
		Tools:    []agentTool{{Name: "echo", Description: "test tool echo", Parameters: json.RawMessage(`{"type":"object","properties":{}}`)}}})
	driverCall := func() {
		p.reset(nil)
		in := string(driverIn)
		out, err := murmur.CallTool(ctx, e.engine, staged.Modules["anthropic-messages"], grants, &murmur.Imports{Who: "anthropic-messages", HTTP: hh}, abi.ToolInput{Data: &in})
		if err != nil || out.Status != abi.StatusPassed || !strings.Contains(value(out.Data), `"stop_reason":"tool_call"`) {
			b.Fatalf("driver call: %v %s %s", err, value(out.Summary), value(out.Data))
		}
	}
	toolCall := func() {
		in := `{"text":"hi"}`
		out, err := murmur.CallTool(ctx, e.engine, staged.Modules["echo"], grants, &murmur.Imports{Who: "echo"}, abi.ToolInput{Data: &in})
		if err != nil || value(out.Data) != in {
			b.Fatalf("tool call: %v %+v", err, out)
		}
	}
	// The request the driver sends on the first turn, as the provider received it.
	driverCall()
	sent := p.seen()[0]
	req := murmur.OutgoingRequest{Method: "POST", URL: p.srv.URL + "/v1/messages", Body: sent.body,
		Headers: [][2]string{{"content-type", "application/json"}, {"anthropic-version", sent.header.Get("Anthropic-Version")}}}

	b.Run("turn", func(b *testing.B) {
		var w1, w9, g1, g9 time.Duration
		for b.Loop() {
			w, g := run("bench one")
			w1, g1 = w1+w, g1+g
			w, g = run("bench many")
			w9, g9 = w9+w, g9+g
		}
		n, extra := float64(b.N), float64(b.N*(benchTurns-1))
		b.ReportMetric(float64(w1.Nanoseconds())/n, "run1-ns")
		b.ReportMetric(float64(w9.Nanoseconds())/n, "run9-ns")
		b.ReportMetric(float64((w9-w1).Nanoseconds())/extra, "turn-ns")
		b.ReportMetric(float64((g9-g1).Nanoseconds())/extra, "guest-ns")
		b.ReportMetric(float64((w9-w1-(g9-g1)).Nanoseconds())/extra, "overhead-ns/turn")
	})
	b.Run("driver-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			driverCall()
		}
	})
	b.Run("tool-call", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			toolCall()
		}
	})
	b.Run("http-send", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			p.reset(nil)
			resp, err := hh.Send(ctx, "anthropic-messages", req)
			if err != nil || resp.Status != 200 {
				b.Fatalf("send: %v %+v", err, resp)
			}
		}
	})
}
