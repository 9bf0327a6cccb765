package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// peersCassette: asked to delegate, the model sends the count to the peer "counter";
// asked to try the closed one, to "closed"; asked to loop, to itself. Each second turn
// ends the task.
const peersCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "delegate the count", "turns": [
   {"id": "d1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_d", "name": "send_message", "input": {"peer": "counter", "message": "one two three"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "d2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The counter answered."}], "usage": {"input_tokens": 20, "output_tokens": 4}}]},
 {"match": "try the closed one", "turns": [
   {"id": "c1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_c", "name": "send_message", "input": {"peer": "closed", "message": "one two"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "c2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The closed one refused."}], "usage": {"input_tokens": 20, "output_tokens": 4}}]},
 {"match": "loop", "turns": [
   {"id": "l1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_l1", "name": "send_message", "input": {"peer": "self", "message": "loop"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "l2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Loop ended."}], "usage": {"input_tokens": 20, "output_tokens": 4}}]}]}`

// TestPeers: three capsules on one gateway, reached in-process through its own server
// under handle_path. The agent "delegator" hands a count to the wordcount capsule, which
// accepts peer tasks, and gets its answer; a second wordcount that does not accept them
// refuses (E-PEER-005, read by the model as the tool's error); a message to itself loops
// until peer_depth stops it (E-PEER-003). The delegated task is owned by the principal
// derived from the delegator: the anonymous client cannot read it, the delegator's
// runtime, acting for the same principal, can.
func TestPeers(t *testing.T) {
	tmp := t.TempDir()
	home, reg := filepath.Join(tmp, "home"), filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "peers.json"), []byte(peersCassette), 0o644)
	provider, requests := recordingProvider(t, cassettes)

	port := freePort(t)
	base := "http://127.0.0.1:" + port
	script := guestbuild.Wasm(t, "../examples/guests/wordcount-capsule")
	wordcount := func(dir, extra string) string {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644)
		m := "name: wordcount\nversion: 1.0.0\nartifacts:\n  - {name: wordcount, version: 1.1.0}\n" +
			"capabilities:\n  limits: {memory_bytes: 67108864, deadline_seconds: 30}\nlifecycle: {task_acceptance: queue, queue_depth: 8}\n" + extra
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(m), 0o644)
		return filepath.Join(dir, "murmur.yaml")
	}
	open := wordcount(filepath.Join(tmp, "open"), "exports:\n  peer_tasks: {accept: true}\n")
	closed := wordcount(filepath.Join(tmp, "closed"), "")
	delegator := filepath.Join(tmp, "delegator", "murmur.yaml")
	os.MkdirAll(filepath.Dir(delegator), 0o755)
	os.WriteFile(delegator, []byte(`name: delegator
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 0.2.0, runtime: driver, gateway: {endpoint: "`+provider.URL+`"}}
inference:
  driver: {artifact: anthropic-messages}
  model: m
  max_turns: 4
peers:
  - {name: counter, url: "`+base+`/agents/counter/", description: counts words}
  - {name: closed, url: "`+base+`/agents/closed/"}
  - {name: self, url: "`+base+`/agents/delegator/"}
exports:
  peer_tasks: {accept: true}
capabilities:
  network: {allow: ["127.0.0.1:`+port+`"]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60, peer_depth: 2}
lifecycle: {task_acceptance: queue, queue_depth: 8}
`), 0o644)
	serveSites(t, `http://127.0.0.1:`+port+` {
	handle_path /agents/delegator/* {
		# The loop's three tasks run at once on this one capsule: each waits for the next.
		capsule `+delegator+` {
			concurrency 4
		}
	}
	handle_path /agents/counter/* {
		capsule `+open+`
	}
	handle_path /agents/closed/* {
		capsule `+closed+`
	}
}
`, "CAPSULE_REGISTRY="+reg)
	g := &gateway{base: base, httpClient: &http.Client{Timeout: 60 * time.Second}}

	// Delegated: the model read the peer's answer, and the task completed.
	tk := decodeTask(t, g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("delegate the count")}))
	if tk.Status.State != "completed" || tk.text() != "The counter answered." {
		t.Fatalf("delegating task %v", tk)
	}
	result := toolResult(t, requests(), "tu_d")
	peerTask := regexp.MustCompile(`its task (\S+),`).FindStringSubmatch(result)
	if !strings.Contains(result, "Peer counter answered") || !strings.Contains(result, "3 words") || peerTask == nil {
		t.Fatalf("the model read %q", result)
	}

	// Whose task it is: not the anonymous client's, though it sent the delegating task;
	// the delegator's runtime, for that same principal, reads it.
	if r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]}); r.Error == nil {
		t.Errorf("the client read the delegated task: %s", r.body)
	}
	r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]},
		a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "delegator")
	if got := decodeTask(t, r); got.Status.State != "completed" || !strings.Contains(got.text(), "3 words") {
		t.Errorf("the delegated task, read as the delegator: %v", got)
	}
	// Another capsule's runtime, or the delegator acting for someone else, cannot.
	for _, h := range [][]string{{a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "other"},
		{a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "delegator", a2a.HeaderPeerPrincipal, "mallory"}} {
		if r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]}, h...); r.Error == nil {
			t.Errorf("read with %v: %s", h, r.body)
		}
	}

	// Refused by a capsule that does not accept peer tasks: the model reads why.
	tk = decodeTask(t, g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("try the closed one")}))
	if result := toolResult(t, requests(), "tu_c"); tk.Status.State != "completed" || !strings.Contains(result, "E-PEER-005") {
		t.Errorf("task %v; the model read %q", tk, result)
	}
	// A client that is no runtime is served as always by the closed capsule.
	if tk := decodeTask(t, g.call(t, "/agents/closed/", "", "message/send", map[string]any{"message": msg03("a b")})); tk.Status.State != "completed" {
		t.Errorf("a client's task on the closed capsule: %v", tk)
	}

	// A loop: the delegator messages itself. The client's task (depth 0) starts depth 1,
	// which starts depth 2 (peer_depth 2); depth 2 may not start depth 3.
	tk = decodeTask(t, g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("loop")}))
	if tk.Status.State != "completed" {
		t.Fatalf("looping task %v", tk)
	}
	var depthRefused bool
	for _, body := range requests() {
		if strings.Contains(body, "E-PEER-003") {
			depthRefused = true
		}
	}
	if !depthRefused {
		t.Errorf("no turn read the depth refusal E-PEER-003")
	}
}

// toolResult is the text of the tool result for call id in the provider requests.
func toolResult(t *testing.T, bodies []string, id string) string {
	t.Helper()
	for _, b := range bodies {
		var req struct {
			Messages []struct {
				Content []struct {
					Type      string
					ToolUseID string `json:"tool_use_id"`
					Content   []struct{ Text string }
				}
			}
		}
		if json.Unmarshal([]byte(b), &req) != nil {
			continue
		}
		for _, m := range req.Messages {
			for _, c := range m.Content {
				if c.Type == "tool_result" && c.ToolUseID == id && len(c.Content) > 0 {
					return c.Content[0].Text
				}
			}
		}
	}
	t.Fatalf("no provider request holds the result of %s", id)
	return ""
}
