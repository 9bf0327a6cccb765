package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// TestCompactionDue: compaction fires when a turn's input tokens reach threshold ×
// context.max_tokens (0.98 by default), and never without context.max_tokens.
func TestCompactionDue(t *testing.T) {
	inf := func(c *manifest.Compaction) *manifest.Inference {
		return &manifest.Inference{Model: "m", Compaction: c}
	}
	tests := []struct {
		name  string
		m     manifest.Manifest
		input int
		want  bool
	}{
		{"no context.max_tokens", manifest.Manifest{Inference: inf(&manifest.Compaction{Threshold: 0.5})}, 1 << 30, false},
		{"default 0.98, below", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(nil)}, 97, false},
		{"default 0.98, at", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(nil)}, 98, true},
		{"default 0.98, above", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(nil)}, 99, true},
		{"default 0.98 of 100000, at", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100000}, Inference: inf(nil)}, 98000, true},
		{"default 0.98 of 100000, below", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100000}, Inference: inf(nil)}, 97999, false},
		{"threshold 0.5, below", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(&manifest.Compaction{Threshold: 0.5})}, 49, false},
		{"threshold 0.5, at", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(&manifest.Compaction{Threshold: 0.5})}, 50, true},
		{"threshold 1, at the budget", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(&manifest.Compaction{Threshold: 1})}, 100, true},
		{"threshold 1, below", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}, Inference: inf(&manifest.Compaction{Threshold: 1})}, 99, false},
		{"a script capsule", manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 100}}, 100, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, ok := compactionPolicyOf(&tt.m)
			if got := ok && p.due(tt.input); got != tt.want {
				t.Errorf("due(%d) = %v, want %v (policy %+v)", tt.input, got, tt.want, p)
			}
		})
	}
	p, _ := compactionPolicyOf(&manifest.Manifest{Context: &manifest.ContextConfig{MaxTokens: 10}, Inference: &manifest.Inference{Model: "big",
		Compaction: &manifest.Compaction{Model: "small", SystemPrompt: "sum", DumpSummaries: true}}})
	if p.model != "small" || p.system != "sum" || !p.dump || p.threshold != manifest.DefaultCompactionThreshold {
		t.Errorf("policy = %+v", p)
	}
}

// TestReplaceWithSummary: the messages before the last two turns (each an assistant
// message and its tool results) become one user message with the summary; first says
// where the task's own messages start after it.
func TestReplaceWithSummary(t *testing.T) {
	msg := func(role, text string) agentMessage {
		return agentMessage{Role: role, Content: []agentBlock{{Type: "text", Text: text}}}
	}
	tests := []struct {
		name      string
		msgs      []string // role:text
		first     int
		wantMsgs  []string
		wantFirst int
	}{
		{"one task, three turns", []string{"user:u", "assistant:a1", "tool:t1", "assistant:a2", "tool:t2", "assistant:a3", "tool:t3"}, 0,
			[]string{"user:" + summaryPrefix + "S", "assistant:a2", "tool:t2", "assistant:a3", "tool:t3"}, 1},
		{"one turn: only the user message is summarised", []string{"user:u", "assistant:a1", "tool:t1"}, 0,
			[]string{"user:" + summaryPrefix + "S", "assistant:a1", "tool:t1"}, 1},
		{"history summarised, the task's own kept", []string{"user:h", "assistant:ha", "assistant:hb", "user:u", "assistant:a1", "tool:t1"}, 3,
			[]string{"user:" + summaryPrefix + "S", "assistant:hb", "user:u", "assistant:a1", "tool:t1"}, 2},
		{"history and part of the task", []string{"user:h", "assistant:ha", "user:u", "assistant:a1", "tool:t1", "assistant:a2", "tool:t2", "assistant:a3", "tool:t3"}, 2,
			[]string{"user:" + summaryPrefix + "S", "assistant:a2", "tool:t2", "assistant:a3", "tool:t3"}, 1},
	}
	parse := func(ss []string) []agentMessage {
		var out []agentMessage
		for _, s := range ss {
			role, text, _ := strings.Cut(s, ":")
			out = append(out, msg(role, text))
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := parse(tt.msgs)
			c := replaceWithSummary(msgs, keepFrom(msgs, compactionKeepTurns), tt.first, "S")
			if got, want := string(mustJSON(c.msgs)), string(mustJSON(parse(tt.wantMsgs))); got != want {
				t.Errorf("messages\n%s\nwant\n%s", got, want)
			}
			if c.first != tt.wantFirst {
				t.Errorf("first = %d, want %d", c.first, tt.wantFirst)
			}
		})
	}
}

