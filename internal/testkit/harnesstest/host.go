package harnesstest

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// ReadLines reads testdata/<name>, a captured output of a real CLI, line by line.
func ReadLines(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// HostCase is what ThroughTheHost drives a shipped driver with.
type HostCase struct {
	// New makes the driver's Go translation, the answers the host's must equal.
	New func() Translator
	// Request is a launch request with a bridge.
	Request process.LaunchRequest
	// Captured names testdata files of the CLI's real output, each parsed through the
	// host after a launch with a bridge named "capsule".
	Captured []string
	// LoggedOut is what the CLI's login check prints when nobody is logged in.
	LoggedOut abi.LoginOutput
}

// ThroughTheHost drives the held driver d (OpenDriver) across the canonical ABI and
// checks each answer is what its Go translation answers: launch's plan whole (an
// empty task refused as the driver's err), parse of every captured output,
// classify-exit of an interrupted run (canceled), read-login of a logged-out check.
func ThroughTheHost(t *testing.T, d *murmur.Driver, c HostCase) {
	t.Helper()
	ctx := context.Background()
	plan, refused, err := d.Launch(ctx, abiRequest(c.Request))
	if err != nil || refused != "" {
		t.Fatalf("launch: %q %v", refused, err)
	}
	want, err := c.New().Launch(c.Request)
	if err != nil {
		t.Fatal(err)
	}
	if got := fromABIPlan(plan); !reflect.DeepEqual(got, want) {
		t.Errorf("launch through the host\n%+v\nwant\n%+v", got, want)
	}
	if _, refused, err := d.Launch(ctx, abi.LaunchRequest{Task: " "}); err != nil || refused == "" {
		t.Errorf("an empty task: refused %q, %v", refused, err)
	}

	for _, name := range c.Captured {
		lines := ReadLines(t, name)
		if _, _, err := d.Launch(ctx, abi.LaunchRequest{Bridge: &abi.Bridge{ServerName: "capsule"}, Task: "t"}); err != nil {
			t.Fatal(err)
		}
		local := c.New()
		local.Launch(process.LaunchRequest{Bridge: &process.Bridge{ServerName: "capsule"}, Task: "t"})
		got, err := d.Parse(ctx, lines)
		if err != nil {
			t.Fatal(err)
		}
		if want := toABIEvents(local.Parse(lines)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: parse through the host\n%+v\nwant\n%+v", name, got, want)
		}
	}

	sig := int32(2)
	ev, err := d.ClassifyExit(ctx, abi.ExitStatus{Signal: &sig, Interrupted: true})
	if err != nil || ev.Case != process.TurnFailed || ev.FailureKind != process.FailCanceled {
		t.Errorf("classify-exit: %+v %v", ev, err)
	}
	state, detail, err := d.ReadLogin(ctx, c.LoggedOut)
	if err != nil || state != process.LoggedOut || detail == "" {
		t.Errorf("read-login: %s %q %v", state, detail, err)
	}
}

func abiRequest(r process.LaunchRequest) abi.LaunchRequest {
	out := abi.LaunchRequest{Model: r.Model, SystemPrompt: r.SystemPrompt, Config: r.Config, SessionID: r.SessionID, Resume: r.Resume,
		HarnessVersion: r.HarnessVersion, Task: r.Task}
	if b := r.Bridge; b != nil {
		out.Bridge = &abi.Bridge{ServerName: b.ServerName, URL: b.URL, BearerToken: b.BearerToken, ToolNames: b.ToolNames}
	}
	return out
}

// fromABIPlan is p as the Go translation writes it (no stdin is nil there).
func fromABIPlan(p abi.LaunchPlan) process.LaunchPlan {
	out := process.LaunchPlan{Args: p.Args, EnvSet: p.EnvSet, KeepStdinOpen: p.KeepStdinOpen, InterruptStdin: p.InterruptStdin}
	for _, f := range p.Files {
		out.Files = append(out.Files, process.File{Name: f.Name, Contents: f.Contents})
	}
	if p.HasStdin {
		out.Stdin = append([]byte{}, p.Stdin...)
	}
	return out
}

func toABIEvents(events []process.Event) []abi.Event {
	out := make([]abi.Event, len(events))
	for i, e := range events {
		out[i] = abi.Event{Case: e.Case, Text: e.Text, SessionID: e.SessionID, Auth: e.Auth, Model: e.Model, ToolID: e.ToolID, ToolName: e.ToolName,
			ToolInput: e.ToolInput, IsError: e.IsError, Attempt: e.Attempt, FailureKind: e.FailureKind,
			Usage: abi.Usage{Input: e.Usage.Input, Output: e.Usage.Output, CacheRead: e.Usage.CacheRead, CacheCreation: e.Usage.CacheCreation, Thinking: e.Usage.Thinking}}
	}
	return out
}
