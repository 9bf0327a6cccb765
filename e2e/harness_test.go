package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/replay"
)

// claudeCassette scripts Claude Code's two requests of the task: it calls the capsule's
// echo tool through the bridge (its name as Claude Code knows it), then answers with
// what the tool said.
const claudeCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "count the words in: the quick brown fox", "turns": [
   {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__capsule__echo", "input": {"text": "the quick brown fox"}}],
    "usage": {"input_tokens": 120, "output_tokens": 20}},
   {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The echo tool saw four words: the quick brown fox."}],
    "usage": {"input_tokens": 180, "output_tokens": 14}}]}]}`

const claudeSentinel = "sk-ant-sentinel-only-the-provider-holds-this"

// TestClaudeCodeThroughTheGateway is the process transport's acceptance with the real
// Claude Code CLI: a capsule whose inference is Claude Code, served by `caddy run`, gets
// an A2A message/stream. Claude Code runs in the session's sealed sandbox, asks the
// replay provider through the credential gateway (which alone adds the key), calls the
// capsule's wasm tool through the MCP bridge and answers; the client streams the text,
// and the trace shows the session, the task, the harness's turn and the tool call under
// it. The key reaches the provider only: it is in no file of the session.
func TestClaudeCodeThroughTheGateway(t *testing.T) {
	claude := harnesstest.Claude(t)
	dir := t.TempDir()
	cassettes := filepath.Join(dir, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "claude.json"), []byte(claudeCassette), 0o644)
	lib, err := replay.Load(cassettes)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var keys []string
	h := lib.Handler()
	h.OnRequest = func(r *http.Request, _ []byte) {
		mu.Lock()
		keys = append(keys, r.Header.Get("X-Api-Key")+"|"+r.Header.Get("Authorization"))
		mu.Unlock()
	}
	prov := httptest.NewServer(h)
	defer prov.Close()

	g := harnessGateway(t, dir, claude, "claude-code", "claude-sonnet-4-5", prov.URL)

	var ans answerStream
	for ev := range g.stream(t, "/agents/harnessed/", "", "message/stream", map[string]any{"message": msg03("count the words in: the quick brown fox")}) {
		var r struct {
			Result struct {
				Kind   string `json:"kind"`
				Status struct {
					State   string `json:"state"`
					Message *struct {
						Parts []struct{ Text string } `json:"parts"`
					} `json:"message"`
				} `json:"status"`
				Artifact *struct {
					Parts []struct{ Text string } `json:"parts"`
				} `json:"artifact"`
				Append    bool `json:"append"`
				LastChunk bool `json:"lastChunk"`
			} `json:"result"`
		}
		json.Unmarshal(ev.data, &r)
		if a := r.Result.Artifact; a != nil {
			text := ""
			for _, p := range a.Parts {
				text += p.Text
			}
			ans.add(text, r.Result.Append, r.Result.LastChunk)
		}
		if r.Result.Status.State == "failed" {
			t.Fatalf("the task failed: %s\n%s", ev.data, g.logs.String())
		}
	}
	final, texts := ans.answer, ans.chunks
	if final != "The echo tool saw four words: the quick brown fox." || !strings.Contains(strings.Join(texts, ""), "four words") {
		g.cmd.Process.Signal(os.Interrupt)
		g.cmd.Wait()
		t.Fatalf("answer %q, streamed %q\n%s\ntraces:\n%s", final, texts, g.logs.String(), dumpTraces(filepath.Join(dir, "work")))
	}
	mu.Lock()
	if len(keys) < 2 {
		t.Errorf("the provider saw %d requests, want the tool call turn and the answer", len(keys))
	}
	for _, k := range keys {
		if k != claudeSentinel+"|" {
			t.Errorf("the provider saw credentials %q, want only the key as x-api-key", k)
		}
	}
	mu.Unlock()
	if !strings.Contains(g.logs.String(), "sandbox tier sealed") {
		t.Errorf("the harness did not run in the sealed tier:\n%s", g.logs.String())
	}

	// The trace: session → task → the harness's turn → the echo call through the bridge.
	var traces []string
	filepath.WalkDir(filepath.Join(dir, "work"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "trace.jsonl" {
			traces = append(traces, p)
		}
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(claudeSentinel)) {
				t.Errorf("%s holds the provider key", p)
			}
		}
		return nil
	})
	if len(traces) != 1 {
		t.Fatalf("traces %v", traces)
	}
	type event struct {
		ID       string `json:"event_id"`
		Parent   string `json:"parent_id"`
		Type     string `json:"event_type"`
		Case     string `json:"case"`
		ToolName string `json:"tool_name"`
		Status   string `json:"status"`
	}
	byID := map[string]event{}
	var calls []event
	for _, line := range bytes.Split(bytes.TrimSpace(must(os.ReadFile(traces[0]))), []byte("\n")) {
		var e event
		json.Unmarshal(line, &e)
		byID[e.ID] = e
		if e.Type == "tool_call" && e.ToolName == "echo" {
			calls = append(calls, e)
		}
	}
	if len(calls) != 1 || calls[0].Status != "passed" {
		t.Fatalf("echo calls in the trace: %+v", calls)
	}
	turn := byID[calls[0].Parent]
	task := byID[turn.Parent]
	session := byID[task.Parent]
	if turn.Type != "harness" || turn.Case != "turn-started" || task.Type != "task_start" || session.Type != "session_start" {
		t.Errorf("the call's ancestry: %s ← %s ← %s", fmt.Sprint(turn), fmt.Sprint(task), fmt.Sprint(session))
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// dumpTraces is every trace.jsonl under root, for a failure's message.
func dumpTraces(root string) string {
	var b strings.Builder
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && (d.Name() == "trace.jsonl" || strings.HasSuffix(d.Name(), ".log")) {
			fmt.Fprintf(&b, "== %s\n%s\n", p, must(os.ReadFile(p)))
		}
		return nil
	})
	return b.String()
}

// codexCassette is the replay cassette of the Codex task: the echo tool called through
// the bridge (by the name and namespace Codex offered it under), then the answer.
func codexCassette(name, namespace string) string {
	call := map[string]any{"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1", "name": name,
		"arguments": `{"text":"the quick brown fox"}`}
	if namespace != "" {
		call["namespace"] = namespace
	}
	usage := map[string]any{"input_tokens": 100, "input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens": 10,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 110}
	c := map[string]any{"provider": "openai-responses", "conversations": []any{map[string]any{"match": "count the words in: the quick brown fox", "turns": []any{
		map[string]any{"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5", "output": []any{call}, "usage": usage},
		map[string]any{"id": "resp_2", "object": "response", "status": "completed", "model": "gpt-5", "usage": usage, "output": []any{
			map[string]any{"type": "message", "id": "msg_2", "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": "The echo tool saw four words: the quick brown fox.", "annotations": []any{}}}}}},
	}}}}
	b, _ := json.Marshal(c)
	return string(b)
}

// TestCodexThroughTheGateway is the same acceptance with the real Codex CLI: its
// streamed OpenAI Responses requests are answered by the replay provider through the
// credential gateway. The cassette is written when Codex's first request shows the name
// and namespace it offers the bridge's echo tool under.
func TestCodexThroughTheGateway(t *testing.T) {
	codex := harnesstest.Codex(t)
	dir := t.TempDir()
	cassettes := filepath.Join(dir, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	var mu sync.Mutex
	var keys []string
	var h http.Handler
	prov := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		mu.Lock()
		keys = append(keys, r.Header.Get("Authorization"))
		if h == nil {
			name, ns := offeredEcho(body)
			os.WriteFile(filepath.Join(cassettes, "codex.json"), []byte(codexCassette(name, ns)), 0o644)
			lib, err := replay.Load(cassettes)
			if err != nil {
				mu.Unlock()
				http.Error(w, err.Error(), 500)
				return
			}
			h = lib.Handler()
		}
		mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	defer prov.Close()

	g := harnessGateway(t, dir, codex, "codex", "gpt-5", prov.URL)

	tk := decodeTask(t, g.call(t, "/agents/harnessed/", "", "message/send", map[string]any{"message": msg03("count the words in: the quick brown fox")}))
	if tk.Status.State != "completed" || tk.text() != "The echo tool saw four words: the quick brown fox." {
		g.cmd.Process.Signal(os.Interrupt)
		g.cmd.Wait()
		t.Fatalf("task: %v\n%s\ntraces:\n%s", tk, g.logs.String(), dumpTraces(filepath.Join(dir, "work")))
	}
	mu.Lock()
	for _, k := range keys {
		if k != "Bearer "+claudeSentinel {
			t.Errorf("the provider saw credentials %q, want only the key", k)
		}
	}
	mu.Unlock()
	traces := dumpTraces(filepath.Join(dir, "work"))
	if !strings.Contains(traces, `"event_type":"tool_call"`) || !strings.Contains(traces, `"tool_name":"echo"`) {
		t.Errorf("no echo tool call in the trace:\n%s", traces)
	}
}

// offeredEcho finds the echo tool among a Responses request's tools: its name, and the
// namespace holding it when Codex groups a server's tools in one.
func offeredEcho(body []byte) (name, namespace string) {
	var req struct {
		Tools []struct {
			Type, Name string
			Tools      []struct{ Name string }
		}
	}
	json.Unmarshal(body, &req)
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			for _, in := range t.Tools {
				if strings.HasSuffix(in.Name, "echo") {
					return in.Name, t.Name
				}
			}
		}
		if strings.HasSuffix(t.Name, "echo") {
			return t.Name, ""
		}
	}
	return "echo", ""
}

// harnessGateway serves, with `caddy run`, a process capsule "harnessed" driven by the
// example process driver named driver (its harness CLI at bin, put on the gateway's
// PATH), with the echo wasm tool, its gateway endpoint the provider at providerURL with
// the sentinel key, in the sealed tier.
func harnessGateway(t *testing.T, dir, bin, driver, model, providerURL string) *gateway {
	t.Helper()
	home, reg := filepath.Join(dir, "home"), filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/"+driver+"/artifact", driver, guestbuild.Wasm(t, "../examples/drivers/"+driver))
	echo := filepath.Join(t.TempDir(), "echo")
	os.MkdirAll(echo, 0o755)
	os.WriteFile(filepath.Join(echo, "murmur.yaml"), []byte("name: echo\nversion: 1.0.0\nruntime: tool\ndescription: echoes its input\n"+
		"input_schema: {type: object, properties: {text: {type: string}}, required: [text]}\n"), 0o644)
	publish(t, home, reg, echo, "echo", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	version := regexp.MustCompile(`(?m)^version: *(\S+)`).FindSubmatch(must(os.ReadFile("../examples/drivers/" + driver + "/artifact/murmur.yaml")))
	capDir := filepath.Join(dir, "harnessed")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: harnessed
version: 1.0.0
artifacts:
  - {name: `+driver+`, version: `+string(version[1])+`, runtime: driver, gateway: {endpoint: "`+providerURL+`", api_key: "`+claudeSentinel+`"}}
  - {name: echo, version: 1.0.0}
inference:
  transport: process
  driver: {artifact: `+driver+`}
  model: `+model+`
capabilities:
  harness: {paths: [{path: /usr/lib/node_modules}]}
  shell: {min_tier: sealed}
  limits: {deadline_seconds: 120}
trace: {capture: content}
`), 0o644)
	// The gateway finds the harness on its PATH, as an operator installs it.
	t.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	return serveCapsule(t, dir, home, reg, "harnessed", filepath.Join(capDir, "murmur.yaml"))
}
