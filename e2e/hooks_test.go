package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// hookedCassette scripts a task the policy hook gets in the way of: the first turn asks
// echo for something holding "rm" (denied), the next two call echo harmlessly, the
// third's input tokens (990) reaching 0.98 × context.max_tokens (1000). The
// summarisation call and the turn after compaction are conversations of their own: the
// replay provider matches a request by its first user message, which compaction
// replaced, and picks the turn by the assistant messages the request holds (two kept).
const hookedCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "Summarise the conversation below", "turns": [
   {"id": "s1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The user asked for a clean-up; rm was refused, echo ran twice."}], "usage": {"input_tokens": 400, "output_tokens": 14}}]},
 {"match": "Summary of the conversation so far", "turns": [
   {"id": "x0", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn", "content": [{"type": "text", "text": "unused"}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "x1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn", "content": [{"type": "text", "text": "unused"}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "x2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Cleaned up without rm."}], "usage": {"input_tokens": 300, "output_tokens": 5}}]},
 {"match": "please clean up", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "rm -rf /tmp/x"}}], "usage": {"input_tokens": 100, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_2", "name": "echo", "input": {"text": "tidy a"}}], "usage": {"input_tokens": 500, "output_tokens": 5}},
   {"id": "m3", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_3", "name": "echo", "input": {"text": "tidy b"}}], "usage": {"input_tokens": 990, "output_tokens": 5}}]}]}`

// serveCapsule runs `caddy run` on a Caddyfile serving the capsule at mpath under
// /agents/<name>/, with registry reg and work root <dir>/work.
func serveCapsule(t *testing.T, dir, home, reg, name, mpath string) *gateway {
	t.Helper()
	port, admin := freePort(t), freePort(t)
	cf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(cf, []byte(fmt.Sprintf(`{
	admin 127.0.0.1:%s
	default_bind 127.0.0.1
	capsule {
		registry %s
		work_root %s
		cache_dir %s
	}
}

http://127.0.0.1:%s {
	handle /agents/%s/* {
		capsule %s
	}
}
`, admin, reg, filepath.Join(dir, "work"), gatewayCache(), port, name, mpath)), 0o644)
	g := &gateway{dir: dir, home: home, base: "http://127.0.0.1:" + port, logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 120 * time.Second}}
	g.cmd = exec.Command(caddyBin, "run", "--config", cf, "--adapter", "caddyfile")
	g.cmd.Dir = dir
	g.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
	waitServing(t, g.cmd, g.logs)
	return g
}

// TestHooksAndCompactionThroughTheGateway is the hooks acceptance run through `caddy
// run`: an agent capsule with a blocking on-tool-call deny hook (the example policy-hook),
// an async audit hook (the example audit-hook) and compaction, both hooks published as hook artifacts, gets
// one A2A message/send against the cassette. The denied call's reason reaches the
// model's next turn, the driver is asked for one summary that then replaces the
// history, audit.jsonl has every event in order, and the trace has the proposal, the
// hook's answer, the denied call and the compaction, in that order.
func TestHooksAndCompactionThroughTheGateway(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	dir := t.TempDir()
	home, reg := filepath.Join(dir, "home"), filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	for _, a := range []struct{ name, keys, src string }{
		{"echo", "runtime: tool\ndescription: echoes its input\n", "../internal/testkit/testguests/echo"},
		{"policy", "runtime: hook\nbinding: on-tool-call\nexecution_mode: blocking\ncommit_policy: deny\n", "../examples/guests/policy-hook"},
		{"audit", "runtime: hook\nexecution_mode: async\n", "../examples/guests/audit-hook"},
	} {
		src := filepath.Join(t.TempDir(), a.name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "murmur.yaml"), []byte("name: "+a.name+"\nversion: 1.0.0\n"+a.keys), 0o644)
		publish(t, home, reg, src, a.name, guestbuild.Wasm(t, a.src))
	}
	cassettes := filepath.Join(dir, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "hooked.json"), []byte(hookedCassette), 0o644)
	srv, requests := recordingProvider(t, cassettes)

	capDir := filepath.Join(dir, "hooked")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: hooked
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 0.2.0, runtime: driver, gateway: {endpoint: "`+srv.URL+`"}}
  - {name: echo, version: 1.0.0}
  - {name: policy, version: 1.0.0, runtime: hook}
  - {name: audit, version: 1.0.0, runtime: hook}
