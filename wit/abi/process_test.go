package abi

import (
	"context"
	"reflect"
	"testing"
)

// roundTripValue stores v as t in a fake memory and loads it back, as a guest's answer
// reaches the host.
func roundTripValue(t *testing.T, typ *Type, v any) any {
	t.Helper()
	ctx := context.Background()
	m := newMem(1 << 16)
	a := newBump(m, 8)
	p, err := a.realloc(ctx, 0, 0, typ.align, typ.size)
	if err != nil {
		t.Fatal(err)
	}
	if err := store(ctx, m, a.realloc, typ, p, v); err != nil {
		t.Fatalf("store: %v", err)
	}
	got, err := load(m, typ, p, limits{})
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return got
}

func u64p(n uint64) *uint64 { return &n }
func s32p(n int32) *int32   { return &n }

// TestProcessTypesConvert passes every record of murmur:driver/process@0.6.0 through the
// canonical ABI and the converters: what a driver answers is what the host reads.
func TestProcessTypesConvert(t *testing.T) {
	desc := []any{"claude-code", "claude", []any{"--version"}, []any{"2.1.328"}, uint32(0), []any{"ANTHROPIC_API_KEY"}, true, true,
		[]any{[]any{[]any{"/opt/claude", uint32(0)}, []any{"/tmp/x", uint32(1)}}, []any{"statsig.example"}},
		Option{Some: true, Value: []any{[]any{"auth", "status"}}}}
	d, err := ToDescription(roundTripValue(t, DescriptionType, desc))
	want := Description{Harness: "claude-code", Binary: "claude", VersionArgs: []string{"--version"}, TestedVersions: []string{"2.1.328"},
		Interrupt: "stdin-message", RequiredEnv: []string{"ANTHROPIC_API_KEY"}, StreamsText: true, ReportsUsage: true,
		NeedsPaths: []PathNeed{{"/opt/claude", "read"}, {"/tmp/x", "read-write"}}, NeedsHosts: []string{"statsig.example"},
		LoginCheck: []string{"auth", "status"}, HasLogin: true}
	if err != nil || !reflect.DeepEqual(d, want) {
		t.Errorf("description %+v, %v", d, err)
	}

	model, cfg := "m", `{"a":1}`
	req := LaunchRequest{Model: &model, SystemPrompt: "sys", Config: &cfg, Bridge: &Bridge{ServerName: "capsule", URL: "http://127.0.0.1:1/mcp", BearerToken: "tok", ToolNames: []string{"wc"}},
		SessionID: "s1", Resume: true, Task: "do it"}
	lifted := roundTripValue(t, LaunchRequestType, req.Value())
	if !reflect.DeepEqual(lifted, req.Value()) {
		t.Errorf("launch-request %#v", lifted)
	}

	plan := Result{Value: []any{[]any{"-p", "{files_dir}/x"}, []any{[]any{"HOME", "{files_dir}"}}, []any{[]any{"mcp.json", "{}"}},
		Option{Some: true, Value: []byte("hi")}, true, Option{}}}
	p, refused, err := ToLaunch(roundTripValue(t, ResultOf(LaunchPlanType, String), plan))
	wantPlan := LaunchPlan{Args: []string{"-p", "{files_dir}/x"}, EnvSet: [][2]string{{"HOME", "{files_dir}"}}, Files: []DriverFile{{"mcp.json", "{}"}},
		Stdin: []byte("hi"), HasStdin: true, KeepStdinOpen: true}
	if err != nil || refused != "" || !reflect.DeepEqual(p, wantPlan) {
		t.Errorf("plan %+v %q %v", p, refused, err)
	}
	if _, refused, err := ToLaunch(roundTripValue(t, ResultOf(LaunchPlanType, String), Result{Err: true, Value: "no"})); refused != "no" || err != nil {
		t.Errorf("refusal %q %v", refused, err)
	}

	events := []any{
		Variant{Case: 0, Value: []any{"sess", "api-key", Option{Some: true, Value: "m"}}},
		Variant{Case: 1, Value: "Hel"},
		Variant{Case: 5, Value: []any{"c1", "wc", `{"t":1}`}},
		Variant{Case: 6, Value: []any{"c1", "3", false}},
		Variant{Case: 7, Value: []any{uint32(2), "overloaded"}},
		Variant{Case: 8, Value: []any{Option{Some: true, Value: uint64(10)}, Option{}, Option{}, Option{}, Option{Some: true, Value: uint64(0)}}},
		Variant{Case: 9, Value: "done"},
		Variant{Case: 10, Value: []any{uint32(1), "rate limited"}},
		Variant{Case: 11, Value: "odd line"},
	}
	got, err := ToEvents(roundTripValue(t, List(EventType), events))
	wantEvents := []Event{
		{Case: "session-started", SessionID: "sess", Auth: "api-key", Model: &model},
		{Case: "text-delta", Text: "Hel"},
		{Case: "tool-call", ToolID: "c1", ToolName: "wc", ToolInput: `{"t":1}`},
		{Case: "tool-result", ToolID: "c1", Text: "3"},
		{Case: "retry", Attempt: 2, Text: "overloaded"},
		{Case: "usage", Usage: Usage{Input: u64p(10), Thinking: u64p(0)}},
		{Case: "turn-end", Text: "done"},
		{Case: "turn-failed", FailureKind: "quota", Text: "rate limited"},
		{Case: "note", Text: "odd line"},
	}
	if err != nil || !reflect.DeepEqual(got, wantEvents) {
		t.Errorf("events %+v, %v", got, err)
	}

	x := ExitStatus{Code: s32p(1), StderrTail: "boom", SawTerminal: true}
	if v := roundTripValue(t, ExitStatusType, x.Value()); !reflect.DeepEqual(v, x.Value()) {
		t.Errorf("exit-status %#v", v)
	}
	o := LoginOutput{Code: s32p(0), Stdout: "logged in"}
	if v := roundTripValue(t, LoginOutputType, o.Value()); !reflect.DeepEqual(v, o.Value()) {
		t.Errorf("login-output %#v", v)
	}
	if s, detail, err := ToLoginState(roundTripValue(t, LoginStateType, Variant{Case: 1, Value: "run claude login"})); s != "logged-out" || detail != "run claude login" || err != nil {
		t.Errorf("login-state %q %q %v", s, detail, err)
	}
	if _, err := ToEvent(Variant{Case: 12, Value: "x"}); err == nil {
		t.Error("an event case past the last was converted")
	}
}
