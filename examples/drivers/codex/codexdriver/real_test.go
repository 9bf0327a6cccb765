package codexdriver

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/harnesstest"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

var update = flag.Bool("update", false, "rewrite testdata/*.jsonl with what the real CLI printed")

const answer = "The answer is 42."

// turn is one run of the real CLI as the runtime would run it: launch's plan, its files
// written into filesDir, {files_dir} and {gateway_url} replaced, in its own run folder.
type turn struct {
	events []process.Event
	res    harnesstest.Result
}

// prepare plans a turn as the runtime would (harnesstest.Plan).
func prepare(t *testing.T, d *Driver, req process.LaunchRequest, filesDir string, p *harnesstest.Provider) (args, env []string) {
	t.Helper()
	plan, err := d.Launch(req)
	if err != nil {
		t.Fatal(err)
	}
	return harnesstest.Plan(t, plan, filesDir, p.URL)
}

func runTurn(t *testing.T, d *Driver, req process.LaunchRequest, filesDir string, p *harnesstest.Provider, extraEnv ...string) turn {
	t.Helper()
	args, env := prepare(t, d, req, filesDir, p)
	res := harnesstest.Run(t, t.TempDir(), harnesstest.Codex(t), args, append(env, extraEnv...))
	return turn{events: d.Parse(res.Lines), res: res}
}

// interrupt starts a turn the provider never finishes, sends SIGINT once the request
// is in, and reads what the harness printed until it exited.
func interrupt(t *testing.T, d *Driver, req process.LaunchRequest) (turn, process.Event) {
	t.Helper()
	sp := harnesstest.NewProvider(t, harnesstest.Script{Stall: true})
	args, env := prepare(t, d, req, t.TempDir(), sp)
	res, x := harnesstest.Interrupt(t, harnesstest.Codex(t), args, env, sp)
	tr := turn{events: d.Parse(res.Lines), res: res}
	for _, e := range tr.events {
		x.SawTerminal = x.SawTerminal || e.Case == process.TurnEnd || e.Case == process.TurnFailed
	}
	t.Logf("interrupted: exit %v, signal %v, saw terminal %v; stderr %q", deref(x.Code), deref(x.Signal), x.SawTerminal, res.Stderr)
	return tr, d.ClassifyExit(x)
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

var scrubs = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`/tmp/[A-Za-z0-9_./-]*?/(\d{3})(/home)?`), "/run/$1$2"},
	{regexp.MustCompile(`-tmp-[A-Za-z0-9_-]*?-(\d{3})`), "-run-$1"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:0"},
}

// capture writes the lines into testdata/name.jsonl under -update, host paths and
// ports scrubbed.
func capture(t *testing.T, name string, lines []string) {
	t.Helper()
	if !*update {
		return
	}
	var b strings.Builder
	for _, l := range lines {
		for _, s := range scrubs {
			l = s.re.ReplaceAllString(l, s.with)
		}
		b.WriteString(l + "\n")
	}
	if err := os.WriteFile(filepath.Join("testdata", name+".jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func cases(events []process.Event, c string) []process.Event {
	var out []process.Event
	for _, e := range events {
		if e.Case == c {
			out = append(out, e)
		}
	}
	return out
}

func last(t *testing.T, tr turn) process.Event {
	t.Helper()
	if len(tr.events) == 0 {
		t.Fatalf("no events; stderr %s, %v", tr.res.Stderr, tr.res.Err)
	}
	return tr.events[len(tr.events)-1]
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
	capture(t, "text", tr.res.Lines)
	if tr.res.Err != nil {
		t.Fatalf("codex: %v\n%s", tr.res.Err, tr.res.Stderr)
	}
	ss := cases(tr.events, process.SessionStarted)
	if len(ss) != 1 || ss[0].SessionID == "" || ss[0].Auth != "api-key" || ss[0].Model == nil || *ss[0].Model != *model {
		t.Fatalf("session-started: %+v", ss)
	}
	for _, n := range cases(tr.events, process.Note) {
		if !strings.Contains(n.Text, "Model metadata") { // the stand-in model is unknown to Codex
			t.Errorf("note: %s", n.Text)
		}
	}
	if txt := cases(tr.events, process.Text); len(txt) != 1 || txt[0].Text != answer {
		t.Errorf("text: %+v", txt)
	}
	us := cases(tr.events, process.UsageEvent)
	if len(us) != 1 {
		t.Fatalf("usage: %+v", us)
	}
	u := us[0].Usage
	if *u.Input != harnesstest.InputTokens || *u.Output != harnesstest.OutputTokens || *u.CacheRead != harnesstest.CacheReadTokens ||
		*u.CacheCreation != 0 || *u.Thinking != harnesstest.ReasoningTokens {
		t.Errorf("usage %d/%d/%d/%d/%d", *u.Input, *u.Output, *u.CacheRead, *u.CacheCreation, *u.Thinking)
	}
	if e := last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
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
		us := cases(tr.events, process.UsageEvent)
		if n := len(p.Requests()) - before; n != 1 || len(us) != 1 || *us[0].Usage.Input != 2*harnesstest.InputTokens {
			t.Errorf("%d requests, usage %+v", n, us)
		}
		capture(t, "resume", tr.res.Lines)
		got := cases(tr.events, process.SessionStarted)
		if len(got) != 1 || got[0].SessionID != ss[0].SessionID {
			t.Errorf("session-started: %+v", got)
		}
		if e := last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v; stderr %s", e, tr.res.Stderr)
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
		capture(t, "thinking", tr.res.Lines)
		if th := cases(tr.events, process.Thinking); len(th) != 1 || th[0].Text != thinking {
			t.Errorf("thinking: %+v", th)
		}
		if e := last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
			t.Errorf("last event %+v", e)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		d := New()
		tr, exit := interrupt(t, d, process.LaunchRequest{Model: model, Task: "Take your time."})
		capture(t, "interrupt", tr.res.Lines)
		if exit.Case != process.TurnFailed || exit.FailureKind != process.FailCanceled {
			t.Errorf("classify-exit %+v", exit)
		}
		// Codex 0.169.0 prints nothing more on SIGINT and exits 1: classify-exit answers.
		for _, e := range tr.events {
			if e.Case == process.TurnEnd || e.Case == process.TurnFailed {
				t.Errorf("an interrupted turn ended: %+v", e)
			}
		}
	})

	t.Run("tool", func(t *testing.T) {
		tp := harnesstest.NewProvider(t, harnesstest.Script{Answer: answer, Tool: harnesstest.EchoTool, ToolInput: `{"text":"hi"}`})
		tr := runTurn(t, New(), process.LaunchRequest{Model: model, Bridge: bridge, Task: "Echo hi."}, t.TempDir(), tp)
		capture(t, "tool", tr.res.Lines)
		calls, results := cases(tr.events, process.ToolCall), cases(tr.events, process.ToolResult)
		if len(calls) != 1 || calls[0].ToolName != harnesstest.EchoTool || !jsonEqual(calls[0].ToolInput, `{"text":"hi"}`) {
			t.Errorf("tool-call: %+v", calls)
		}
		if len(results) != 1 || results[0].ToolID != calls[0].ToolID || results[0].Text != "echo: hi" || results[0].IsError {
			t.Errorf("tool-result: %+v", results)
		}
		if e := last(t, tr); e.Case != process.TurnEnd || e.Text != answer {
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
			capture(t, f.name, tr.res.Lines)
			if e := last(t, tr); e.Case != process.TurnFailed || e.FailureKind != f.kind || !strings.Contains(e.Text, f.text) {
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
