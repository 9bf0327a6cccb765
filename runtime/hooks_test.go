package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// fakeHook answers every call with out (or err), and records what it was handed.
type fakeHook struct {
	out   HookOutput
	err   error
	wait  bool // block until the call's deadline
	calls []string
	recs  []any
}

func (f *fakeHook) Call(ctx context.Context, fn string, record any) (HookOutput, error) {
	f.calls = append(f.calls, fn)
	f.recs = append(f.recs, record)
	if f.wait {
		<-ctx.Done()
		return HookOutput{}, ctx.Err()
	}
	return f.out, f.err
}

func hookManifest(t *testing.T, yaml string) *manifest.ArtifactManifest {
	t.Helper()
	am, _, err := manifest.ParseArtifactManifest([]byte("name: h\nversion: 1.0.0\nruntime: hook\n"+yaml), "murmur.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return am
}

// collect is a sink keeping every event it is handed.
type collect struct{ events []*Event }

func (c *collect) Event(e *Event) error { c.events = append(c.events, e); return nil }

func TestStreamAskAndThen(t *testing.T) {
	c := &collect{}
	denier := sinkFunc(func(e *Event) error {
		if e.Type == EventToolProposed {
			e.Deny("first", "no")
			e.Deny("second", "ignored: the first denial stands")
			e.Then(EventHook, HookCall{Hook: "first"}, nil)
		}
		if e.Type == EventToolCall && e.Deny("x", "y") {
			t.Error("Deny on an event Emit sent must report it is no decision point")
		}
		return nil
	})
	s := NewStream("ses_1", denier, c)
	id, v, err := s.Ask(EventToolProposed, "p", ToolProposed{ToolName: "rm"}, nil)
	if err != nil || v != (Verdict{Denied: true, Reason: "no", By: "first"}) {
		t.Fatalf("Ask = %+v, %v", v, err)
	}
	s.Emit(EventToolCall, id, ToolCall{}, nil)
	var types []string
	for _, e := range c.events {
		types = append(types, e.Type)
	}
	if got := strings.Join(types, ","); got != "tool_call_proposed,hook,tool_call" {
		t.Fatalf("events %s", got)
	}
	if c.events[1].ParentID != id {
		t.Errorf("the hook event's parent is %q, want the event it answered %q", c.events[1].ParentID, id)
	}
	if _, v, _ := NewStream("ses_2", c).Ask(EventToolProposed, "", ToolProposed{}, nil); v.Denied {
		t.Error("no sink denied, yet the verdict is a denial")
	}
}

type sinkFunc func(*Event) error

func (f sinkFunc) Event(e *Event) error { return f(e) }

func TestHookSinkVerdicts(t *testing.T) {
	tests := []struct {
		name     string
		yaml     string
		guest    *fakeHook
		kind     string
		denied   bool
		want     HookCall // Hook, Binding, Output, Reason, Honoured, and whether Error is set
		wantCall bool
	}{
		{"deny honoured", "binding: on-tool-call\ncommit_policy: deny\n", &fakeHook{out: HookOutput{OutputDeny, "rm is not allowed"}}, KindWasm, true,
			HookCall{Binding: "on-tool-call", Output: "deny", Reason: "rm is not allowed", Honoured: true}, true},
		{"empty reason still denies", "binding: on-tool-call\ncommit_policy: deny\n", &fakeHook{out: HookOutput{Case: OutputDeny}}, KindWasm, true,
			HookCall{Binding: "on-tool-call", Output: "deny", Reason: "hook h denied this call without giving a reason", Honoured: true}, true},
		{"deny without commit_policy deny is not honoured", "binding: on-tool-call\n", &fakeHook{out: HookOutput{OutputDeny, "no"}}, KindWasm, false,
			HookCall{Binding: "on-tool-call", Output: "deny", Reason: "no"}, true},
		{"none", "", &fakeHook{out: HookOutput{Case: OutputNone}}, KindWasm, false,
			HookCall{Binding: "on-tool-call", Output: "none", Honoured: true}, true},
		{"shell commands answer on-shell", "binding: on-shell\ncommit_policy: deny\n", &fakeHook{out: HookOutput{OutputDeny, "no"}}, KindShell, true,
			HookCall{Binding: "on-shell", Output: "deny", Reason: "no", Honoured: true}, true},
		{"other binding is not called", "binding: on-shell\ncommit_policy: deny\n", &fakeHook{out: HookOutput{OutputDeny, "no"}}, KindWasm, false, HookCall{}, false},
		{"a failing hook denies nothing", "binding: on-tool-call\ncommit_policy: deny\n", &fakeHook{err: errors.New("trap")}, KindWasm, false,
			HookCall{Binding: "on-tool-call", Output: "error", Error: "trap"}, true},
		{"deadline", "binding: on-tool-call\ncommit_policy: deny\n", &fakeHook{wait: true}, KindWasm, false,
			HookCall{Binding: "on-tool-call", Output: "error", Error: "no answer within 1ms"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &collect{}
			hk := &Hook{Name: "h", Manifest: hookManifest(t, tt.yaml), Guest: tt.guest, Deadline: time.Millisecond}
			s := NewStream("ses_1", NewHookSink(context.Background(), hk), c)
			_, v, err := s.Ask(EventToolProposed, "", ToolProposed{Turn: 2, ToolName: "sh", Kind: tt.kind, InputBytes: 9}, map[string]string{"input": `{"cmd":1}`})
			if err != nil || v.Denied != tt.denied {
				t.Fatalf("verdict %+v, %v; want denied %v", v, err, tt.denied)
			}
			if !tt.wantCall {
				if len(tt.guest.calls) != 0 || len(c.events) != 1 {
					t.Fatalf("called %v, events %d", tt.guest.calls, len(c.events))
				}
				return
			}
			switch rec := tt.guest.recs[0].(type) {
			case ToolEventRecord:
				if rec.Input != `{"cmd":1}` || rec.Turn != 2 || rec.Outcome != nil {
					t.Errorf("record %+v: want the full input, no outcome", rec)
				}
			case ShellEventRecord:
				// No sandbox planned the command: the name called and the input as is.
				if rec.Binary != "sh" || rec.Command != `{"cmd":1}` || rec.Turn != 2 || rec.Argv == nil || rec.Outcome != nil {
					t.Errorf("record %+v: want the shell event of the proposal, no outcome", rec)
				}
			default:
				t.Errorf("record %T", rec)
			}
			if len(c.events) != 2 {
				t.Fatalf("%d events, want the proposal and its hook event", len(c.events))
			}
			got := c.events[1].Data.(HookCall)
			if !strings.HasPrefix(got.Error, tt.want.Error) || (got.Error == "") != (tt.want.Error == "") {
				t.Errorf("error %q, want %q…", got.Error, tt.want.Error)
			}
			got.Error, got.DurationMS, tt.want.Hook, tt.want.Mode, tt.want.Error = "", 0, "h", "blocking", ""
			if got != tt.want {
				t.Errorf("hook event %+v, want %+v", got, tt.want)
			}
			if v.Denied && v.Reason != tt.want.Reason {
				t.Errorf("reason %q, want %q", v.Reason, tt.want.Reason)
			}
		})
	}
}

// TestDeniedToolCallReachesTheModel runs the agent loop against the cassette with a
// blocking on-tool-call hook denying echo: echo never runs, the model's next turn holds
// the hook's reason as the call's error result, and the trace has the proposal, the
// hook's answer and the denied call, in that order.
func TestDeniedToolCallReachesTheModel(t *testing.T) {
	f := newAgentFixture(t, "anthropic-messages", agentCassette, "x-api-key")
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "${EP}", api_key: "k"}}
  - {name: echo, version: 1.0.0}
