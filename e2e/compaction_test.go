package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// compactionCassette answers a task that reads a skill three times; the third turn's
// input tokens (990) reach 0.98 × context.max_tokens (1000). The summarisation call and
// the turns after it are conversations of their own: the replay provider matches a
// request by its first user message, which compaction replaced.
const compactionCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "Summarise the conversation below", "turns": [
   {"id": "s1", "type": "message", "role": "assistant", "model": "m-small", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The user asked for the notes three times; they were read once."}], "usage": {"input_tokens": 400, "output_tokens": 12}}]},
 {"match": "Summary of the conversation so far", "turns": [
   {"id": "x0", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn", "content": [{"type": "text", "text": "unused"}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "x1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn", "content": [{"type": "text", "text": "unused"}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "x2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "All three read."}], "usage": {"input_tokens": 300, "output_tokens": 4}}]},
 {"match": "read the notes three times", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "notes", "input": {}}], "usage": {"input_tokens": 100, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_2", "name": "notes", "input": {}}], "usage": {"input_tokens": 500, "output_tokens": 5}},
   {"id": "m3", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_3", "name": "notes", "input": {}}], "usage": {"input_tokens": 990, "output_tokens": 5}}]}]}`

// TestRunCompactsAgainstReplay runs an agent capsule with context.max_tokens through
// `caddy capsule run` against the replay provider: after the turn that reaches the
// threshold the driver is asked for a summary (compaction.model, system_prompt), the next
// request carries the summary and the last two turns instead of the task's text, the
// trace has one compaction event, and dump_summaries wrote its line.
func TestRunCompactsAgainstReplay(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "compaction.json"), []byte(compactionCassette), 0o644)
	srv, requests := recordingProvider(t, cassettes)
	capDir := filepath.Join(tmp, "compacting")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "notes.md"), []byte("the notes"), 0o644)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: compacting
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 0.2.0, runtime: driver, gateway: {endpoint: "`+srv.URL+`"}}
  - {name: notes, runtime: skill, source: notes.md}
inference:
  driver: {artifact: anthropic-messages}
  model: m
  max_turns: 6
  compaction: {model: m-small, system_prompt: Be terse., dump_summaries: true}
context: {max_tokens: 1000}
`), 0o644)
	wd := filepath.Join(tmp, "wd")
	r := capsule(t, home, "run", filepath.Join(capDir, "murmur.yaml"), "--registry", reg, "--work-root", filepath.Join(tmp, "work"),
		"--workdir", wd, "--task", "please read the notes three times", "--json")
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stderr, "W-RUN-") {
		t.Errorf("context.max_tokens and compaction still draw a warning:\n%s", r.stderr)
	}
	var out struct{ Status, Result, Records string }
	json.Unmarshal([]byte(r.stdout), &out)
	if out.Status != "completed" || out.Result != "All three read." {
		t.Fatalf("run --json = %s", r.stdout)
	}

	// The provider got three turns, the summarisation call, and the turn after it.
	type request struct {
		Model, System string
		Tools         []json.RawMessage
		Messages      []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
	}
	bodies := requests()
	if len(bodies) != 5 {
		t.Fatalf("%d provider requests, want 5", len(bodies))
	}
	var sum, next request
	json.Unmarshal([]byte(bodies[3]), &sum)
	json.Unmarshal([]byte(bodies[4]), &next)
	if sum.Model != "m-small" || sum.System != "Be terse." || len(sum.Tools) != 0 || len(sum.Messages) != 1 ||
		!strings.HasPrefix(sum.Messages[0].Content[0].Text, "Summarise the conversation below.\n\nuser: please read the notes three times\n") ||
		!strings.Contains(sum.Messages[0].Content[0].Text, "assistant called notes (tu_1)") {
		t.Errorf("summarisation request = %s", bodies[3])
	}
	if next.Model != "m" || len(next.Messages) != 5 || next.Messages[0].Role != "user" ||
		next.Messages[0].Content[0].Text != "Summary of the conversation so far:\n\nThe user asked for the notes three times; they were read once." ||
		strings.Contains(bodies[4], "please read the notes") || strings.Contains(bodies[4], "tu_1") ||
		!strings.Contains(bodies[4], "tu_2") || !strings.Contains(bodies[4], "tu_3") {
		t.Errorf("the request after compaction = %s", bodies[4])
	}

	// The trace: four turns, one compaction after the third.
	trace, err := os.ReadFile(filepath.Join(out.Records, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		Type          string `json:"event_type"`
		Turn          int    `json:"turn"`
		TokensBefore  int    `json:"tokens_before"`
		TokensAfter   int    `json:"tokens_after"`
		Summariser    string `json:"summariser"`
		SummaryOutput int    `json:"summary_output_tokens"`
		Error         string `json:"error"`
	}
	var seq []string
	var compaction event
	for _, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
		var ev event
		json.Unmarshal(line, &ev)
		switch ev.Type {
		case "inference":
			seq = append(seq, ev.Type)
		case "compaction":
			seq, compaction = append(seq, ev.Type), ev
		}
	}
	if got := strings.Join(seq, " "); got != "inference inference inference compaction inference" {
		t.Errorf("trace events: %s", got)
	}
	if compaction.Turn != 3 || compaction.TokensBefore != 990 || compaction.Summariser != "driver" || compaction.SummaryOutput != 12 ||
		compaction.TokensAfter <= 12 || compaction.TokensAfter >= 990 || compaction.Error != "" {
		t.Errorf("compaction event = %+v", compaction)
	}
	dump, err := os.ReadFile(filepath.Join(wd, "out", "compaction-summaries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var line struct {
		Turn, TokensBefore int
		Summary            string
	}
	json.Unmarshal(dump, &line)
	if bytes.Count(dump, []byte("\n")) != 1 || line.Turn != 3 || !strings.HasPrefix(line.Summary, "The user asked for the notes") {
		t.Errorf("compaction-summaries.jsonl = %s", dump)
	}
}