// TestTranscript: the summarisation call reads the conversation as text lines.
func TestTranscript(t *testing.T) {
	got := transcript([]agentMessage{
		{Role: "user", Content: []agentBlock{{Type: "text", Text: "count a b"}}},
		{Role: "assistant", Content: []agentBlock{{Type: "text", Text: "Counting."}, {Type: "tool_call", ID: "c1", Name: "wc", Input: json.RawMessage(`{"text":"a b"}`)}}},
		{Role: "tool", ToolCallID: "c1", Content: []agentBlock{{Type: "text", Text: "2"}}},
		{Role: "tool", ToolCallID: "c2", IsError: true, Content: []agentBlock{{Type: "text", Text: "no"}}},
	})
	want := "user: count a b\nassistant: Counting.\nassistant called wc (c1): {\"text\":\"a b\"}\ntool result (c1): 2\ntool error (c2): no\n"
	if got != want {
		t.Errorf("transcript\n%q\nwant\n%q", got, want)
	}
}

// hostCompacting hosts a threaded agent capsule whose driver is recdriver reporting 50
// input tokens per message, with context.max_tokens 100 and compaction written as given
// (threshold 0.5 by default here): a task's first tool_call turn (one message) reaches it.
func hostCompacting(t *testing.T, config, compaction string) *Hosted {
	t.Helper()
	return hostCompactingWith(t, config, compaction)
}

// hostCompactingWith is hostCompacting with sinks (hook sinks) on its sessions' streams.
func hostCompactingWith(t *testing.T, config, compaction string, sinks ...Sink) *Hosted {
	t.Helper()
	return hostRecCapsule(t, "compacting", config, compaction, "context: {max_tokens: 100}\n", sinks...)
}