inference: {driver: {artifact: anthropic-messages}, model: claude-test, max_turns: 4}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
trace: {capture: content}
`), 0o644)
	m, err := manifest.Load(mpath, manifest.WithLookupEnv(func(k string) (string, bool) { return f.srv.URL, k == "EP" }))
	if err != nil {
		t.Fatal(err)
	}
	policy := &fakeHook{out: HookOutput{OutputDeny, "echo is off limits today"}}
	hk := &Hook{Name: "policy", Manifest: hookManifest(t, "binding: on-tool-call\ncommit_policy: deny\n"), Guest: policy, Deadline: 30 * time.Second}
	res, err := f.e.RunOnce(context.Background(), m, RunOptions{Registry: f.reg, Task: "please echo hi",
		Session: SessionConfig{WorkRoot: t.TempDir(), Sinks: []Sink{NewHookSink(context.Background(), hk)}}})
	if err != nil || res.Status != StateCompleted {
		t.Fatalf("%+v, %v", res, err)
	}
	f.mu.Lock()
	bodies := append([]string(nil), f.bodies...)
	f.mu.Unlock()
	if len(bodies) != 2 || !strings.Contains(bodies[1], "refused by hook policy: echo is off limits today") {
		t.Fatalf("the model's next turn lacks the hook's reason: %q", bodies)
	}
	trace, _ := os.ReadFile(filepath.Join(res.Records, "trace.jsonl"))
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
		var ev struct {
			Type   string `json:"event_type"`
			Status string `json:"status"`
			Output string `json:"output"`
			Hook   string `json:"hook"`
		}
		json.Unmarshal([]byte(line), &ev)
		switch ev.Type {
		case EventToolProposed:
			order = append(order, ev.Type)
		case EventHook:
			order = append(order, ev.Type+":"+ev.Hook+":"+ev.Output)
		case EventToolCall:
			order = append(order, ev.Type+":"+ev.Status)
		}
	}
	// The second hook event is the post-call observation of the refused call: a deny
	// there is recorded, not honoured.
	want := "tool_call_proposed,hook:policy:deny,tool_call:denied,hook:policy:deny"
	if got := strings.Join(order, ","); got != want {
		t.Errorf("trace %s, want %s", got, want)
	}
}

// gatedHook is an async hook whose first call signals started and then waits for gate;
// it keeps the records it answered, in order (its worker is its only caller).
type gatedHook struct {
	started, gate chan struct{}
	once          sync.Once
	fns           []string
}

func (g *gatedHook) Call(ctx context.Context, fn string, record any) (HookOutput, error) {
	g.once.Do(func() { close(g.started); <-g.gate })
	g.fns = append(g.fns, fn)
	return HookOutput{Case: OutputNone}, nil
}

// TestAsyncHookQueue feeds an async hook with a queue of one while its first call is
// held: on_overflow drop records the overflowing event as dropped, block waits for room;
// either way what was queued is answered in order and drained by session_end, whose
// hook events follow it in the stream.
func TestAsyncHookQueue(t *testing.T) {
	tests := []struct {
		overflow string
		wantFns  string
		dropped  int
	}{
		{"drop", "on-session-start,on-task-start,on-session-end", 1},
		{"block", "on-session-start,on-task-start,on-task-end,on-session-end", 0},
	}
	for _, tt := range tests {
		t.Run(tt.overflow, func(t *testing.T) {
			g := &gatedHook{started: make(chan struct{}), gate: make(chan struct{})}
			hk := &Hook{Name: "audit", Manifest: hookManifest(t, "execution_mode: async\non_overflow: "+tt.overflow+"\n"), Guest: g, Deadline: time.Minute, QueueDepth: 1}
			c := &collect{}
			s := NewStream("ses_1", NewHookSink(context.Background(), hk), c)
			s.Emit(EventSessionStart, "", SessionStart{Capsule: "c"}, nil)
			<-g.started // the worker holds session_start; the queue is empty
			s.Emit(EventTaskStart, "", TaskStart{TaskID: "t"}, nil)
			emitted := make(chan struct{})
			go func() {
				// drop: the queue is full, task_end is dropped at once; block: waits for room.
				s.Emit(EventTaskEnd, "", TaskEnd{TaskID: "t"}, nil)
				close(emitted)
			}()
			if tt.overflow == "drop" {
				<-emitted
			}
			close(g.gate)
			<-emitted
			s.Emit(EventSessionEnd, "", SessionEnd{}, nil)
			if got := strings.Join(g.fns, ","); got != tt.wantFns {
				t.Errorf("the hook answered %s, want %s", got, tt.wantFns)
			}
			var answered, dropped int
			end := -1
			for i, e := range c.events {
				if e.Type == EventSessionEnd {
					end = i
				}
				if e.Type == EventHook {
					switch rec := e.Data.(HookCall); rec.Output {
					case "dropped":
						dropped++
					case OutputNone:
						answered++
						if rec.Answers == "" || rec.Mode != "async" {
							t.Errorf("async answer %+v names no event it answers", rec)
						}
					}
				}
			}
			if dropped != tt.dropped || answered != len(g.fns) {
				t.Errorf("%d dropped, %d answered; want %d, %d", dropped, answered, tt.dropped, len(g.fns))
			}
			if last := c.events[len(c.events)-1]; end < 0 || last.Type != EventHook {
				t.Errorf("the drained answers should follow session_end")
			}
		})
	}
}

// rmCassette has the model ask echo to run something holding "rm", then end.
const rmCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "clean up", "turns": [
   {"id": "r1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "rm -rf /tmp/x"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "r2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "I may not."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]}]}`

