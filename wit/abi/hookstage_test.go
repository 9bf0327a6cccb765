package abi

import (
	"context"
	"reflect"
	"testing"
)

// TestOnStageRoundTrip: on-stage's stage-event flattens to one list (ptr, len) and
// lifts back; its result<hook-output, string> spills to a 16-byte return area whose
// write-manifests payload HookManifests reads in the guest's order, and every other
// answer gives no manifests.
func TestOnStageRoundTrip(t *testing.T) {
	ctx := context.Background()
	fn := HookFuncs["on-stage"]
	if fn == nil {
		t.Fatal("HookFuncs lacks on-stage")
	}
	params, results := fn.ExportSignature()
	if want := []ValType{I32, I32}; !reflect.DeepEqual(params, want) || !reflect.DeepEqual(results, []ValType{I32}) {
		t.Fatalf("on-stage core signature (%v) -> %v, want (%v) -> [i32]", params, results, want)
	}
	if r := ResultOf(HookOutputType, String); r.size != 16 || r.align != 4 {
		t.Errorf("result<hook-output, string> is %d bytes aligned %d, want 16 and 4 (the SDK's layout)", r.size, r.align)
	}
	manifests := []any{[]any{"jq", "name: jq\n"}, []any{"git", ""}}
	tests := []struct {
		name   string
		answer Result
		want   []ToolManifest
		kind   string
	}{
		{"write-manifests", Result{Value: Variant{Case: 2, Value: manifests}},
			[]ToolManifest{{BinaryName: "jq", Content: "name: jq\n"}, {BinaryName: "git", Content: ""}}, "write-manifests"},
		{"write-manifests empty", Result{Value: Variant{Case: 2, Value: []any{}}}, []ToolManifest{}, "write-manifests"},
		{"none", Result{Value: Variant{Case: 0}}, nil, "none"},
		{"deny", Result{Value: Variant{Case: 6, Value: "no"}}, nil, "deny"},
		{"err", Result{Err: true, Value: "broken"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMem(1 << 16)
			a := newBump(m, 16)
			event := []any{[]any{"jq", "git"}}
			flat, err := fn.LowerParams(ctx, m, a.realloc, []any{event})
			if err != nil {
				t.Fatal(err)
			}
			// LiftParams reads them as an import would: with its return pointer.
			got, err := fn.LiftParams(m, append(flat, 0))
			if err != nil || !reflect.DeepEqual(got, []any{event}) {
				t.Fatalf("stage-event lifted as %#v, %v", got, err)
			}
			ret, _ := a.realloc(ctx, 0, 0, 4, 16)
			if _, err := fn.LowerResults(ctx, m, a.realloc, []any{tt.answer}, ret); err != nil {
				t.Fatal(err)
			}
			res, err := fn.LiftResults(m, []uint64{uint64(ret)})
			if err != nil {
				t.Fatal(err)
			}
			kind, _, failed, err := ToHookOutput(res[0])
			if err != nil || kind != tt.kind || failed != tt.answer.Err {
				t.Errorf("ToHookOutput = %q, failed %v, %v; want %q", kind, failed, err, tt.kind)
			}
			mans, err := HookManifests(res[0])
			if err != nil || !reflect.DeepEqual(mans, tt.want) {
				t.Errorf("HookManifests = %#v, %v; want %#v", mans, err, tt.want)
			}
		})
	}
	if _, err := HookManifests(Result{Value: Variant{Case: 2, Value: []any{[]any{"jq"}}}}); err == nil {
		t.Error("HookManifests took a tool-manifest of one field")
	}
}
