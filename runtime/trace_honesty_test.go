package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/capsulegate/capsulegate/manifest"
)

// TestTraceCountsEveryCall runs an agent through the real loop and driver whose model
// calls a skill and a name declared nowhere, then answers. The trace shows both calls
// (the unknown one as kind unknown, status error), session_end counts both although
// neither is a wasm, shell or native call, and a turn with no call lists tool_names as
// [], never null; no field of any event is null but session_start's parent_id.
func TestTraceCountsEveryCall(t *testing.T) {
	const cassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "read the notes", "turns": [
   {"id": "n1", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "notes", "input": {}},
                {"type": "tool_use", "id": "tu_2", "name": "ghost", "input": {"boo": true}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "n2", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Read them."}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`
	p := newProvider(t, cassette)
	e, reg := agentRig(t, map[string][2]string{"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"}})
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.md"), []byte("the notes"), 0o644)
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+p.srv.URL+`", api_key: "k"}}
  - {name: notes, runtime: skill, source: notes.md}
inference:
  driver: {artifact: anthropic-messages}
  model: m-test
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.RunOnce(context.Background(), m, RunOptions{Registry: reg, Task: "read the notes", Session: SessionConfig{WorkRoot: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StateCompleted || res.Result != "Read them." {
		t.Fatalf("result = %+v", res)
	}
	var calls []map[string]any
	var turns [][]any
	var end map[string]any
	for _, ev := range traceEvents(t, res.Records) {
		for k, v := range ev {
			if v == nil && k != "parent_id" {
				t.Errorf("%s.%s is null", ev["event_type"], k)
			}
		}
		switch ev["event_type"] {
		case EventToolCall:
			calls = append(calls, ev)
		case EventInference:
			names, ok := ev["tool_names"].([]any)
			if !ok {
				t.Errorf("inference tool_names is not a list: %v", ev["tool_names"])
			}
			turns = append(turns, names)
		case EventSessionEnd:
			end = ev
		}
	}
	want := []struct{ name, kind, status string }{{"notes", KindSkill, "passed"}, {"ghost", KindUnknown, "error"}}
	if len(calls) != len(want) {
		t.Fatalf("%d tool_call events, want %d: %v", len(calls), len(want), calls)
	}
	for i, w := range want {
		if c := calls[i]; c["tool_name"] != w.name || c["kind"] != w.kind || c["status"] != w.status || c["turn"] != float64(1) {
			t.Errorf("tool_call %d = %v, want %s %s %s in turn 1", i, c, w.name, w.kind, w.status)
		}
	}
	if len(turns) != 2 || len(turns[0]) != 2 || turns[1] == nil || len(turns[1]) != 0 {
		t.Errorf("tool_names per turn = %v, want [notes ghost] then []", turns)
	}
	if end == nil || end["tool_calls"] != float64(2) {
		t.Errorf("session_end = %v, want tool_calls 2", end)
	}
}