// publishHook publishes a hook artifact built from the guest package at pkg (relative to
// runtime/), its manifest carrying keys (binding, execution_mode, …).
func publishHook(t *testing.T, reg *registry.Local, name, pkg, keys string) {
	t.Helper()
	publishHookDir(t, reg, name, []byte("name: "+name+"\nversion: 1.0.0\nruntime: hook\n"+keys), pkg)
}

// publishHookDir packs and publishes a hook artifact folder: yaml as its murmur.yaml, the
// module built from pkg as <name>.wasm.
func publishHookDir(t *testing.T, reg *registry.Local, name string, yaml []byte, pkg string) {
	t.Helper()
	publishArtifact(t, reg, name, yaml, guestbuild.Wasm(t, pkg))
}

// The example hooks' sources, built by the tests as `make guests` builds them.
const (
	policyHookPkg = "../examples/guests/policy-hook"
	auditHookPkg  = "../examples/guests/audit-hook"
)

// TestWasmHooksInASession runs a capsule with two real hook guests against the
// cassette: the blocking policy hook denies the echo call holding "rm" (never run, its
// reason in the model's next turn), the async audit hook writes one line per event to
// out/audit.jsonl in stream order, and the trace records both hooks' answers.
func TestWasmHooksInASession(t *testing.T) {
	f := newAgentFixture(t, "anthropic-messages", rmCassette, "x-api-key")
	publishHook(t, f.reg, "policy", policyHookPkg, "binding: on-tool-call\ncommit_policy: deny\n")
	publishHook(t, f.reg, "audit", auditHookPkg, "execution_mode: async\n")
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "${EP}", api_key: "k"}}
  - {name: echo, version: 1.0.0}
  - {name: policy, version: 1.0.0, runtime: hook}
  - {name: audit, version: 1.0.0, runtime: hook}
