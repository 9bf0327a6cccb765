package claudecode

import (
	"encoding/json"
	"flag"
	"regexp"
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
	return harnesstest.RunTurn(t, d, harnesstest.Claude(t), req, filesDir, p, extraEnv...)
}

// interrupt interrupts a turn of the real CLI (harnesstest.InterruptTurn).
func interrupt(t *testing.T, d *Driver, req process.LaunchRequest) (harnesstest.Turn, process.Event) {
	t.Helper()
	return harnesstest.InterruptTurn(t, d, harnesstest.Claude(t), req)
}

// The stand-in provider's error answers are not retried ten times.
const fewRetries = "CLAUDE_CODE_MAX_RETRIES=0"

// socketScrub takes Claude Code's own socket names out of captured lines.
var socketScrub = harnesstest.Scrub{RE: regexp.MustCompile(`/tmp/cc-socks/\d+\.sock`), With: "/tmp/cc-socks/0.sock"}

// TestRealClaudeCode runs Claude Code itself against the stand-in provider and bridge
// with the plans launch makes, and reads its real output with parse: a text answer
// streamed and whole, a tool called through the bridge and its result, the session
// resumed, and max-turns, auth and quota failures, each with no line left unread.
func TestRealClaudeCode(t *testing.T) {
	p := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer})
	b := harnesstest.NewBridge(t, "bridge-token-1")
	files := t.TempDir()
	bridge := &process.Bridge{ServerName: "capsule", URL: b.URL, BearerToken: b.Token, ToolNames: []string{harnesstest.EchoTool}}
	const session = "8d0d5f0e-3f53-4c1a-9d55-2b7c1b6d1a01"

	d := New()
	tr := runTurn(t, d, process.LaunchRequest{SystemPrompt: "- You are a capsule.", SessionID: session, Task: "What is the answer?"}, files, p)
	harnesstest.Capture(t, *update, "text", tr.Res.Lines, socketScrub)
	if tr.Res.Err != nil {
		t.Fatalf("claude: %v\n%s", tr.Res.Err, tr.Res.Stderr)
	}
	if notes := harnesstest.Cases(tr.Events, process.Note); len(notes) > 0 {
		t.Errorf("unread lines: %+v", notes)
	}
	ss := harnesstest.Cases(tr.Events, process.SessionStarted)
	if len(ss) != 1 || ss[0].SessionID != session || ss[0].Auth != "api-key" || ss[0].Model == nil {
		t.Errorf("session-started: %+v", ss)
	}
	var streamed strings.Builder
	for _, e := range harnesstest.Cases(tr.Events, process.TextDelta) {
		streamed.WriteString(e.Text)
	}
	if streamed.String() != answer || len(harnesstest.Cases(tr.Events, process.TextDelta)) < 2 {
		t.Errorf("text-deltas %q, want %q in parts", streamed.String(), answer)
	}
	if txt := harnesstest.Cases(tr.Events, process.Text); len(txt) != 1 || txt[0].Text != answer {
		t.Errorf("text: %+v", txt)
	}
	us := harnesstest.Cases(tr.Events, process.UsageEvent)
	if len(us) == 0 {
		t.Fatal("no usage")
	}
	u := us[len(us)-1].Usage
	if *u.Input != harnesstest.InputTokens || *u.Output != harnesstest.OutputTokens || *u.CacheRead != harnesstest.CacheReadTokens ||
		*u.CacheCreation != harnesstest.CacheCreationTokens {
		t.Errorf("usage %d/%d/%d/%d", *u.Input, *u.Output, *u.CacheRead, *u.CacheCreation)
	}
	if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
		t.Errorf("last event %+v", e)
	}
	if body := string(p.Requests()[0].Body); !strings.Contains(body, "- You are a capsule.") || !strings.Contains(body, "What is the answer?") {
		t.Errorf("the system prompt or the task did not reach the provider")
	}
	for _, r := range p.Requests() {
		if r.Auth != harnesstest.TestKey {
			t.Errorf("%s %s carried key %q, want the placeholder", r.Method, r.Path, r.Auth)
		}
	}

	t.Run("resume", func(t *testing.T) {
		tr := runTurn(t, New(), process.LaunchRequest{SessionID: session, Resume: true, Task: "And again?"}, files, p)
		harnesstest.Capture(t, *update, "resume", tr.Res.Lines, socketScrub)
		ss := harnesstest.Cases(tr.Events, process.SessionStarted)
		if len(ss) != 1 || ss[0].SessionID != session {
			t.Errorf("session-started: %+v", ss)
		}
		if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v; stderr %s", e, tr.Res.Stderr)
		}
		// The resumed conversation reached the provider: the first turn's answer is in it.
		reqs := p.Requests()
		if body := string(reqs[len(reqs)-1].Body); !strings.Contains(body, "What is the answer?") {
			t.Errorf("the resumed request does not hold the first turn")
		}
	})

	t.Run("thinking", func(t *testing.T) {
		const thinking = "Let me think it over."
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Thinking: thinking})
		tr := runTurn(t, New(), process.LaunchRequest{Task: "Think, then answer."}, t.TempDir(), tp)
		harnesstest.Capture(t, *update, "thinking", tr.Res.Lines, socketScrub)
		if notes := harnesstest.Cases(tr.Events, process.Note); len(notes) > 0 {
			t.Errorf("unread lines: %+v", notes)
		}
		var streamed strings.Builder
		for _, e := range harnesstest.Cases(tr.Events, process.ThinkingDelta) {
			streamed.WriteString(e.Text)
		}
		if streamed.String() != thinking {
			t.Errorf("thinking-deltas %q", streamed.String())
		}
		if th := harnesstest.Cases(tr.Events, process.Thinking); len(th) != 1 || th[0].Text != thinking {
			t.Errorf("thinking: %+v", th)
		}
		if e := harnesstest.Last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v", e)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		d := New()
		tr, exit := interrupt(t, d, process.LaunchRequest{Task: "Take your time."})
		harnesstest.Capture(t, *update, "interrupt", tr.Res.Lines, socketScrub)
		if exit.Case != process.TurnFailed || exit.FailureKind != process.FailCanceled {
			t.Errorf("classify-exit %+v", exit)
		}
		// Claude Code 2.1.328 answers SIGINT with a result line of its own (terminal_reason
		// aborted_streaming) and exits 0.
		if e := harnesstest.Last(t, tr); e.Case != process.TurnFailed || e.FailureKind != process.FailCanceled {
			t.Errorf("last event %+v", e)
		}
	})

	t.Run("tool", func(t *testing.T) {
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Tool: harnesstest.EchoTool, ToolInput: `{"text":"hi"}`})
		tr := runTurn(t, New(), process.LaunchRequest{Bridge: bridge, SessionID: "not-a-uuid", Task: "Echo hi."}, t.TempDir(), tp)
		harnesstest.Capture(t, *update, "tool", tr.Res.Lines, socketScrub)
		if notes := harnesstest.Cases(tr.Events, process.Note); len(notes) > 0 {
			t.Errorf("unread lines: %+v", notes)
		}
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
		// Built-in tools are off: the model was offered the bridge's tool alone.
		var req struct{ Tools []struct{ Name string } }
		json.Unmarshal(tp.Requests()[0].Body, &req)
		if len(req.Tools) != 1 || req.Tools[0].Name != "mcp__capsule__echo" {
			t.Errorf("tools offered: %+v", req.Tools)
		}
	})

	t.Run("max-turns", func(t *testing.T) {
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Tool: harnesstest.EchoTool, ToolInput: `{"text":"hi"}`})
		cfg := `{"max_turns": 1}`
		tr := runTurn(t, New(), process.LaunchRequest{Bridge: bridge, Config: &cfg, Task: "Echo hi."}, t.TempDir(), tp)
		harnesstest.Capture(t, *update, "max-turns", tr.Res.Lines, socketScrub)
		if e := harnesstest.Last(t, tr); e.Case != process.TurnFailed || e.FailureKind != process.FailMaxTurns {
			t.Errorf("last event %+v", e)
		}
	})

	for _, f := range []struct {
		name   string
		status int
		kind   string
	}{{"auth", 401, process.FailAuth}, {"quota", 429, process.FailQuota}} {
		t.Run(f.name, func(t *testing.T) {
			fp := harnesstest.NewProvider(t, harnesstest.Script{Status: f.status, ErrorMessage: "stand-in refusal"})
			tr := runTurn(t, New(), process.LaunchRequest{Task: "Hello?"}, t.TempDir(), fp, fewRetries)
			harnesstest.Capture(t, *update, f.name, tr.Res.Lines, socketScrub)
			if e := harnesstest.Last(t, tr); e.Case != process.TurnFailed || e.FailureKind != f.kind || !strings.Contains(e.Text, "stand-in refusal") {
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

// TestPinnedHarnessIsTested: the CLI the tests install (harnesstest.ClaudeCode) is one of the
// versions describe() names as tested, under the binary name it runs.
func TestPinnedHarnessIsTested(t *testing.T) {
	if pin := harnesstest.ClaudeCode; !slices.Contains(TestedVersions, pin.Version) || New().Describe().Binary != pin.Binary {
		t.Errorf("harnesstest pins %s@%s (%s); the driver was tested with %v and runs %q", pin.Package, pin.Version, pin.Binary, TestedVersions, New().Describe().Binary)
	}
}