// TestCompactionReplacesTheConversation: after the tool_call turn that reached the
// threshold the driver is asked for a summary (compaction.model and system_prompt, no
// tools, no continuation), and the next turn carries the summary and the kept turn
// instead of the task's text, without the continuation the driver had returned; the
// thread keeps the compacted conversation, marked so; a compaction event records it;
// dump_summaries writes one line per compaction.
func TestCompactionReplacesTheConversation(t *testing.T) {
	tests := []struct {
		name, compaction string
		wantSystem       string
		wantModel        string
		dump             bool
	}{
		{"driver, dump_summaries", "compaction: {threshold: 0.5, model: m-small, system_prompt: Be terse., dump_summaries: true}", "Be terse.", "m-small", true},
		{"driver, defaults", "compaction: {threshold: 0.5}", defaultCompactionPrompt, "m", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hostCompacting(t, `{continuation: true, tokens_per_message: 50}`, tt.compaction)
			out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_c", Text: "call echo hi"})
			if out.State != StateCompleted || out.Result != `the tool said: {"text":"hi"}` {
				t.Fatalf("task: %+v", out)
			}
			if got, want := string(out.Thread.Messages), compactJSON(t, task1Compacted); got != want || !out.Thread.Compacted {
				t.Errorf("the thread kept (compacted %v)\n%s\nwant the compacted conversation\n%s", out.Thread.Compacted, got, want)
			}
			// Every input recdriver got, with the fields this test reads.
			data, err := os.ReadFile(filepath.Join(out.Layout.Work, "out", "driver-inputs.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			type input struct {
				Model, System  string
				Messages       []agentMessage
				Tools          []agentTool
				ContinuationID string `json:"continuation_id"`
			}
			var ins []input
			sc := bufio.NewScanner(bytes.NewReader(data))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var in input
				json.Unmarshal(sc.Bytes(), &in)
				ins = append(ins, in)
			}
			if len(ins) != 3 {
				t.Fatalf("%d driver inputs, want 3 (turn, summary, turn):\n%s", len(ins), data)
			}
			sum := ins[1]
			if sum.Model != tt.wantModel || sum.System != tt.wantSystem || len(sum.Tools) != 0 || sum.ContinuationID != "" || len(sum.Messages) != 1 ||
				sum.Messages[0].Content[0].Text != summariseRequest+"user: call echo hi\n" {
				t.Errorf("summarisation request = %+v", sum)
			}
			next := ins[2]
			if next.ContinuationID != "" {
				t.Errorf("the turn after compaction carries continuation %q", next.ContinuationID)
			}
			wantFirst := summaryPrefix + "you said: " + summariseRequest + "user: call echo hi\n"
			if len(next.Messages) != 3 || next.Messages[0].Role != "user" || next.Messages[0].Content[0].Text != wantFirst ||
				next.Messages[1].Role != "assistant" || next.Messages[2].Role != "tool" {
				t.Errorf("the turn after compaction sent %s", mustJSON(next.Messages))
			}
			// The trace's compaction event, under turn 1's inference event.
			trace, _ := os.ReadFile(out.Layout.Trace)
			var evs []map[string]any
			inference := map[string]bool{}
			for _, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
				var ev map[string]any
				json.Unmarshal(line, &ev)
				switch ev["event_type"] {
				case EventCompaction:
					evs = append(evs, ev)
				case EventInference:
					if ev["turn"] == 1.0 {
						inference[ev["event_id"].(string)] = true
					}
				}
			}
			if len(evs) != 1 {
				t.Fatalf("%d compaction events, want 1:\n%s", len(evs), trace)
			}
			ev := evs[0]
			if ev["turn"] != 1.0 || ev["tokens_before"] != 50.0 || ev["threshold_tokens"] != 50.0 || ev["summariser"] != SummariserDriver ||
				ev["messages_before"] != 3.0 || ev["messages_after"] != 3.0 || ev["summary_input_tokens"] != 50.0 || ev["summary_output_tokens"] != 1.0 ||
				!(ev["tokens_after"].(float64) > 1) || ev["error"] != nil || !inference[ev["parent_id"].(string)] {
				t.Errorf("compaction event = %v", ev)
			}
			if _, ok := ev["summary"]; ok {
				t.Error("the summary is in a meta trace")
			}
			dump, err := os.ReadFile(filepath.Join(out.Layout.Work, "out", "compaction-summaries.jsonl"))
			if !tt.dump {
				if !os.IsNotExist(err) {
					t.Errorf("compaction-summaries.jsonl written without dump_summaries: %v %s", err, dump)
				}
				return
			}
			var line summaryLine
			if err != nil || bytes.Count(dump, []byte("\n")) != 1 || json.Unmarshal(dump, &line) != nil {
				t.Fatalf("compaction-summaries.jsonl = %q, %v", dump, err)
			}
			if line.Turn != 1 || line.TokensBefore != 50 || line.TokensAfter != int(ev["tokens_after"].(float64)) ||
				line.Summary != "you said: "+summariseRequest+"user: call echo hi\n" {
				t.Errorf("summary line = %+v", line)
			}
			// A second task of the context compacts again: one more line.
			out2 := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_c", Text: "call echo ho",
				History: []Turn{{User: "call echo hi", Agent: out.Result, Thread: out.Thread}}})
			if out2.State != StateCompleted {
				t.Fatalf("task 2: %+v", out2)
			}
			if dump, _ := os.ReadFile(filepath.Join(out.Layout.Work, "out", "compaction-summaries.jsonl")); bytes.Count(dump, []byte("\n")) != 2 {
				t.Errorf("after two compactions compaction-summaries.jsonl holds\n%s", dump)
			}
		})
	}
}