inference: {driver: {artifact: anthropic-messages}, model: claude-test, max_turns: 4}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
trace: {capture: content}
`), 0o644)
	m, err := manifest.Load(mpath, manifest.WithLookupEnv(func(k string) (string, bool) { return f.srv.URL, k == "EP" }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.e.RunOnce(context.Background(), m, RunOptions{Registry: f.reg, Task: "please clean up", Session: SessionConfig{WorkRoot: t.TempDir()}})
	if err != nil || res.Status != StateCompleted {
		t.Fatalf("%+v, %v", res, err)
	}
	f.mu.Lock()
	bodies := append([]string(nil), f.bodies...)
	f.mu.Unlock()
	if len(bodies) != 2 || !strings.Contains(bodies[1], "refused by hook policy: policy-hook: echo mentions rm") {
		t.Fatalf("the model's next turn lacks the hook's reason: %q", bodies)
	}

	audit, err := os.ReadFile(filepath.Join(res.Workdir, "out", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
		var l struct {
			Event  string `json:"event"`
			Record struct {
				Outcome *struct{ Status string } `json:"outcome"`
			} `json:"record"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if l.Record.Outcome != nil {
			l.Event += ":" + l.Record.Outcome.Status
		}
		events = append(events, l.Event)
	}
	want := "on-session-start,on-task-start,on-inference,on-tool-call,on-tool-call:denied,on-inference,on-task-end,on-session-end"
	if got := strings.Join(events, ","); got != want {
		t.Errorf("audit.jsonl events %s, want %s", got, want)
	}

	trace, _ := os.ReadFile(filepath.Join(res.Records, "trace.jsonl"))
	var hooks []string
	for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
		var ev struct {
			Type    string `json:"event_type"`
			Hook    string `json:"hook"`
			Binding string `json:"binding"`
			Output  string `json:"output"`
			Error   string `json:"error"`
		}
		json.Unmarshal([]byte(line), &ev)
		if ev.Type == EventHook {
			if ev.Error != "" {
				t.Errorf("hook %s at %s failed: %s", ev.Hook, ev.Binding, ev.Error)
			}
			hooks = append(hooks, ev.Hook+":"+ev.Binding+":"+ev.Output)
		}
	}
	for _, h := range []string{"policy:on-tool-call:deny", "policy:on-tool-call:none", "audit:on-session-start:none", "audit:on-session-end:none"} {
		if !slices.Contains(hooks, h) {
			t.Errorf("trace hook events %v lack %s", hooks, h)
		}
	}
	if n := len(hooks); n != 2+len(events) {
		t.Errorf("%d hook events in the trace, want %d (policy twice, audit once per event)", n, 2+len(events))
	}
}

