package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/replay"
)

// publishUpstream packs and publishes one of upstream's wasm fixtures as an artifact named
// name (its murmur.yaml is manifest, the wasm goes in as name.wasm) into reg.
func publishUpstream(t *testing.T, home, reg, name, manifest, fixture string) {
	t.Helper()
	art := filepath.Join(t.TempDir(), name)
	os.MkdirAll(art, 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(art, name+".wasm"), upstreamFixture(t, fixture), 0o644)
	zip := filepath.Join(t.TempDir(), name+".mur.zip")
	for _, args := range [][]string{{"pack", art, "--output", zip}, {"publish", zip, "--registry", reg}} {
		if r := capsule(t, home, args...); r.code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.code, r.stderr)
		}
	}
}

// TestUpstreamDrivers runs upstream Murmur's own inference drivers (the Anthropic and
// OpenAI driver components its tests use) as an agent capsule's driver through `caddy
// capsule run`, against the replay provider in this process: the model calls upstream's
// echo-tool component, the driver carries the tool's result back in its provider's
// format, and the run completes with the cassette's answer. The key reaches the provider
// through the host (upstream_auth), never through the driver's environment.
func TestUpstreamDrivers(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	reg := filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publishUpstream(t, home, reg, "echo-tool", "name: echo-tool\nversion: 0.1.0\nruntime: tool\nimplementation: wasm\ndescription: echoes its input\n",
		"run/components/echo-tool.wasm")

	const answer = "The tool echoed ping."
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "anthropic.json"), []byte(`{"provider": "anthropic-messages", "conversations": [{"match": "echo ping", "turns": [
  {"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model", "stop_reason": "tool_use",
   "content": [{"type": "text", "text": "Calling the tool."}, {"type": "tool_use", "id": "toolu_1", "name": "echo-tool", "input": {"text": "ping"}}],
   "usage": {"input_tokens": 10, "output_tokens": 5}},
  {"id": "msg_2", "type": "message", "role": "assistant", "model": "test-model", "stop_reason": "end_turn",
   "content": [{"type": "text", "text": "`+answer+`"}], "usage": {"input_tokens": 20, "output_tokens": 6}}]}]}`), 0o644)
	os.WriteFile(filepath.Join(cassettes, "openai.json"), []byte(`{"provider": "openai-chat", "conversations": [{"match": "echo ping", "turns": [
  {"id": "chatcmpl-1", "object": "chat.completion", "model": "test-model", "choices": [{"index": 0, "finish_reason": "tool_calls",
   "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo-tool", "arguments": "{\"text\":\"ping\"}"}}]}}],
   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}},
  {"id": "chatcmpl-2", "object": "chat.completion", "model": "test-model", "choices": [{"index": 0, "finish_reason": "stop",
   "message": {"role": "assistant", "content": "`+answer+`"}}],
   "usage": {"prompt_tokens": 20, "completion_tokens": 6, "total_tokens": 26}}]}]}`), 0o644)
	lib, err := replay.Load(cassettes)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		path, key string
		body      []byte
	}
	var (
		mu    sync.Mutex
		calls []seen
	)
	h := lib.Handler()
	h.OnRequest = func(r *http.Request, body []byte) {
		mu.Lock()
		calls = append(calls, seen{r.URL.Path, r.Header.Get("x-api-key") + r.Header.Get("Authorization"), body})
		mu.Unlock()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	for _, tt := range []struct {
		name, fixture, auth, endpoint, wantKey, toolResult string
	}{
		// Upstream's Anthropic driver posts {endpoint}/v1/messages and sends the tool's
		// result as a tool_result block.
		{name: "murmur-driver-anthropic", fixture: "drivers/anthropic/driver/murmur-driver-anthropic.wasm",
			auth: "upstream_auth:\n  header: x-api-key\n  value: \"{key}\"\n", endpoint: srv.URL, wantKey: "test-key",
			toolResult: `"tool_result"`},
		// Its OpenAI driver posts {endpoint}/chat/completions: the endpoint names the /v1
		// base, as OpenAI's own base URL does.
		{name: "murmur-driver-openai", fixture: "drivers/openai/driver/murmur-driver-openai.wasm",
			auth: "upstream_auth:\n  header: Authorization\n  value: \"Bearer {key}\"\n", endpoint: srv.URL + "/v1", wantKey: "Bearer test-key",
			toolResult: `"role":"tool"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			publishUpstream(t, home, reg, tt.name, "name: "+tt.name+"\nversion: 0.1.4\nruntime: driver\nimplementation: wasm\ndescription: upstream Murmur's driver\n"+tt.auth, tt.fixture)
			dir := filepath.Join(tmp, tt.name)
			os.MkdirAll(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: up-agent\nversion: 0.0.1\nartifacts:\n  - name: "+tt.name+
				"\n    version: 0.1.4\n    runtime: driver\n    gateway:\n      endpoint: "+tt.endpoint+"\n      api_key: ${TEST_KEY}\n"+
				"  - name: echo-tool\n    version: 0.1.0\ninference:\n  driver:\n    artifact: "+tt.name+"\n  model: test-model\n  max_turns: 3\n"), 0o644)
			mu.Lock()
			calls = nil
			mu.Unlock()
			r := capsuleEnv(t, home, []string{"TEST_KEY=test-key"}, "run", filepath.Join(dir, "murmur.yaml"), "--registry", reg,
				"--work-root", filepath.Join(tmp, "work"), "--task", "Please echo ping with the tool.", "--json")
			var out struct{ Status, Result string }
			if err := json.Unmarshal([]byte(r.stdout), &out); r.code != 0 || err != nil || out.Status != "completed" || out.Result != answer {
				t.Fatalf("exit %d (%v)\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(calls) != 2 {
				t.Fatalf("the provider saw %d requests, want 2", len(calls))
			}
			for _, c := range calls {
				if c.key != tt.wantKey {
					t.Errorf("%s: key %q, want %q", c.path, c.key, tt.wantKey)
				}
			}
			if !strings.Contains(string(calls[1].body), tt.toolResult) || !strings.Contains(string(calls[1].body), "ping") {
				t.Errorf("the second request lacks the tool's result: %s", calls[1].body)
			}
			t.Logf("%s: %s %q; second request: %s", tt.name, out.Status, out.Result, calls[1].body)
		})
	}
}