// task1Summary is the summary message recdriver's summarisation of task 1 ("call echo
// hi") gives, task1Compacted task 1's conversation after that compaction: the summary
// in place of its user message, then its tool call, result and answer.
var (
	task1Summary   = string(mustJSON(agentMessage{Role: "user", Content: []agentBlock{{Type: "text", Text: summaryPrefix + "you said: " + summariseRequest + "user: call echo hi\n"}}}))
	task1Compacted = `[` + task1Summary + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `]`
)

// TestThreadedStartsFromCompaction: in a threaded context, the task after one that
// compacted starts from the compacted conversation — the summary, the kept turn, the
// answer — without the messages the summary replaced, and hands on the continuation
// issued after the compaction, not one from before; so does a task in a new session
// (a restart) given the turn as the store keeps it; and the task after that still
// starts from the summary, followed by the uncompacted task in between.
func TestThreadedStartsFromCompaction(t *testing.T) {
	const (
		task2Answer = `{"role":"assistant","content":[{"type":"text","text":"you said: and now?"}]}`
		task3User   = `{"role":"user","content":[{"type":"text","text":"and then?"}]}`
	)
	tests := []struct {
		name    string
		config  string
		restart bool          // task 2 and 3 run in a new session, from the turn as JSON
		want2   []driverInput // task 2's input, then task 3's
	}{
		{name: "whole conversation", config: `{tokens_per_message: 50}`, want2: []driverInput{
			{Messages: json.RawMessage(`[` + task1Summary + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `]`)},
			{Messages: json.RawMessage(`[` + task1Summary + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `,` + task2Answer + `,` + task3User + `]`)},
		}},
		{name: "after a restart", config: `{tokens_per_message: 50}`, restart: true, want2: []driverInput{
			{Messages: json.RawMessage(`[` + task1Summary + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `]`)},
			{Messages: json.RawMessage(`[` + task1Summary + `,` + task1Call + `,` + task1Result + `,` + task1Answer + `,` + task2User + `,` + task2Answer + `,` + task3User + `]`)},
		}},
		// Task 1's first turn got cont-1, which the compaction cleared: its last turn went
		// without one and got cont-1 anew, over the compacted conversation.
		{name: "continuation", config: `{continuation: true, tokens_per_message: 50}`, want2: []driverInput{
			{Messages: json.RawMessage(`[` + task2User + `]`), ContinuationID: "cont-1"},
			{Messages: json.RawMessage(`[` + task3User + `]`), ContinuationID: "cont-2"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			h := hostCompacting(t, tt.config, "compaction: {threshold: 0.5}")
			out1 := h.RunTask(ctx, TaskRequest{ContextID: "ctx_tc", Text: "call echo hi"})
			if out1.State != StateCompleted {
				t.Fatalf("task 1: %+v", out1)
			}
			if ins := driverInputs(t, out1); len(ins) != 3 || ins[2].ContinuationID != "" {
				t.Fatalf("task 1's driver inputs %+v, want turn, summary, turn without a continuation", ins)
			}
			turn1 := Turn{User: "call echo hi", Agent: out1.Result, Thread: out1.Thread}
			if tt.restart {
				// What survives a restart is the turn as the store keeps it: JSON.
				var kept Turn
				if err := json.Unmarshal(mustJSON(turn1), &kept); err != nil {
					t.Fatal(err)
				}
				turn1, h = kept, hostCompacting(t, tt.config, "compaction: {threshold: 0.5}")
			}
			out2 := h.RunTask(ctx, TaskRequest{ContextID: "ctx_tc", Text: "and now?", History: []Turn{turn1}})
			if out2.State != StateCompleted || out2.Thread.Compacted {
				t.Fatalf("task 2: %+v", out2)
			}
			turn2 := Turn{User: "and now?", Agent: out2.Result, Thread: out2.Thread}
			out3 := h.RunTask(ctx, TaskRequest{ContextID: "ctx_tc", Text: "and then?", History: []Turn{turn1, turn2}})
			if out3.State != StateCompleted {
				t.Fatalf("task 3: %+v", out3)
			}
			ins := driverInputs(t, out3)
			if len(ins) < 2 {
				t.Fatalf("%d driver inputs", len(ins))
			}
			for i, w := range tt.want2 {
				got := ins[len(ins)-2+i]
				if g := string(got.Messages); g != compactJSON(t, string(w.Messages)) || got.ContinuationID != w.ContinuationID {
					t.Errorf("task %d's input: continuation %q, messages\n%s\nwant %q,\n%s", i+2, got.ContinuationID, g, w.ContinuationID, w.Messages)
				}
				if strings.Contains(string(got.Messages), task1User) {
					t.Errorf("task %d's input holds task 1's user message the summary replaced", i+2)
				}
			}
		})
	}
}

// TestCompactionHookSeam: a summariser in session.compactHook (the on-compaction hook's
// place) is asked first; when it declines, the driver summarises.
func TestCompactionHookSeam(t *testing.T) {
	for _, declines := range []bool{false, true} {
		h := hostCompacting(t, `{tokens_per_message: 50}`, "compaction: {threshold: 0.5}")
		// A first task that makes no tool call opens the context's session without compacting.
		if out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_h", Text: "hello"}); out.State != StateCompleted {
			t.Fatalf("task 1: %+v", out)
		}
		var asked []compactionInput
		h.mu.Lock()
		for _, c := range h.contexts {
			c.sess.compactHook = func(_ context.Context, _ *task, in compactionInput) (string, int, bool, error) {
				asked = append(asked, in)
				return "from the hook", 0, !declines, nil
			}
		}
		h.mu.Unlock()
		out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_h", Text: "call echo hi"})
		if out.State != StateCompleted || len(asked) != 1 || len(asked[0].Messages) != 1 || asked[0].Turn != 1 {
			t.Fatalf("declines %v: %+v, hook asked %+v", declines, out, asked)
		}
		trace, _ := os.ReadFile(out.Layout.Trace)
		want := `"summariser":"hook"`
		if declines {
			want = `"summariser":"driver"`
		}
		if !bytes.Contains(trace, []byte(want)) {
			t.Errorf("declines %v: trace lacks %s:\n%s", declines, want, trace)
		}
	}
}