// hostReopening hosts a threaded agent capsule (recdriver answering "you said: …",
// lifecycle as given) with sinks on its sessions' streams.
func hostReopening(t *testing.T, lifecycle string, sinks ...Sink) *Hosted {
	t.Helper()
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "recdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/recdriver"))
	mpath := filepath.Join(t.TempDir(), "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: reopening
version: 1.0.0
artifacts:
  - {name: recdriver, version: 1.0.0, runtime: driver}
inference: {driver: {artifact: recdriver}, model: m, max_turns: 3}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
lifecycle: {conversation: threaded`+lifecycle+`}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := e.Serve(context.Background(), m, ServeOptions{Registry: reg, Session: SessionConfig{WorkRoot: t.TempDir(), Sinks: sinks}})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReopenTask: a blocking on-task-end hook with commit_policy reopen-task that
// answers reopen-task reopens the completed task with its message as the next user
// turn (after the conversation so far), up to lifecycle.max_task_reopens; the task's
// subscribers see the message as progress (a working status update over A2A). Without
// that commit_policy the answer is recorded, not honoured.
func TestReopenTask(t *testing.T) {
	tests := []struct {
		name, keys, lifecycle string
		reopens               int // honoured
		calls                 int // on-task-end calls
	}{
		{"reopened up to the default", "binding: on-task-end\ncommit_policy: reopen-task\n", "", manifest.DefaultMaxTaskReopens, manifest.DefaultMaxTaskReopens + 1},
		{"max_task_reopens", "binding: on-task-end\ncommit_policy: reopen-task\n", ", max_task_reopens: 1", 1, 2},
		{"no reopen-task commit_policy", "binding: on-task-end\n", "", 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &fakeHook{out: HookOutput{OutputReopenTask, "and once more"}}
			hk := &Hook{Name: "reopener", Manifest: hookManifest(t, tt.keys), Guest: g, Deadline: time.Minute}
			h := hostReopening(t, tt.lifecycle, NewHookSink(context.Background(), hk))
			seen := &collect{}
			out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_r", Text: "first", Sink: seen})
			want := "you said: first"
			if tt.reopens > 0 {
				want = "you said: and once more"
			}
			if out.State != StateCompleted || out.Result != want {
				t.Fatalf("task: %+v, want %q", out, want)
			}
			if len(g.calls) != tt.calls {
				t.Errorf("on-task-end called %d times, want %d", len(g.calls), tt.calls)
			}
			progress := 0
			for _, e := range seen.events {
				if c, ok := e.Data.(Chunk); ok && c.Text == "and once more" {
					progress++
				}
			}
			if progress != tt.reopens {
				t.Errorf("%d progress messages, want %d", progress, tt.reopens)
			}
			// Each reopened run hands the driver the conversation so far, then the message.
			data, _ := os.ReadFile(filepath.Join(out.Layout.Work, "out", "driver-inputs.jsonl"))
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != tt.reopens+1 {
				t.Fatalf("%d driver inputs, want %d", len(lines), tt.reopens+1)
			}
			var last struct{ Messages []agentMessage }
			json.Unmarshal([]byte(lines[len(lines)-1]), &last)
			if n := len(last.Messages); n != 2*tt.reopens+1 || last.Messages[0].Content[0].Text != "first" || last.Messages[n-1].Content[0].Text != map[bool]string{true: "and once more", false: "first"}[tt.reopens > 0] {
				t.Errorf("the last run sent %s", mustJSON(last.Messages))
			}
			// The task's thread, what the context's next task is given, is all its runs'.
			var kept []agentMessage
			json.Unmarshal(out.Thread.Messages, &kept)
			if n := len(kept); n != 2*(tt.reopens+1) || kept[0].Content[0].Text != "first" || kept[n-1].Content[0].Text != want {
				t.Errorf("the task's thread is %s", out.Thread.Messages)
			}
			trace, _ := os.ReadFile(out.Layout.Trace)
			honoured := 0
			for _, line := range strings.Split(strings.TrimSpace(string(trace)), "\n") {
				var ev struct {
					Type     string `json:"event_type"`
					Output   string `json:"output"`
					Reason   string `json:"reason"`
					Honoured bool   `json:"honoured"`
				}
				json.Unmarshal([]byte(line), &ev)
				if ev.Type == EventHook && ev.Output == OutputReopenTask && ev.Honoured {
					if ev.Reason != "and once more" {
						t.Errorf("reopen hook event reason %q", ev.Reason)
					}
					honoured++
				}
			}
			if honoured != tt.reopens {
				t.Errorf("%d honoured reopen-task hook events, want %d", honoured, tt.reopens)
			}
		})
	}
}

