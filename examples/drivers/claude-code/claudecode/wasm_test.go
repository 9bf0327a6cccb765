package claudecode

import (
	"context"
	"reflect"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/wit/abi"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// TestThroughTheHost compiles the driver (examples/drivers/claude-code) and drives it
// through the runtime's process-driver host on one held instance: describe answers
// across the canonical ABI what the translation answers in Go, and so do launch, parse,
// classify-exit and read-login (harnesstest.ThroughTheHost).
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

	harnesstest.ThroughTheHost(t, d, harnesstest.HostCase{
		New:       func() harnesstest.Translator { return New() },
		Request:   process.LaunchRequest{Model: ptr("claude-x"), SystemPrompt: "sys", Bridge: testBridge, SessionID: "8d0d5f0e-3f53-4c1a-9d55-2b7c1b6d1a01", Task: "hi"},
		Captured:  []string{"tool.jsonl", "auth.jsonl"},
		LoggedOut: abi.LoginOutput{Code: ptr(int32(1)), Stdout: `{"loggedIn":false,"authMethod":"none"}`},
	})
}
