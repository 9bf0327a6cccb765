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
     "usage": {"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 8, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 128}}]}]}`

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

// TestCodexCLI runs the real Codex CLI against replay on 127.0.0.1: it accepts the
// synthesized Responses streams, runs the scripted call, and its second request — the
// call and its output in input — is matched to turn 1, whose text it prints.
func TestCodexCLI(t *testing.T) {
	bin := codexBinary(t)
	lib, err := Load(writeFiles(t, map[string]string{"codex.json": codexCassette}))
	if err != nil {
		t.Fatal(err)
	}
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

	home := t.TempDir()
	config := `model = "gpt-5"
model_provider = "replay"
[model_providers.replay]
name = "capsulegate replay"
base_url = "` + srv.URL + `/v1"
wire_api = "responses"
env_key = "CAPSULEGATE_REPLAY_KEY"
request_max_retries = 0
stream_max_retries = 0
`
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "exec", "--json", "--skip-git-repo-check", "-C", work, "say the replay words")
	cmd.Env = append(os.Environ(), "CODEX_HOME="+home, "CAPSULEGATE_REPLAY_KEY=sk-replay")
	cmd.Stdin = strings.NewReader("")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("codex exec: %v\nstdout:\n%s\nstderr (tail):\n%s", err, stdout.String(), tail(stderr.String(), 2000))
	if err != nil {
		t.Fatalf("codex exec failed: %v", err)
	}

	var answered, reasoned, completed bool
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type string
			Item struct{ Type, Text string }
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		answered = answered || (ev.Type == "item.completed" && ev.Item.Type == "agent_message" && ev.Item.Text == "The replay answered in several words.")
		reasoned = reasoned || (ev.Type == "item.completed" && ev.Item.Type == "reasoning" && strings.Contains(ev.Item.Text, "Running echo"))
		completed = completed || ev.Type == "turn.completed"
	}
	if !answered || !reasoned || !completed {
		t.Errorf("codex did not print turn 0's reasoning (%v), turn 1's answer (%v) and complete the turn (%v)", reasoned, answered, completed)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 {
		t.Fatalf("codex made %d requests, want 2 (the call, then the answer)", len(bodies))
	}
	for i, b := range bodies {
		first, turn, stream, err := parseRequest(Responses, b)
		if err != nil || first != "say the replay words" || turn != i || !stream {
			t.Errorf("request %d read as %q, turn %d, stream %v, %v", i, first, turn, stream, err)
		}
	}
	if !bytes.Contains(bodies[1], []byte(`"call_c1"`)) || !bytes.Contains(bodies[1], []byte(`function_call_output`)) {
		t.Errorf("the second request does not carry the call's output: %s", tail(string(bodies[1]), 2000))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
