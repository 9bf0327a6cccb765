package mcpbridge

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The target: a tool call through the bridge costs at most 1 ms more than a
// direct dispatch at p50. Both benchmarks use the same trivial Dispatch and input and
// report the per-call latency's p50 and p99 next to ns/op; docs/benchmarks.md has the
// figures.

// benchInput is the arguments of every benchmark call.
var benchInput = json.RawMessage(`{"q":"wasm"}`)

// trivial is the benchmarks' Dispatch: it does nothing a real tool would.
func trivial(_ context.Context, _ string, input json.RawMessage) (string, bool, error) {
	return "ok", false, nil
}

// reportLatency reports the p50 and p99 of durs, which it sorts.
func reportLatency(b *testing.B, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	b.ReportMetric(float64(durs[len(durs)/2]), "p50-ns")
	b.ReportMetric(float64(durs[len(durs)*99/100]), "p99-ns")
}

// BenchmarkBridgeCall measures one tools/call from the SDK's client through the bridge
// over loopback Streamable HTTP (token check, MCP session, Dispatch) and back.
func BenchmarkBridgeCall(b *testing.B) {
	br := start(b, Config{Dispatch: trivial})
	cs := connect(b, br)
	ctx := context.Background()
	params := &mcp.CallToolParams{Name: "search", Arguments: benchInput}
	// One call first so connection set-up is not in the figures.
	if _, err := cs.CallTool(ctx, params); err != nil {
		b.Fatal(err)
	}
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		res, err := cs.CallTool(ctx, params)
		durs = append(durs, time.Since(t0))
		if err != nil || res.IsError {
			b.Fatalf("CallTool: %v %+v", err, res)
		}
	}
	b.StopTimer()
	reportLatency(b, durs)
}

// BenchmarkDirectDispatch measures the same Dispatch called directly: the baseline the
// bridge's overhead is measured against.
func BenchmarkDirectDispatch(b *testing.B) {
	ctx := context.Background()
	durs := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		_, isError, err := trivial(ctx, "search", benchInput)
		durs = append(durs, time.Since(t0))
		if err != nil || isError {
			b.Fatal(err)
		}
	}
	reportLatency(b, durs)
}
