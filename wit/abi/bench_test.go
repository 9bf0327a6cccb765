package abi

import (
	"context"
	"strings"
	"testing"
)

// BenchmarkToolCall is one tool call's ABI work on the host: lower a ToolInput into
// the guest, then lift a ToolResult (through a return area) and convert it.
func BenchmarkToolCall(b *testing.B) {
	ctx := context.Background()
	m := newMem(1 << 20)
	in := ToolInput{Data: ptr(strings.Repeat(`{"path":"src/main.go"}`, 20)), LogPath: ptr("/work/logs/tool.log")}.Value()
	res := ToolResult{
		Status: StatusPassed, Summary: ptr("3 files changed"), Data: ptr(strings.Repeat("line of output\n", 60)),
		Metadata: [][2]string{{"full_output_path", "/work/out/full.txt"}, {"continuation_id", "c-42"}},
	}.Value(false)
	a := newBump(m, 8)
	ret, _ := a.realloc(ctx, 0, 0, ToolResultType.align, ToolResultType.size)
	if _, err := ToolRun01.LowerResults(ctx, m, a.realloc, []any{res}, ret); err != nil {
		b.Fatal(err)
	}
	start := a.next
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		a.next = start
		if _, err := ToolRun01.LowerParams(ctx, m, a.realloc, []any{in}); err != nil {
			b.Fatal(err)
		}
		vals, err := ToolRun01.LiftResults(m, []uint64{uint64(ret)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := ToToolResult(vals[0]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLiftBody lifts a 1 MiB list<u8>, as an HTTP request body.
func BenchmarkLiftBody(b *testing.B) {
	m := newMem(2 << 20)
	put(m, 0, 64, 1<<20)
	body := List(U8)
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := load(m, body, 0, limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
