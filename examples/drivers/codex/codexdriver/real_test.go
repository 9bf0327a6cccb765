package codexdriver

import (
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

var update = flag.Bool("update", false, "rewrite testdata/*.jsonl with what the real CLI printed")

const answer = "The answer is 42."

// runTurn runs the real CLI as the runtime would (harnesstest.RunTurn).
func runTurn(t *testing.T, d *Driver, req process.LaunchRequest, filesDir string, p *harnesstest.Provider, extraEnv ...string) harnesstest.Turn {
	t.Helper()
	return harnesstest.RunTurn(t, d, harnesstest.Codex(t), req, filesDir, p, extraEnv...)
}

// interrupt interrupts a turn of the real CLI (harnesstest.InterruptTurn).
func interrupt(t *testing.T, d *Driver, req process.LaunchRequest) (harnesstest.Turn, process.Event) {
	t.Helper()
	return harnesstest.InterruptTurn(t, d, harnesstest.Codex(t), req)
}

// TestRealCodex runs Codex itself against the stand-in provider and bridge with the
// plans launch makes, and reads its real output with parse: a text answer, the session
// resumed by the id Codex chose, a tool called through the bridge and its result, and
// auth and quota failures.
func TestRealCodex(t *testing.T) {
	p := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer})
	b := harnesstest.NewBridge(t, "bridge-token-1")
	files := t.TempDir()
	bridge := &process.Bridge{ServerName: "capsule", URL: b.URL, BearerToken: b.Token, ToolNames: []string{harnesstest.EchoTool}}
	model := ptr("gpt-stand-in")

	tr := runTurn(t, New(), process.LaunchRequest{Model: model, SystemPrompt: "- You are a capsule.", SessionID: "runtime-id", Task: "What is the answer?"}, files, p)
	harnesstest.Capture(t, *update, "text", tr.Res.Lines)
	if tr.Res.Err != nil {
		t.Fatalf("codex: %v\n%s", tr.Res.Err, tr.Res.Stderr)
	}
	ss := harnesstest.Cases(tr.Events, process.SessionStarted)
	if len(ss) != 1 || ss[0].SessionID == "" || ss[0].Auth != "api-key" || ss[0].Model == nil || *ss[0].Model != *model {
		t.Fatalf("session-started: %+v", ss)
	}
	for _, n := range harnesstest.Cases(tr.Events, process.Note) {
		if !strings.Contains(n.Text, "Model metadata") { // the stand-in model is unknown to Codex
			t.Errorf("note: %s", n.Text)
		}
	}
	if txt := harnesstest.Cases(tr.Events, process.Text); len(txt) != 1 || txt[0].Text != answer {
		t.Errorf("text: %+v", txt)
	}
	us := harnesstest.Cases(tr.Events, process.UsageEvent)
	if len(us) != 1 {
		t.Fatalf("usage: %+v", us)
	}
	u := us[0].Usage
	if *u.Input != harnesstest.InputTokens || *u.Output != harnesstest.OutputTokens || *u.CacheRead != harnesstest.CacheReadTokens ||
		*u.CacheCreation != 0 || *u.Thinking != harnesstest.ReasoningTokens {
		t.Errorf("usage %d/%d/%d/%d/%d", *u.Input, *u.Output, *u.CacheRead, *u.CacheCreation, *u.Thinking)
	}
	if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
		t.Errorf("last event %+v", e)
	}
	if !strings.Contains(string(p.Requests()[0].Body), "- You are a capsule.") {
		t.Errorf("the system prompt did not reach the provider")
	}
	var body struct{ Tools []json.RawMessage }
	json.Unmarshal(p.Requests()[0].Body, &body)
	for _, tool := range body.Tools {
		if strings.Contains(string(tool), "exec_command") || strings.Contains(string(tool), `"shell"`) {
			t.Errorf("Codex's shell was offered: %s", tool)
		}
	}
	for _, r := range p.Requests() {
		if r.Auth != "Bearer "+harnesstest.TestKey {
			t.Errorf("%s %s carried %q, want the placeholder", r.Method, r.Path, r.Auth)
		}
	}

	t.Run("resume", func(t *testing.T) {
		before := len(p.Requests())
		tr := runTurn(t, New(), process.LaunchRequest{Model: model, SessionID: ss[0].SessionID, Resume: true, Task: "And again?"}, files, p)
		// One request, yet Codex 0.169.0 reports the thread's usage, both turns: the
		// driver passes it on as it is (docs/reference/process-drivers.md).
		us := harnesstest.Cases(tr.Events, process.UsageEvent)
		if n := len(p.Requests()) - before; n != 1 || len(us) != 1 || *us[0].Usage.Input != 2*harnesstest.InputTokens {
			t.Errorf("%d requests, usage %+v", n, us)
		}
		harnesstest.Capture(t, *update, "resume", tr.Res.Lines)
		got := harnesstest.Cases(tr.Events, process.SessionStarted)
		if len(got) != 1 || got[0].SessionID != ss[0].SessionID {
			t.Errorf("session-started: %+v", got)
		}
		if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v; stderr %s", e, tr.Res.Stderr)
		}
		reqs := p.Requests()
		if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "What is the answer?") {
			t.Errorf("the resumed request does not hold the first turn")
		}
	})

	t.Run("thinking", func(t *testing.T) {
		const thinking = "Let me think it over."
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Thinking: thinking})
		tr := runTurn(t, New(), process.LaunchRequest{Model: model, Task: "Think, then answer."}, t.TempDir(), tp)
		harnesstest.Capture(t, *update, "thinking", tr.Res.Lines)
		if th := harnesstest.Cases(tr.Events, process.Thinking); len(th) != 1 || th[0].Text != thinking {
			t.Errorf("thinking: %+v", th)
		}
		if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v", e)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		d := New()
		tr, exit := interrupt(t, d, process.LaunchRequest{Model: model, Task: "Take your time."})
		harnesstest.Capture(t, *update, "interrupt", tr.Res.Lines)
		if exit.Case != process.TurnFailed || exit.FailureKind != process.FailCanceled {
			t.Errorf("classify-exit %+v", exit)
		}
		// Codex 0.169.0 prints nothing more on SIGINT and exits 1: classify-exit answers.
		for _, e := range tr.Events {
			if e.Case == process.TurnEnd || e.Case == process.TurnFailed {
				t.Errorf("an interrupted turn ended: %+v", e)
			}
		}
	})

	t.Run("tool", func(t *testing.T) {
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Tool: harnesstest.EchoTool, ToolInput: `{"text":"hi"}`})
		tr := runTurn(t, New(), process.LaunchRequest{Model: model, Bridge: bridge, Task: "Echo hi."}, t.TempDir(), tp)
		harnesstest.Capture(t, *update, "tool", tr.Res.Lines)
		calls, results := harnesstest.Cases(tr.Events, process.ToolCall), harnesstest.Cases(tr.Events, process.ToolResult)
		if len(calls) != 1 || calls[0].ToolName != harnesstest.EchoTool || !jsonEqual(calls[0].ToolInput, `{"text":"hi"}`) {
			t.Errorf("tool-call: %+v", calls)
		}
		if len(results) != 1 || results[0].ToolID != calls[0].ToolID || results[0].Text != "echo: hi" || results[0].IsError {
			t.Errorf("tool-result: %+v", results)
		}
		if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v", e)
		}
		if len(b.Calls()) != 1 || b.Unauthorized() != 0 {
			t.Errorf("bridge: calls %s, unauthorized %d", b.Calls(), b.Unauthorized())
		}
	})

	for _, f := range []struct {
		name   string
		status int
		kind   string
		text   string
	}{{"auth", 401, process.FailAuth, "stand-in refusal"}, {"quota", 429, process.FailQuota, "Quota exceeded"}} {
		t.Run(f.name, func(t *testing.T) {
			fp := harnesstest.NewProvider(t, harnesstest.Script{Status: f.status, ErrorMessage: "stand-in refusal"})
			tr := runTurn(t, New(), process.LaunchRequest{Model: model, Task: "Hello?"}, t.TempDir(), fp)
			harnesstest.Capture(t, *update, f.name, tr.Res.Lines)
			if e := harnesstest.Last(t, tr); e.Case != process.TurnFailed || e.FailureKind != f.kind || !strings.Contains(e.Text, f.text) {
				t.Errorf("last event %+v", e)
			}
		})
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

func ptr[T any](v T) *T { return &v }

// TestPinnedHarnessIsTested: the CLI the tests install (harnesstest.CodexCLI) is one of the
// versions describe() names as tested, under the binary name it runs.
func TestPinnedHarnessIsTested(t *testing.T) {
	if pin := harnesstest.CodexCLI; !slices.Contains(TestedVersions, pin.Version) || New().Describe().Binary != pin.Binary {
		t.Errorf("harnesstest pins %s@%s (%s); the driver was tested with %v and runs %q", pin.Package, pin.Version, pin.Binary, TestedVersions, New().Describe().Binary)
	}
}