inference:
  driver: {artifact: anthropic-messages}
  model: m
  max_turns: 6
  compaction: {threshold: 0.98}
context: {max_tokens: 1000}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 120}
trace: {capture: content}
`), 0o644)
	work := filepath.Join(dir, "work")
	g := serveCapsule(t, dir, home, reg, "hooked", filepath.Join(capDir, "murmur.yaml"))

	tk := decodeTask(t, g.call(t, "/agents/hooked/", "", "message/send", map[string]any{"message": msg03("please clean up the scratch folder")}))
	if tk.Status.State != "completed" || tk.text() != "Cleaned up without rm." {
		t.Fatalf("task: %v", tk)
	}
	// Stopping the gateway ends the session: session_end drains the audit hook's queue.
	g.cmd.Process.Signal(os.Interrupt)
	g.cmd.Wait()

	// The provider: three turns, one summarisation call, the turn after compaction.
	bodies := requests()
	if len(bodies) != 5 {
		t.Fatalf("%d provider requests, want 5:\n%s", len(bodies), strings.Join(bodies, "\n"))
	}
	if !strings.Contains(bodies[1], "refused by hook policy: policy-hook: echo mentions rm") {
		t.Errorf("the request after the denial lacks the hook's reason: %s", bodies[1])
	}
	summaries := 0
	for _, b := range bodies {
		summaries += strings.Count(b, "Summarise the conversation below")
	}
	if summaries != 1 || !strings.Contains(bodies[3], "Summarise the conversation below") {
		t.Errorf("%d summarisation requests, want one, the fourth request", summaries)
	}
	var next struct {
		Messages []struct {
			Role    string
			Content []struct{ Type, Text string }
		}
	}
	json.Unmarshal([]byte(bodies[4]), &next)
	if len(next.Messages) == 0 || next.Messages[0].Role != "user" || len(next.Messages[0].Content) == 0 ||
		next.Messages[0].Content[0].Text != "Summary of the conversation so far:\n\nThe user asked for a clean-up; rm was refused, echo ran twice." ||
		strings.Contains(bodies[4], "please clean up") || strings.Contains(bodies[4], "tu_1") || strings.Contains(bodies[4], "refused by hook") {
		t.Errorf("the request after compaction does not carry the summary instead of the history: %s", bodies[4])
	}

	// The session's files: out/audit.jsonl in its workdir, trace.jsonl in its records.
	var audits, traces []string
	filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
		case d.Name() == "audit.jsonl":
			audits = append(audits, p)
		case d.Name() == "trace.jsonl":
			traces = append(traces, p)
		}
		return nil
	})
	if len(audits) != 1 || len(traces) != 1 {
		t.Fatalf("audit files %v, traces %v: want one session's", audits, traces)
	}
	audit, _ := os.ReadFile(audits[0])
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
	want := "on-session-start,on-task-start," +
		"on-inference,on-tool-call,on-tool-call:denied," +
		"on-inference,on-tool-call,on-tool-call:passed," +
		"on-inference,on-tool-call,on-tool-call:passed," +
		"on-inference,on-task-end,on-session-end"
	if got := strings.Join(events, ","); got != want {
		t.Errorf("audit.jsonl events\n%s\nwant\n%s", got, want)
	}

	trace, _ := os.ReadFile(traces[0])
	var seq []string
	compactions := 0
	for _, line := range bytes.Split(bytes.TrimSpace(trace), []byte("\n")) {
		var ev struct {
			Type       string `json:"event_type"`
			Hook       string `json:"hook"`
			Output     string `json:"output"`
			Status     string `json:"status"`
			Summariser string `json:"summariser"`
			Error      string `json:"error"`
		}
		json.Unmarshal(line, &ev)
		switch {
		case ev.Type == "tool_call_proposed":
			seq = append(seq, ev.Type)
		case ev.Type == "hook" && ev.Hook == "policy" && ev.Output == "deny":
			seq = append(seq, "hook:policy:deny")
		case ev.Type == "tool_call" && ev.Status == "denied":
			seq = append(seq, "tool_call:denied")
		case ev.Type == "compaction":
			compactions++
			seq = append(seq, "compaction:"+ev.Summariser+ev.Error)
		}
	}
	if compactions != 1 {
		t.Errorf("%d compaction events, want 1", compactions)
	}
	if got, wantSeq := strings.Join(seq, ","), "tool_call_proposed,hook:policy:deny,tool_call:denied,tool_call_proposed,tool_call_proposed,compaction:driver"; got != wantSeq {
		t.Errorf("trace\n%s\nwant\n%s", got, wantSeq)
	}
}

// TestReopenTaskThroughTheGateway: an A2A client streaming a task of an agent capsule
// with a blocking on-task-end reopen-task hook (reopenhook) sees a working status update
// carrying the hook's message, then the answer to it: the task was reopened once with
// the message as its next user turn.
func TestReopenTaskThroughTheGateway(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	dir := t.TempDir()
	home, reg := filepath.Join(dir, "home"), filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	for _, a := range []struct{ name, keys, src string }{
		{"recdriver", "runtime: driver\ndescription: recdriver\n", "recdriver"},
		{"reopen", "runtime: hook\nbinding: on-task-end\ncommit_policy: reopen-task\n", "reopenhook"},
	} {
		src := filepath.Join(t.TempDir(), a.name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "murmur.yaml"), []byte("name: "+a.name+"\nversion: 1.0.0\n"+a.keys), 0o644)
		publish(t, home, reg, src, a.name, guestbuild.Wasm(t, "../internal/testkit/testguests/"+a.src))
	}
	capDir := filepath.Join(dir, "reopening")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: reopening
version: 1.0.0
artifacts:
  - {name: recdriver, version: 1.0.0, runtime: driver}
  - {name: reopen, version: 1.0.0, runtime: hook}
inference: {driver: {artifact: recdriver}, model: m, max_turns: 3}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 120}
`), 0o644)
	g := serveCapsule(t, dir, home, reg, "reopening", filepath.Join(capDir, "murmur.yaml"))
	const message = "reopenhook: check your work"
	var working []string
	var final string
	var all []string
	var ans answerStream // what a client assembles: the reopened turn's answer replaces the first's
	for ev := range g.stream(t, "/agents/reopening/", "", "message/stream", map[string]any{"message": msg03("hello")}) {
		var r struct {
			Result struct {
				Kind   string
				Status struct {
					State   string
					Message *struct{ Parts []struct{ Text string } }
				}
				Artifact          struct{ Parts []struct{ Text string } }
				Append, LastChunk bool
			}
		}
		json.Unmarshal(ev.data, &r)
		all = append(all, string(ev.data))
		switch {
		case r.Result.Kind == "status-update" && r.Result.Status.State == "working" && r.Result.Status.Message != nil:
			for _, p := range r.Result.Status.Message.Parts {
				working = append(working, p.Text)
			}
		case r.Result.Kind == "status-update" && r.Result.Status.State != "working":
			final += "|" + ans.answer + "|" + r.Result.Status.State
		case r.Result.Kind == "artifact-update":
			text := ""
			for _, p := range r.Result.Artifact.Parts {
				text += p.Text
			}
			ans.add(text, r.Result.Append, r.Result.LastChunk)
		}
	}
	if !slices.Contains(working, message) {
		t.Errorf("working status updates %q lack the hook's message", working)
	}
	if final != "|you said: "+message+"|completed" {
		t.Errorf("the stream ended with %q, want the answer to the reopened turn, completed; events:\n%s", final, strings.Join(all, "\n"))
	}
}