// publishExampleHook publishes an example hook as `make publish` does: its artifact
// folder's murmur.yaml (examples/artifacts/<name>) with the module built from
// examples/guests/<name>.
func publishExampleHook(t *testing.T, reg *registry.Local, name string) {
	t.Helper()
	yaml, err := os.ReadFile(filepath.Join("../examples/artifacts", name, "murmur.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	publishHookDir(t, reg, name, yaml, "../examples/guests/"+name)
}

// TestShellHooksInASession runs an agent whose model asks for shell commands, with the
// example hooks as published: policy-hook (on-shell, commit_policy deny) refuses the
// commands running rm before they run, its reason in the model's next turn and the
// tool_call denied; the others run and the audit hook's out/audit.jsonl has each one's
// shell-event twice, at the decision point and with its outcome (exit code, output,
// sizes), and session_end counts every shell call.
func TestShellHooksInASession(t *testing.T) {
	calls := []struct {
		tool, command string
		denied        string // the reason the model is shown; "" when the command runs
		binary        string // the shell-event's binary: the resolved path
		argv          []string
		script        bool // an interpreter runs the command as a script
		exit          int32
		stdout        string
		stderr        string
	}{
		{tool: "rm", command: "rm -rf notes", denied: "policy-hook: the command's binary is rm", binary: "/rm", argv: []string{"rm", "-rf", "notes"}},
		{tool: "ls", command: "ls -d .", binary: "/ls", argv: []string{"ls", "-d", "."}, stdout: ".\n"},
		{tool: "bash", command: "echo out; echo err >&2; exit 3", binary: "/bash", script: true, exit: 3, stdout: "out\n", stderr: "err\n"},
		{tool: "bash", command: "cd /tmp && rm -f x", denied: "policy-hook: the script invokes rm", binary: "/bash", script: true},
		// The trace cuts a command at 200 bytes; hooks get it whole, before and after.
		{tool: "bash", command: "printf %s " + strings.Repeat("y", 300), binary: "/bash", script: true, stdout: strings.Repeat("y", 300)},
	}
	var turns []string
	for i, c := range calls {
		turns = append(turns, fmt.Sprintf(`{"id": "s%d", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
 "content": [{"type": "tool_use", "id": "tu_%d", "name": %q, "input": {"command": %q}}], "usage": {"input_tokens": 1, "output_tokens": 1}}`, i, i, c.tool, c.command))
	}
	turns = append(turns, `{"id": "end", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
 "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}`)
	p := newProvider(t, `{"provider": "anthropic-messages", "conversations": [{"match": "use the shell", "turns": [`+strings.Join(turns, ",")+`]}]}`)
	e, reg := agentRig(t, map[string][2]string{"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"}})
	publishExampleHook(t, reg, "policy-hook")
	publishExampleHook(t, reg, "audit-hook")
	mpath := filepath.Join(t.TempDir(), "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+p.srv.URL+`", api_key: "k"}}
  - {name: policy-hook, version: 1.0.0, runtime: hook}
  - {name: audit-hook, version: 1.0.0, runtime: hook}
inference: {driver: {artifact: anthropic-messages}, model: m-test, max_turns: 8}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
  shell: {allow: [rm, ls, bash]}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.RunOnce(context.Background(), m, RunOptions{Registry: reg, Task: "please use the shell",
		Session: SessionConfig{WorkRoot: t.TempDir(), Stderr: io.Discard, SandboxHelper: self}})
	if err != nil || res.Status != StateCompleted || res.Result != "done" {
		t.Fatalf("%+v, %v", res, err)
	}

	seen := p.seen()
	if len(seen) != len(calls)+1 {
		t.Fatalf("%d provider requests, want %d", len(seen), len(calls)+1)
	}
	var statuses []string
	denials := 0
	for _, ev := range traceEvents(t, res.Records) {
		switch {
		case ev["event_type"] == EventToolCall:
			statuses = append(statuses, ev["status"].(string))
		case ev["event_type"] == EventHook && ev["hook"] == "policy-hook":
			if ev["binding"] != manifest.BindShell || ev["error"] != nil {
				t.Errorf("policy hook event %v", ev)
			}
			if ev["output"] == OutputDeny && ev["honoured"] == true {
				denials++
			}
		}
	}
	if denials != 2 {
		t.Errorf("%d honoured denials in the trace, want 2", denials)
	}
	type shellLine struct {
		Event  string `json:"event"`
		Record struct {
			Binary  string   `json:"binary"`
			Command string   `json:"command"`
			Argv    []string `json:"argv"`
			Script  *string  `json:"script"`
			Outcome *struct {
				ExitCode    int32  `json:"exit_code"`
				Stdout      string `json:"stdout"`
				StdoutBytes uint64 `json:"stdout_bytes"`
				StderrBytes uint64 `json:"stderr_bytes"`
			} `json:"outcome"`
			Shells *int `json:"total_shell_calls"`
		} `json:"record"`
	}
	audit, err := os.ReadFile(filepath.Join(res.Workdir, "out", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var shells []shellLine
	for _, line := range strings.Split(strings.TrimSpace(string(audit)), "\n") {
		var l shellLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		if l.Event == "on-shell" {
			shells = append(shells, l)
		}
		if l.Event == "on-session-end" && (l.Record.Shells == nil || *l.Record.Shells != len(calls)) {
			t.Errorf("session end %s: want total_shell_calls %d", line, len(calls))
		}
	}
	for i, c := range calls {
		t.Run(fmt.Sprintf("%d %.30s", i, c.command), func(t *testing.T) {
			next := string(seen[i+1].body)
			wantStatus := "passed"
			if c.denied != "" {
				wantStatus = StatusDenied
				if !strings.Contains(next, "refused by hook policy-hook: "+c.denied) {
					t.Errorf("the model's next turn lacks the hook's reason: %.800s", next)
				}
			} else if !strings.Contains(next, fmt.Sprintf("Exit code: %d", c.exit)) {
				t.Errorf("the model's next turn lacks the command's result: %.800s", next)
			}
			if i >= len(statuses) || statuses[i] != wantStatus {
				t.Errorf("tool_call statuses %v, want %s at %d", statuses, wantStatus, i)
			}
			// The audit hook sees the decision point, then, for a command that ran, its outcome.
			if len(shells) == 0 {
				t.Fatal("no more on-shell lines in audit.jsonl")
			}
			want := 2
			if c.denied != "" {
				want = 1
			}
			for j := range want {
				l := shells[0]
				shells = shells[1:]
				r := l.Record
				if !strings.HasSuffix(r.Binary, c.binary) || !strings.HasPrefix(r.Binary, "/") || r.Command != c.command || (r.Script != nil) != c.script {
					t.Errorf("shell-event %+v: want binary …%s, command %q, script %v", r, c.binary, c.command, c.script)
				}
				if c.argv != nil && !slices.Equal(r.Argv, c.argv) {
					t.Errorf("argv %q, want %q", r.Argv, c.argv)
				}
				if j == 0 && r.Outcome != nil {
					t.Errorf("the decision point has an outcome: %+v", r.Outcome)
				}
				if j == 1 && (r.Outcome == nil || r.Outcome.ExitCode != c.exit || r.Outcome.Stdout != c.stdout ||
					r.Outcome.StdoutBytes != uint64(len(c.stdout)) || r.Outcome.StderrBytes != uint64(len(c.stderr))) {
					t.Errorf("outcome %+v, want exit %d, stdout %q", r.Outcome, c.exit, c.stdout)
				}
			}
		})
	}
	if len(shells) != 0 {
		t.Errorf("%d on-shell lines more than the calls: %+v", len(shells), shells)
	}
}

// TestShellHookRecord: how shell events map to on-shell records — the proposal with the
// sandbox's plan (resolved binary, argv, script), the shell event of a command that ran
// with its outcome (streams cut at ShellOutputCap, valid UTF-8, full sizes kept), and
// the events on-shell does not answer.
func TestShellHookRecord(t *testing.T) {
	script := "echo hi"
	long := strings.Repeat("a", ShellOutputCap-1) + "\xe2\x82\xac" // a 3-byte rune across the cap
	tests := []struct {
		name string
		e    *Event
		fn   string
		want any
	}{
		{"proposal with a plan", &Event{Type: EventToolProposed, Data: ToolProposed{Turn: 2, ToolName: "bash", Kind: KindShell,
			shell: &shell.Command{Binary: "bash", Path: "/usr/bin/bash", Text: script, Argv: []string{"bash", "-c", script}, Script: script}}},
			manifest.BindShell, ShellEventRecord{Turn: 2, Binary: "/usr/bin/bash", Command: script, Argv: []string{"bash", "-c", script}, Script: &script}},
		{"a command that ran", &Event{Type: EventShell, Data: ShellRun{ran: &shellRan{turn: 3, res: shell.Result{Binary: "ls", Command: "-l",
			Planned: shell.Command{Binary: "ls", Path: "/usr/bin/ls", Text: "-l", Argv: []string{"ls", "-l"}}, ExitCode: 2, Stdout: long, Stderr: "e", StdoutBytes: 1 << 20, StderrBytes: 1, Duration: 5 * time.Millisecond}}}},
			manifest.BindShell, ShellEventRecord{Turn: 3, Binary: "/usr/bin/ls", Command: "-l", Argv: []string{"ls", "-l"},
				Outcome: &ShellOutcome{ExitCode: 2, Stdout: strings.Repeat("a", ShellOutputCap-1) + "\uFFFD", Stderr: "e", StdoutBytes: 1 << 20, StderrBytes: 1, DurationMS: 5}}},
		{"a native tool's command", &Event{Type: EventShell, Data: ShellRun{Binary: "nt"}}, "", nil},
		{"a shell tool_call: its shell event answers", &Event{Type: EventToolCall, Data: ToolCall{ToolName: "ls", Kind: KindShell, Status: "passed"}}, "", nil},
		{"a wasm tool call", &Event{Type: EventToolCall, Data: ToolCall{Turn: 1, ToolName: "echo", Kind: KindWasm, Status: "passed"}},
			manifest.BindToolCall, ToolEventRecord{Turn: 1, ToolName: "echo", Outcome: &ToolOutcome{Status: "passed"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn, rec := hookRecord(tt.e)
			if fn != tt.fn || !reflect.DeepEqual(rec, tt.want) {
				t.Errorf("%s %+v, want %s %+v", fn, rec, tt.fn, tt.want)
			}
			if rec != nil {
				if _, err := hookValue(rec); err != nil {
					t.Errorf("hookValue: %v", err)
				}
			}
		})
	}
}
