package claudecode

import (
	"context"
	"reflect"
	"testing"

	"github.com/capsulegate/capsulegate/internal/harnesstest"
	"github.com/capsulegate/capsulegate/wit/abi"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// TestThroughTheHost compiles the driver (examples/drivers/claude-code) and drives it
// through the runtime's process-driver host on one held instance: describe, launch,
// parse of every captured output, classify-exit and read-login answer across the
// canonical ABI what the translation answers in Go.
func TestThroughTheHost(t *testing.T) {
	ctx := context.Background()
	d := harnesstest.OpenDriver(t, "..", "claude-code")

	desc, err := d.Describe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := New().Describe()
	if desc.Harness != want.Harness || desc.Binary != "claude" || !reflect.DeepEqual(desc.TestedVersions, TestedVersions) ||
		desc.Interrupt != process.InterruptSignal || len(desc.RequiredEnv) != 0 || !desc.StreamsText || !desc.ReportsUsage ||
		!reflect.DeepEqual(desc.NeedsPaths, []abi.PathNeed{{Path: InstallPath, Access: "read"}}) || len(desc.NeedsHosts) != 0 ||
		!desc.HasLogin || !reflect.DeepEqual(desc.LoginCheck, []string{"auth", "status", "--json"}) {
		t.Errorf("describe: %+v", desc)
	}

	req := process.LaunchRequest{Model: ptr("claude-x"), SystemPrompt: "sys", Bridge: testBridge, SessionID: "8d0d5f0e-3f53-4c1a-9d55-2b7c1b6d1a01", Task: "hi"}
	plan, refused, err := d.Launch(ctx, abi.LaunchRequest{Model: req.Model, SystemPrompt: req.SystemPrompt, SessionID: req.SessionID, Task: req.Task,
		Bridge: &abi.Bridge{ServerName: testBridge.ServerName, URL: testBridge.URL, BearerToken: testBridge.BearerToken, ToolNames: testBridge.ToolNames}})
	if err != nil || refused != "" {
		t.Fatalf("launch: %q %v", refused, err)
	}
	local := New()
	wantPlan, _ := local.Launch(req)
	if !reflect.DeepEqual(plan.Args, wantPlan.Args) || !reflect.DeepEqual(plan.EnvSet, wantPlan.EnvSet) || len(plan.Files) != 1 ||
		plan.Files[0].Name != "mcp.json" || plan.Files[0].Contents != wantPlan.Files[0].Contents {
		t.Errorf("launch: %+v", plan)
	}
	if !plan.HasStdin || len(plan.Stdin) != 0 || plan.KeepStdinOpen {
		t.Errorf("stdin: %v %q %v, want an empty one, closed", plan.HasStdin, plan.Stdin, plan.KeepStdinOpen)
	}
	if _, refused, err := d.Launch(ctx, abi.LaunchRequest{Task: " "}); err != nil || refused == "" {
		t.Errorf("an empty task: refused %q, %v", refused, err)
	}

	for _, name := range []string{"tool.jsonl", "auth.jsonl"} {
		lines := readLines(t, name)
		if _, _, err := d.Launch(ctx, abi.LaunchRequest{Bridge: &abi.Bridge{ServerName: "capsule"}, Task: "t"}); err != nil {
			t.Fatal(err)
		}
		local := New()
		local.Launch(process.LaunchRequest{Bridge: &process.Bridge{ServerName: "capsule"}, Task: "t"})
		got, err := d.Parse(ctx, lines)
		if err != nil {
			t.Fatal(err)
		}
		if want := toABI(local.Parse(lines)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parse through the host\n%+v\nwant\n%+v", name, got, want)
		}
	}

	ev, err := d.ClassifyExit(ctx, abi.ExitStatus{Signal: ptr(int32(2)), Interrupted: true})
	if err != nil || ev.Case != process.TurnFailed || ev.FailureKind != process.FailCanceled {
		t.Errorf("classify-exit: %+v %v", ev, err)
	}
	state, detail, err := d.ReadLogin(ctx, abi.LoginOutput{Code: ptr(int32(1)), Stdout: `{"loggedIn":false,"authMethod":"none"}`})
	if err != nil || state != process.LoggedOut || detail == "" {
		t.Errorf("read-login: %s %q %v", state, detail, err)
	}
}

func toABI(events []process.Event) []abi.Event {
	out := make([]abi.Event, len(events))
	for i, e := range events {
		out[i] = abi.Event{Case: e.Case, Text: e.Text, SessionID: e.SessionID, Auth: e.Auth, Model: e.Model, ToolID: e.ToolID, ToolName: e.ToolName,
			ToolInput: e.ToolInput, IsError: e.IsError, Attempt: e.Attempt, FailureKind: e.FailureKind,
			Usage: abi.Usage{Input: e.Usage.Input, Output: e.Usage.Output, CacheRead: e.Usage.CacheRead, CacheCreation: e.Usage.CacheCreation, Thinking: e.Usage.Thinking}}
	}
	return out
}
