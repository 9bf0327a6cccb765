package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// hostRecDriver hosts a threaded agent capsule whose driver is recdriver (it records its
// inputs in out/driver-inputs.jsonl) and whose one tool is echo; config is the driver's.
func hostRecDriver(t *testing.T, config string) *Hosted {
	t.Helper()
	return hostRecCapsule(t, "threads", config, "", "")
}

// hostRecCapsule is hostRecDriver's capsule named name, with more lines of its inference
// block (indented) and more top-level keys, and sinks on its sessions' streams.
func hostRecCapsule(t *testing.T, name, config, inference, extra string, sinks ...Sink) *Hosted {
	t.Helper()
	return hostRec(t, recCapsule{name: name, config: config, inference: inference, extra: extra}, sinks...)
}

// recCapsule is a recdriver capsule: hostRecCapsule's settings, hook guests to publish
// and declare, more capabilities and the environment its sessions look up.
type recCapsule struct {
	name, config, inference, extra string
	// hooks are test guest folders (under internal/testkit/testguests) published as hooks, each
	// declared with the lines of hookEntry[name] (indented under its list item).
	hooks     map[string]string
	hookEntry map[string]string
	caps      string // more lines under capabilities (indented)
	env       map[string]string
}

func hostRec(t *testing.T, c recCapsule, sinks ...Sink) *Hosted {
	t.Helper()
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "recdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/recdriver"))
	publishWasm(t, reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	var hooks strings.Builder
	for name, dir := range c.hooks {
		publishHook(t, reg, name, "../internal/testkit/testguests/"+dir, "")
		fmt.Fprintf(&hooks, "  - name: %s\n    version: 1.0.0\n    runtime: hook\n%s", name, c.hookEntry[name])
	}
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: `+c.name+`
version: 1.0.0
artifacts:
  - {name: recdriver, version: 1.0.0, runtime: driver}
  - {name: echo, version: 1.0.0}
`+hooks.String()+`inference:
  driver: {artifact: recdriver, config: `+c.config+`}
  model: m
  max_turns: 5
  `+c.inference+`
`+c.extra+`capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`+c.caps+`lifecycle: {conversation: threaded}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := SessionConfig{WorkRoot: t.TempDir(), Sinks: sinks}
	if c.env != nil {
		cfg.LookupEnv = func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
	}
	h, err := e.Serve(context.Background(), m, ServeOptions{Registry: reg, Session: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// driverInput is what recdriver recorded of one driver input.
type driverInput struct {
	Messages       json.RawMessage `json:"messages"`
	ContinuationID string          `json:"continuation_id"`
}

// driverInputs reads every input recdriver got in the session of out, oldest first.
func driverInputs(t *testing.T, out TaskOutcome) []driverInput {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out.Layout.Work, "out", "driver-inputs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var ins []driverInput
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var in driverInput
		if err := json.Unmarshal(sc.Bytes(), &in); err != nil {
			t.Fatalf("recorded input %s: %v", sc.Bytes(), err)
		}
		ins = append(ins, in)
	}
	return ins
}

// compactJSON is s without insignificant space, to compare with what the host sent.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return b.String()
}

// The conversation of task 1 ("call echo hi") in the driver protocol's message format:
// its user message, the assistant's tool call, the tool's result, the answer.
const (
	task1User     = `{"role":"user","content":[{"type":"text","text":"call echo hi"}]}`
	task1Call     = `{"role":"assistant","content":[{"type":"text","text":"Calling echo."},{"type":"tool_call","id":"call_hi","name":"echo","input":{"text":"hi"}}]}`
	task1Result   = `{"role":"tool","content":[{"type":"text","text":"{\"text\":\"hi\"}"}],"tool_call_id":"call_hi"}`
	task1Answer   = `{"role":"assistant","content":[{"type":"text","text":"the tool said: {\"text\":\"hi\"}"}]}`
	task2User     = `{"role":"user","content":[{"type":"text","text":"and now?"}]}`
	task1Messages = `[` + task1User + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `]`
)

// TestThreadedDriverInput: the second task of a threaded context sends the driver the
// first task's tool call and result, in order, in the driver protocol's message format;
// a driver that returns a continuation_id gets it back with only the newer messages, in
// the same task and the next; a continuation another driver issued, or a turn kept as
// text alone, gets the whole conversation.
func TestThreadedDriverInput(t *testing.T) {
	tests := []struct {
		name   string
		config string
		// history rewrites the turn task 1 left before task 2 gets it; nil keeps it.
		history func(Turn) Turn
		// want are the driver inputs of task 1 (two turns) and task 2 (one).
		want []driverInput
		// wantThread is the continuation task 2 leaves.
		wantCont string
	}{
		{name: "whole conversation", config: "{}", want: []driverInput{
			{Messages: json.RawMessage(`[` + task1User + `]`)},
			{Messages: json.RawMessage(`[` + task1User + `,` + task1Call + `,` + task1Result + `]`)},
			{Messages: json.RawMessage(`[` + task1User + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `]`)},
		}},
		{name: "continuation", config: `{continuation: true}`, wantCont: "cont-3", want: []driverInput{
			{Messages: json.RawMessage(`[` + task1User + `]`)},
			{Messages: json.RawMessage(`[` + task1Result + `]`), ContinuationID: "cont-1"},
			{Messages: json.RawMessage(`[` + task2User + `]`), ContinuationID: "cont-2"},
		}},
		{name: "continuation in metadata", config: `{continuation: metadata}`, wantCont: "cont-3", want: []driverInput{
			{Messages: json.RawMessage(`[` + task1User + `]`)},
			{Messages: json.RawMessage(`[` + task1Result + `]`), ContinuationID: "cont-1"},
			{Messages: json.RawMessage(`[` + task2User + `]`), ContinuationID: "cont-2"},
		}},
		{name: "continuation of another driver", config: `{continuation: true}`, wantCont: "cont-1",
			history: func(tu Turn) Turn { tu.ContinuationBy = "other@1.0.0"; return tu },
			want: []driverInput{
				{Messages: json.RawMessage(`[` + task1User + `]`)},
				{Messages: json.RawMessage(`[` + task1Result + `]`), ContinuationID: "cont-1"},
				{Messages: json.RawMessage(`[` + task1User + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `]`)},
			}},
		{name: "turn kept as text", config: "{}",
			history: func(tu Turn) Turn { return Turn{User: tu.User, Agent: tu.Agent} },
			want: []driverInput{
				{Messages: json.RawMessage(`[` + task1User + `]`)},
				{Messages: json.RawMessage(`[` + task1User + `,` + task1Call + `,` + task1Result + `]`)},
				{Messages: json.RawMessage(`[` + task1User + `,` + task1Answer + `,` + task2User + `]`)},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hostRecDriver(t, tt.config)
			ctx := context.Background()
			out1 := h.RunTask(ctx, TaskRequest{ContextID: "ctx_t", Text: "call echo hi"})
			if out1.State != StateCompleted || out1.Result != `the tool said: {"text":"hi"}` {
				t.Fatalf("task 1: %+v", out1)
			}
			if got := string(out1.Thread.Messages); got != compactJSON(t, task1Messages) {
				t.Errorf("task 1 kept\n%s\nwant\n%s", got, task1Messages)
			}
			turn := Turn{User: "call echo hi", Agent: out1.Result, Thread: out1.Thread}
			if tt.history != nil {
				turn = tt.history(turn)
			}
			out2 := h.RunTask(ctx, TaskRequest{ContextID: "ctx_t", Text: "and now?", History: []Turn{turn}})
			if out2.State != StateCompleted || out2.Result != "you said: and now?" {
				t.Fatalf("task 2: %+v", out2)
			}
			if out2.Thread.Continuation != tt.wantCont || (tt.wantCont != "") != (out2.Thread.ContinuationBy == "recdriver@1.0.0") {
				t.Errorf("task 2 left continuation %q by %q, want %q", out2.Thread.Continuation, out2.Thread.ContinuationBy, tt.wantCont)
			}
			got := driverInputs(t, out2)
			if len(got) != len(tt.want) {
				t.Fatalf("%d driver inputs, want %d", len(got), len(tt.want))
			}
			for i, w := range tt.want {
				if g := string(got[i].Messages); g != compactJSON(t, string(w.Messages)) || got[i].ContinuationID != w.ContinuationID {
					t.Errorf("driver input %d: continuation %q, messages\n%s\nwant %q,\n%s", i, got[i].ContinuationID, g, w.ContinuationID, w.Messages)
				}
			}
		})
	}
}
