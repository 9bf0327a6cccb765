package runtime

import (
	"bytes"
	"context"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/replay"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

const agentCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "echo hi", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "text", "text": "Let me echo."}, {"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "hi"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The echo said hi."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]},
 {"match": "call a ghost", "turns": [
   {"id": "g1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_9", "name": "ghost", "input": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "g2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "No ghost."}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`

// TestAgentCapsule runs the agent loop end to end: the Anthropic driver guest against the
// replay provider, the echo wasm tool, the key added host-side and never visible.
func TestAgentCapsule(t *testing.T) {
	ctx := context.Background()
	const key = "sk-test-SENTINEL-7f3a"
	f := newAgentFixture(t, "anthropic-messages", agentCassette, "x-api-key")
	e, reg, srv := f.e, f.reg, f.srv

	tests := []struct {
		name, task, turns string
		wantStatus, want  string
		inferences        int
	}{
		{"tool call then answer", "please echo hi", "10", StateCompleted, "The echo said hi.", 2},
		{"undeclared tool is an error result, the loop goes on", "call a ghost", "10", StateCompleted, "No ghost.", 2},
		{"max_turns", "please echo hi", "1", StateMaxTurns, "error: the task used all 1 turns", 1},
		{"cassette miss reaches the user", "something unknown", "10", StateFailed, "cassette", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "tone.md"), []byte("be brief"), 0o644)
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "${EP}", api_key: "${TEST_KEY}"}}
  - {name: echo, version: 1.0.0}
  - {name: tone, runtime: skill, source: tone.md}
inference:
  driver: {artifact: anthropic-messages}
  model: claude-test
  max_turns: `+tt.turns+`
  system_prompt_artifact: tone
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
			env := map[string]string{"EP": srv.URL, "TEST_KEY": key}
			m, err := manifest.Load(mpath, manifest.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: tt.task, Session: SessionConfig{WorkRoot: t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.wantStatus || !strings.Contains(res.Result, tt.want) {
				t.Fatalf("result = %+v", res)
			}
			trace, _ := os.ReadFile(filepath.Join(res.Records, "trace.jsonl"))
			if n := strings.Count(string(trace), `"event_type":"inference"`); n != tt.inferences {
				t.Errorf("%d inference events, want %d", n, tt.inferences)
			}
			// The key reached the provider and nothing the session wrote holds it.
			filepath.WalkDir(res.Records, func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(key)) {
						t.Errorf("the key leaked into %s", p)
					}
				}
				return nil
			})
		})
	}
	keys := f.headers()
	for _, k := range keys {
		if k != key {
			t.Fatalf("provider saw key %q", k)
		}
	}
	if len(keys) == 0 {
		t.Fatal("the provider saw no request")
	}
}

const openAICassette = `{"provider": "openai-chat", "conversations": [
 {"match": "echo hi", "turns": [
   {"id": "c1", "object": "chat.completion", "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "tool_calls",
     "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"hi\"}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
   {"id": "c2", "object": "chat.completion", "model": "gpt-test", "choices": [{"index": 0, "finish_reason": "stop",
     "message": {"role": "assistant", "content": "The echo said hi."}}], "usage": {"prompt_tokens": 20, "completion_tokens": 6}}]}]}`

// TestAgentCapsuleOpenAI runs the same loop with the openai-chat driver and an
// OpenAI-format cassette; the key arrives as a bearer token.
func TestAgentCapsuleOpenAI(t *testing.T) {
	ctx := context.Background()
	f := newAgentFixture(t, "openai-chat", openAICassette, "Authorization")
	e, reg, srv := f.e, f.reg, f.srv
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: openai-chat, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+srv.URL+`", api_key: "sk-test-openai"}}
  - {name: echo, version: 1.0.0}
inference:
  driver: {artifact: openai-chat}
  model: gpt-test
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: "please echo hi", Session: SessionConfig{WorkRoot: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StateCompleted || res.Result != "The echo said hi." {
		t.Fatalf("result = %+v", res)
	}
	if auth := f.headers(); len(auth) != 2 || auth[0] != "Bearer sk-test-openai" {
		t.Fatalf("provider saw Authorization %v", auth)
	}
}

// agentFixture is an engine, a registry holding the driver and the echo tool, and a
// replay server for cassette whose requests' header named header are recorded.
type agentFixture struct {
	e   *Runtime
	reg *registry.Local
	srv *httptest.Server

	mu     sync.Mutex
	seen   []string
	bodies []string // each request's body, as the provider got it
}

func newAgentFixture(t *testing.T, driver, cassette, header string) *agentFixture {
	t.Helper()
	f := &agentFixture{}
	f.e, _ = newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	f.reg = registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, f.reg, driver, "driver", guestbuild.Wasm(t, "../examples/drivers/"+driver))
	publishWasm(t, f.reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	cassettes := t.TempDir()
	os.WriteFile(filepath.Join(cassettes, "c.json"), []byte(cassette), 0o644)
	lib, err := replay.Load(cassettes)
	if err != nil {
		t.Fatal(err)
	}
	h := lib.Handler()
	h.OnRequest = func(r *http.Request, body []byte) {
		f.mu.Lock()
		f.seen = append(f.seen, r.Header.Get(header))
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *agentFixture) headers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}
