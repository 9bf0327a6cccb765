package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// codexCassette scripts a two-turn Codex task: reasoning and a shell call, then the
// answer.
const codexCassette = `{"provider": "openai-responses", "conversations": [
  {"match": "say the replay words", "turns": [
    {"id": "resp_c1", "object": "response", "status": "completed", "model": "gpt-5",
     "output": [{"type": "reasoning", "id": "rs_c1", "summary": [{"type": "summary_text", "text": "**Running echo** first."}]},
                {"type": "function_call", "id": "fc_c1", "status": "completed", "call_id": "call_c1", "name": "exec_command", "arguments": "{\"cmd\":\"echo replay-tool-ran\"}"}],
     "usage": {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}},
    {"id": "resp_c2", "object": "response", "status": "completed", "model": "gpt-5",
     "output": [{"type": "message", "id": "msg_c2", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "The replay answered in several words.", "annotations": []}]}],
     "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 128}}]},
  {"match": "a hand-written stream", "turns": [{"stream": [
    {"event": "response.created", "data": {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}},
    {"delay_ms": 20, "event": "response.output_text.delta", "data": {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_1", "output_index": 0, "content_index": 0, "delta": "Three words."}},
    {"event": "response.output_item.done", "data": {"type": "response.output_item.done", "sequence_number": 2, "output_index": 0, "item": {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Three words.", "annotations": []}]}}},
    {"event": "response.completed", "data": {"type": "response.completed", "sequence_number": 3, "response": {"id": "resp_1", "object": "response", "status": "completed", "output": [], "usage": {"input_tokens": 20, "output_tokens": 3, "total_tokens": 23}}}}]}]}]}`

// codexBinary returns the Codex CLI a harness install left on this machine
// ($CAPSULEGATE_CODEX, else the newest ~/.cache/capsulegate-harnesses/@openai/codex@*),
// or skips: the suite never needs it.
func codexBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the real Codex CLI")
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("no node on PATH for the Codex CLI")
	}
	if bin := os.Getenv("CAPSULEGATE_CODEX"); bin != "" {
		return bin
	}
	home, _ := os.UserHomeDir()
	found, _ := filepath.Glob(filepath.Join(home, ".cache", "capsulegate-harnesses", "@openai", "codex@*", "node_modules", ".bin", "codex"))
	sort.Strings(found)
	if len(found) == 0 {
		t.Skip("no Codex CLI installed under ~/.cache/capsulegate-harnesses (set CAPSULEGATE_CODEX to run this)")
	}
	return found[len(found)-1]
}