// TestOnCompactionHook runs a blocking on-compaction hook through the seam: with
// commit_policy replace-context its replace-context answer is the summary the driver
// is not asked for; one answering none leaves the summary to the driver; one that fails
// fails the task, as upstream does. Each is handed the messages being replaced and the
// tokens that reached the threshold, and its answer is a hook event in the trace.
func TestOnCompactionHook(t *testing.T) {
	tests := []struct {
		name       string
		guest      *fakeHook
		state      string
		summariser string
		inputs     int    // driver inputs: turns and summarisation calls
		first      string // the first message of the turn after compaction
		honoured   bool
	}{
		{"replace-context summarises", &fakeHook{out: HookOutput{OutputReplaceContext, "from the hook"}}, StateCompleted, SummariserHook, 2,
			summaryPrefix + "from the hook", true},
		{"none leaves it to the driver", &fakeHook{out: HookOutput{Case: OutputNone}}, StateCompleted, SummariserDriver, 3,
			summaryPrefix + "you said: " + summariseRequest + "user: call echo hi\n", true},
		{"a failing hook fails the task", &fakeHook{err: errors.New("trap")}, StateFailed, SummariserHook, 1, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hk := &Hook{Name: "compactor", Manifest: hookManifest(t, "binding: on-compaction\ncommit_policy: replace-context\n"), Guest: tt.guest, Deadline: time.Minute}
			h := hostCompactingWith(t, `{tokens_per_message: 50}`, "compaction: {threshold: 0.5}", NewHookSink(context.Background(), hk))
			out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_h", Text: "call echo hi"})
			if out.State != tt.state {
				t.Fatalf("task: %+v, want %s", out, tt.state)
			}
			if tt.state == StateFailed && !strings.Contains(out.Result, "on-compaction hook compactor failed: trap") {
				t.Errorf("the failed task says %q", out.Result)
			}
			if got := strings.Join(tt.guest.calls, ","); got != manifest.BindCompaction {
				t.Fatalf("the hook was called for %s", got)
			}
			rec := tt.guest.recs[0].(CompactionRecord)
			if len(rec.Messages) != 1 || rec.Messages[0] != (HookMessage{"user", "call echo hi"}) || rec.SessionTokens != 50 || rec.Threshold != 0.5 ||
				rec.Model == nil || *rec.Model != "m" || rec.SystemPrompt != nil {
				t.Errorf("compaction record %+v", rec)
			}
			data, _ := os.ReadFile(filepath.Join(out.Layout.Work, "out", "driver-inputs.jsonl"))
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			if len(lines) != tt.inputs {
				t.Fatalf("%d driver inputs, want %d:\n%s", len(lines), tt.inputs, data)
			}
			if tt.first != "" {
				var next struct{ Messages []agentMessage }
				json.Unmarshal([]byte(lines[len(lines)-1]), &next)
				if len(next.Messages) == 0 || next.Messages[0].Content[0].Text != tt.first {
					t.Errorf("the turn after compaction sent %s, want first %q", mustJSON(next.Messages), tt.first)
				}
			}
			trace, _ := os.ReadFile(out.Layout.Trace)
			var seq []string
			for _, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
				var ev struct {
					Type       string `json:"event_type"`
					Binding    string `json:"binding"`
					Output     string `json:"output"`
					Honoured   bool   `json:"honoured"`
					Summariser string `json:"summariser"`
					Error      string `json:"error"`
				}
				json.Unmarshal(line, &ev)
				switch {
				case ev.Type == EventHook && ev.Binding == manifest.BindCompaction:
					if ev.Honoured != tt.honoured {
						t.Errorf("hook event %s honoured %v, want %v", line, ev.Honoured, tt.honoured)
					}
					seq = append(seq, "hook:"+ev.Output)
				case ev.Type == EventCompaction:
					seq = append(seq, "compaction:"+ev.Summariser+map[bool]string{true: ":error"}[ev.Error != ""])
				}
			}
			want := "hook:" + map[string]string{StateFailed: "error"}[tt.state]
			if tt.state != StateFailed {
				want = "hook:" + tt.guest.out.Case
			}
			want += ",compaction:" + tt.summariser + map[bool]string{true: ":error"}[tt.state == StateFailed]
			if got := strings.Join(seq, ","); got != want {
				t.Errorf("trace %s, want %s", got, want)
			}
		})
	}
}

