package murmur

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// toolEvent is the generic value of a tool-event; outcome nil is the decision point.
func toolEvent(name, input string, outcome *[3]any) any {
	o := abi.Option{}
	if outcome != nil {
		o = abi.Option{Some: true, Value: []any{outcome[0], outcome[1], outcome[2]}}
	}
	return []any{uint32(1), name, uint64(len(input)), input, o}
}

// shellEvent is the generic value of a shell-event; outcome nil is the decision point,
// else exit code, stdout, stderr, their sizes and the duration.
func shellEvent(binary, command string, argv []any, script *string, outcome []any) any {
	sc := abi.Option{}
	if script != nil {
		sc = abi.Option{Some: true, Value: *script}
	}
	o := abi.Option{}
	if outcome != nil {
		o = abi.Option{Some: true, Value: outcome}
	}
	return []any{uint32(3), binary, command, argv, sc, abi.Option{}, o}
}

// TestCallHook calls the Go SDK's hooks (the example policy and audit hooks, the
// summaryhook test guest) through every lifecycle function they export: records lower
// (flat and, for on-inference and on-shell, spilled to memory), answers lift (strings
// and replace-context's messages), and the audit hook's lines say what it was handed, in
// order.
func TestCallHook(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	ctx := context.Background()
	policy, err := Compile(ctx, e, "cap", "policy", manifest.RoleHook, guestbuild.Wasm(t, "../../../examples/guests/policy-hook"))
	if err != nil {
		t.Fatal(err)
	}
	audit, err := Compile(ctx, e, "cap", "audit", manifest.RoleHook, guestbuild.Wasm(t, "../../../examples/guests/audit-hook"))
	if err != nil {
		t.Fatal(err)
	}
	summary, err := Compile(ctx, e, "cap", "summary", manifest.RoleHook, guestbuild.Wasm(t, "../../../internal/testkit/testguests/summaryhook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*wasm.Module{policy, audit, summary} {
		if err := CheckWorld(m, string(manifest.RoleHook)); err != nil {
			t.Fatal(err)
		}
	}
	out := t.TempDir()
	gfs, err := guestfs.New(out)
	if err != nil {
		t.Fatal(err)
	}
	defer gfs.Close()
	tool, script, model := "some", "ls; rm -f a", "m"
	ran := []any{int32(2), "out\n", "err\n", uint64(1 << 20), uint64(4), uint64(7)}
	msgs := []any{
		[]any{"user", "please tidy", abi.Option{Some: true, Value: "msg_1"}, abi.Option{}, abi.Option{}},
		[]any{"assistant", "called rm", abi.Option{}, abi.Option{Some: true, Value: "tu_1"}, abi.Option{Some: true, Value: uint32(1)}},
	}
	compaction := []any{msgs, uint64(900), 0.75, abi.Option{Some: true, Value: model}, abi.Option{}}
	tests := []struct {
		mod    *wasm.Module
		fn     string
		record any
		want   HookAnswer
		line   string // what audit.jsonl gains, "" for nothing
	}{
		{policy, "on-tool-call", toolEvent("echo", `{"text":"rm -rf /"}`, nil),
			HookAnswer{Case: "deny", Text: "policy-hook: echo mentions rm, which this capsule may not run"}, ""},
		{policy, "on-tool-call", toolEvent("echo", `{"text":"rm"}`, &[3]any{uint64(3), uint64(4), "passed"}), HookAnswer{Case: "none"}, ""},
		{policy, "on-tool-call", toolEvent("echo", `{"text":"hi"}`, nil), HookAnswer{Case: "none"}, ""},
		{policy, "on-session-end", []any{uint32(0), uint64(0), uint64(0), uint32(0), uint32(0), uint64(0), "completed"}, HookAnswer{Case: "none"}, ""},
		{policy, "on-shell", shellEvent("/usr/bin/rm", "-rf x", []any{"rm", "-rf", "x"}, nil, nil),
			HookAnswer{Case: "deny", Text: "policy-hook: the command's binary is rm, and this capsule may not run rm"}, ""},
		{policy, "on-shell", shellEvent("/usr/bin/bash", script, []any{"bash", "-c", script}, &script, nil),
			HookAnswer{Case: "deny", Text: "policy-hook: the script invokes rm, and this capsule may not run rm"}, ""},
		{policy, "on-shell", shellEvent("/usr/bin/rm", "x", []any{"rm", "x"}, nil, ran), HookAnswer{Case: "none"}, ""}, // ran: observed only
		{policy, "on-shell", shellEvent("/usr/bin/ls", "-l", []any{"ls", "-l"}, nil, nil), HookAnswer{Case: "none"}, ""},
		{summary, "on-compaction", compaction, HookAnswer{Case: "replace-context",
			Text: `summaryhook: 2 messages (user,assistant), first "please tidy"; 900 tokens at 0.75; model m; system -`}, ""},
		{audit, "on-shell", shellEvent("/usr/bin/bash", script, []any{"bash", "-c", script}, &script, ran), HookAnswer{Case: "none"},
			`{"event":"on-shell","record":{"turn":3,"binary":"/usr/bin/bash","command":"ls; rm -f a","argv":["bash","-c","ls; rm -f a"],"script":"ls; rm -f a",` +
				`"outcome":{"exit_code":2,"stdout":"out\n","stderr":"err\n","stdout_bytes":1048576,"stderr_bytes":4,"duration_ms":7}}}`},
		{audit, "on-shell", shellEvent("ls", "", []any{}, nil, nil), HookAnswer{Case: "none"},
			`{"event":"on-shell","record":{"turn":3,"binary":"ls","command":"","argv":[]}}`},
		{audit, "on-compaction", compaction, HookAnswer{Case: "none"},
			`{"event":"on-compaction","record":{"messages":[{"role":"user","content":"please tidy","id":"msg_1"},` +
				`{"role":"assistant","content":"called rm","source_id":"tu_1","inserted_by":"seed-context"}],"session_tokens":900,"threshold":0.75,"model":"m"}}`},
		{audit, "on-session-start", []any{"cap", "1.0.0", "ses_1", "m", []any{"env:A", "network:h"}}, HookAnswer{Case: "none"},
			`{"event":"on-session-start","record":{"capsule_name":"cap","capsule_version":"1.0.0","session_id":"ses_1","model":"m","capabilities":["env:A","network:h"]}}`},
		{audit, "on-task-start", []any{"tsk_1", "ctx_1", "cli", uint64(5), uint64(6), uint64(7), uint64(8)}, HookAnswer{Case: "none"},
			`{"event":"on-task-start","record":{"task_id":"tsk_1","context_id":"ctx_1","source":"cli","input_bytes":5,"budget_tokens":6,"context_window":7,"prior_tokens":8}}`},
		{audit, "on-inference", []any{uint32(2), uint64(10), uint64(5), "tool_use", abi.Option{Some: true, Value: tool}, abi.Option{}, abi.Option{}, abi.Option{Some: true, Value: "[]"}}, HookAnswer{Case: "none"},
			`{"event":"on-inference","record":{"turn":2,"input_tokens":10,"output_tokens":5,"decision":"tool_use","tool_name":"some","tools":"[]"}}`},
		{audit, "on-tool-call", toolEvent("echo", "x", &[3]any{uint64(3), uint64(4), "passed"}), HookAnswer{Case: "none"},
			`{"event":"on-tool-call","record":{"turn":1,"tool_name":"echo","input_bytes":1,"input":"x","outcome":{"output_bytes":3,"duration_ms":4,"status":"passed"}}}`},
		{audit, "on-task-end", []any{"tsk_1", "completed"}, HookAnswer{Case: "none"}, `{"event":"on-task-end","record":{"task_id":"tsk_1","exit_status":"completed"}}`},
		{audit, "on-session-end", []any{uint32(1), uint64(2), uint64(3), uint32(4), uint32(5), uint64(6), "completed"}, HookAnswer{Case: "none"},
			`{"event":"on-session-end","record":{"total_turns":1,"total_input_tokens":2,"total_output_tokens":3,"total_tool_calls":4,"total_shell_calls":5,"duration_ms":6,"exit_status":"completed"}}`},
	}
	var lines []string
	for _, tt := range tests {
		got, err := CallHook(ctx, e, tt.mod, wasm.Grants{FS: gfs, MemoryBytes: 64 << 20}, tt.fn, tt.record)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s %s: %+v, %v; want %+v", tt.mod.Artifact, tt.fn, got, err, tt.want)
		}
		if tt.line != "" {
			lines = append(lines, tt.line)
		}
	}
	data, _ := os.ReadFile(filepath.Join(out, "audit.jsonl"))
	if got, want := strings.TrimSpace(string(data)), strings.Join(lines, "\n"); got != want {
		t.Errorf("audit.jsonl:\n%s\nwant:\n%s", got, want)
	}
	// Without a filesystem the audit hook's write fails: its err(string) is an answer.
	got, err := CallHook(ctx, e, audit, wasm.Grants{MemoryBytes: 64 << 20}, "on-task-end", []any{"t", "s"})
	if err != nil || !got.Failed || got.Text == "" {
		t.Errorf("no filesystem: %+v, %v; want the guest's err", got, err)
	}
}