// runCodex runs `codex exec --json` on task in work against the Responses API at base
// (…/v1), in a fresh CODEX_HOME, and returns its JSON lines.
func runCodex(t *testing.T, bin, base, work, task string) (string, error) {
	t.Helper()
	home := t.TempDir()
	// No retries: a refused request shows at once, not after Codex's backoff.
	config := `model = "gpt-5"
model_provider = "replay"
[model_providers.replay]
name = "capsulegate replay"
base_url = "` + base + `"
wire_api = "responses"
env_key = "CAPSULEGATE_REPLAY_KEY"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--json", "--skip-git-repo-check", "-C", work, task)
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "CAPSULEGATE_REPLAY_KEY=sk-replay-0123456789")
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("codex exec %q: %v\nstdout:\n%s\nstderr (tail):\n%s", task, err, stdout.String(), tail(stderr.String(), 2000))
	return stdout.String(), err
}

// codexEvents are what a codex exec --json run printed that the tests check.
type codexEvents struct {
	reasoning, answer string
	completed         bool
	errors            []string
}

func readCodex(out string) codexEvents {
	var got codexEvents
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type    string
			Message string
			Item    struct{ Type, Text string }
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		switch {
		case ev.Type == "item.completed" && ev.Item.Type == "agent_message":
			got.answer = ev.Item.Text
		case ev.Type == "item.completed" && ev.Item.Type == "reasoning":
			got.reasoning = ev.Item.Text
		case ev.Type == "turn.completed":
			got.completed = true
		case ev.Type == "error" || ev.Type == "turn.failed":
			got.errors = append(got.errors, sc.Text())
		}
	}
	return got
}

// TestCodexCLI runs the real Codex CLI against replay on 127.0.0.1: it accepts the
// synthesized Responses streams, runs the scripted call, and its second request — the
// call and its output in input — is matched to turn 1, whose text it prints. A miss
// reaches Codex's output; and what the recorder records of Codex replays to Codex.
// The cases run in parallel, each on a replay server of its own.
func TestCodexCLI(t *testing.T) {
	bin := codexBinary(t)
	lib, err := Load(writeFiles(t, map[string]string{"codex.json": codexCassette}))
	if err != nil {
		t.Fatal(err)
	}
	const answer = "The replay answered in several words."

	t.Run("two turns", func(t *testing.T) {
		t.Parallel()
		h := lib.Handler()
		var mu sync.Mutex
		var bodies [][]byte
		h.OnRequest = func(_ *http.Request, body []byte) {
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		// Codex sends AGENTS.md, with the environment, as a user message before the task.
		work := t.TempDir()
		if err := os.WriteFile(filepath.Join(work, "AGENTS.md"), []byte("Keep answers short.\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runCodex(t, bin, srv.URL+"/v1", work, "say the replay words")
		got := readCodex(out)
		if err != nil || got.answer != answer || !strings.Contains(got.reasoning, "Running echo") || !got.completed {
			t.Fatalf("codex: %v; printed reasoning %q, answer %q, completed %v", err, got.reasoning, got.answer, got.completed)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(bodies) != 2 {
			t.Fatalf("codex made %d requests, want 2 (the call, then the answer)", len(bodies))
		}
		for i, b := range bodies {
			q, err := parseRequest(Responses, b, nil)
			if err != nil || q.first != "say the replay words" || q.turn != i || !q.stream || q.store {
				t.Errorf("request %d read as %+v, %v", i, q, err)
			}
		}
		if !bytes.Contains(bodies[0], []byte("# AGENTS.md instructions for ")) || !bytes.Contains(bodies[0], []byte("<environment_context>")) {
			t.Errorf("codex sent no context before the task; the test proves less than it says")
		}
		if !bytes.Contains(bodies[1], []byte(`"call_c1"`)) || !bytes.Contains(bodies[1], []byte(`function_call_output`)) {
			t.Errorf("the second request does not carry the call's output: %s", tail(string(bodies[1]), 2000))
		}
	})

	// The smallest stream docs/reference/cassettes.md says Codex needs.
	t.Run("hand-written stream", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(lib.Handler())
		defer srv.Close()
		out, err := runCodex(t, bin, srv.URL+"/v1", t.TempDir(), "answer a hand-written stream")
		if got := readCodex(out); err != nil || got.answer != "Three words." || !got.completed {
			t.Fatalf("codex: %v; answer %q, completed %v", err, got.answer, got.completed)
		}
	})

	t.Run("miss", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(lib.Handler())
		defer srv.Close()
		out, err := runCodex(t, bin, srv.URL+"/v1", t.TempDir(), "an unscripted question")
		got := readCodex(out)
		if err == nil || got.answer != "" || !strings.Contains(strings.Join(got.errors, "\n"), "cassette miss") ||
			!strings.Contains(strings.Join(got.errors, "\n"), "an unscripted question") {
			t.Fatalf("codex: %v; answer %q, errors %q", err, got.answer, got.errors)
		}
	})

	t.Run("record and replay", func(t *testing.T) {
		t.Parallel()
		upstream := httptest.NewServer(lib.Handler())
		defer upstream.Close()
		dir := t.TempDir()
		rc, err := NewRecorder(upstream.URL, dir)
		if err != nil {
			t.Fatal(err)
		}
		var recMu sync.Mutex
		var recErrs []error
		rc.OnRecord = func(_ string, _ int, err error) {
			recMu.Lock()
			recErrs = append(recErrs, err)
			recMu.Unlock()
		}
		front := httptest.NewServer(rc)
		out, err := runCodex(t, bin, front.URL+"/v1", t.TempDir(), "say the replay words")
		front.Close()
		if got := readCodex(out); err != nil || got.answer != answer {
			t.Fatalf("codex through the recorder: %v; answer %q", err, got.answer)
		}
		recMu.Lock()
		if len(recErrs) != 2 || recErrs[0] != nil || recErrs[1] != nil {
			t.Fatalf("recorded: %v", recErrs)
		}
		recMu.Unlock()
		data, _ := os.ReadFile(filepath.Join(dir, "recorded-openai-responses.json"))
		if bytes.Contains(data, []byte("sk-replay-0123456789")) || !bytes.Contains(data, []byte(`"match": "say the replay words"`)) {
			t.Fatalf("recorded cassette:\n%s", tail(string(data), 3000))
		}
		rec, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if evs, _ := parseStream(rec.byPro[Responses][0].Turns[1]); evs == nil {
			t.Fatal("turn 1 was not recorded as a stream")
		}
		srv2 := httptest.NewServer(rec.Handler())
		defer srv2.Close()
		out, err = runCodex(t, bin, srv2.URL+"/v1", t.TempDir(), "say the replay words")
		if got := readCodex(out); err != nil || got.answer != answer || !got.completed {
			t.Fatalf("codex on the recorded streams: %v; answer %q", err, got.answer)
		}
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