// TestOnCompactionGoHook runs the summaryhook test guest (the Go SDK's Compaction
// handler) as the on-compaction hook of a compacting session: the host lowers the
// compaction-event, the guest lifts it and answers replace-context with one message,
// and that message's text is the summary the next turn starts with.
func TestOnCompactionGoHook(t *testing.T) {
	r, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	mod, err := murmur.Compile(context.Background(), r.engine, "compacting", "summary", manifest.RoleHook, guestbuild.Wasm(t, "../internal/testkit/testguests/summaryhook"))
	if err != nil {
		t.Fatal(err)
	}
	hk := &Hook{Name: "summary", Manifest: hookManifest(t, "binding: on-compaction\ncommit_policy: replace-context\n"),
		Guest: &wasmHook{engine: r.engine, mod: mod, grants: wasm.Grants{MemoryBytes: 64 << 20, Deadline: time.Minute}}, Deadline: time.Minute}
	h := hostCompactingWith(t, `{tokens_per_message: 50}`, "compaction: {threshold: 0.5}", NewHookSink(context.Background(), hk))
	out := h.RunTask(context.Background(), TaskRequest{ContextID: "ctx_h", Text: "call echo hi"})
	if out.State != StateCompleted {
		t.Fatalf("task: %+v", out)
	}
	data, _ := os.ReadFile(filepath.Join(out.Layout.Work, "out", "driver-inputs.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var next struct{ Messages []agentMessage }
	json.Unmarshal([]byte(lines[len(lines)-1]), &next)
	want := summaryPrefix + `summaryhook: 1 messages (user), first "call echo hi"; 50 tokens at 0.50; model m; system -`
	if len(lines) != 2 || len(next.Messages) == 0 || next.Messages[0].Content[0].Text != want {
		t.Errorf("%d driver inputs; the turn after compaction sent %s, want first %q", len(lines), mustJSON(next.Messages), want)
	}
}