// TestCheckHook: a hook module must export its binding's lifecycle function, or — bound
// to nothing — at least one of them; the hook world refuses a module exporting none.
func TestCheckHook(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	ctx := context.Background()
	policy, err := Compile(ctx, e, "cap", "policy", manifest.RoleHook, guestbuild.Wasm(t, "../../../examples/guests/policy-hook"))
	if err != nil {
		t.Fatal(err)
	}
	bare, err := Compile(ctx, e, "cap", "bare", manifest.RoleHook, wasmtest.Module{Funcs: []wasmtest.Func{{Export: "f", Body: wasmtest.Nop}}, MemoryPages: 1}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		mod     *wasm.Module
		binding string
		code    string
	}{
		{policy, "on-tool-call", ""},
		{policy, "", ""},
		{policy, "on-shell", ""},
		{policy, "on-compaction", ""}, // the SDK exports every lifecycle function
		{bare, "", CodeHookExport},
	} {
		if err := CheckHook(tt.mod, tt.binding); (tt.code == "") != (err == nil) || tt.code != "" && errs.Find(err, tt.code) == nil {
			t.Errorf("%s bound to %q: %v, want %q", tt.mod.Artifact, tt.binding, err, tt.code)
		}
	}
	if err := CheckWorld(bare, string(manifest.RoleHook)); errs.Find(err, CodeHookExport) == nil {
		t.Errorf("CheckWorld of a hook exporting nothing: %v, want %s", err, CodeHookExport)
	}
}
