package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/replay"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// The agent loop's failure paths, each through a whole RunOnce: the anthropic-messages
// driver guest, its requests through the host to a replay server on 127.0.0.1 that can be
// told to answer a request with a fault instead of the cassette. See
// docs/reference/driver-protocol.md "End of a task" and "Shipped drivers", and
// docs/reference/cassettes.md "Answers and misses".

const faultCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "echo hi", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "hi"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The echo said hi."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]},
 {"match": "call a ghost", "turns": [
   {"id": "g1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_9", "name": "ghost", "input": {}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "g2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "No ghost."}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`

// exchange is one request the provider received and what it answered.
type exchange struct {
	header http.Header
	body   []byte
	status int
	answer []byte
}

// fault answers request number n (from 1) itself when ok; else the cassettes answer.
type fault func(n int) (status int, body string, ok bool)

// provider is a replay server on 127.0.0.1 that records every exchange.
type provider struct {
	srv *httptest.Server

	mu        sync.Mutex
	fault     fault
	exchanges []exchange
}

func newProvider(tb testing.TB, cassettes ...string) *provider {
	tb.Helper()
	dir := tb.TempDir()
	for i, c := range cassettes {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("c%d.json", i)), []byte(c), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	lib, err := replay.Load(dir)
	if err != nil {
		tb.Fatal(err)
	}
	h := lib.Handler()
	p := &provider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		p.mu.Lock()
		n, f := len(p.exchanges)+1, p.fault
		p.mu.Unlock()
		rec := httptest.NewRecorder()
		faulted := false
		if f != nil {
			if status, answer, ok := f(n); ok {
				faulted = true
				rec.Header().Set("Content-Type", "application/json")
				rec.WriteHeader(status)
				rec.WriteString(answer)
			}
		}
		if !faulted {
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(rec, r)
		}
		p.mu.Lock()
		p.exchanges = append(p.exchanges, exchange{header: r.Header.Clone(), body: body, status: rec.Code, answer: rec.Body.Bytes()})
		p.mu.Unlock()
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	}))
	tb.Cleanup(p.srv.Close)
	return p
}

// reset forgets the exchanges and sets the fault for what comes next.
func (p *provider) reset(f fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.exchanges = f, nil
}

func (p *provider) seen() []exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]exchange(nil), p.exchanges...)
}

// always answers every request with status and body; first only the first request.
func always(status int, body string) fault {
	return func(int) (int, string, bool) { return status, body, true }
}

func first(status int, body string) fault {
	return func(n int) (int, string, bool) { return status, body, n == 1 }
}

// agentRig is an engine and a registry holding the named guests, published as role.
func agentRig(tb testing.TB, guests map[string][2]string) (*Runtime, *registry.Local) {
	tb.Helper()
	e, err := New(context.Background(), wasm.WithCacheDir(guestbuild.WazeroCache()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close(context.Background()) })
	reg := registry.NewLocal(filepath.Join(tb.TempDir(), "reg"))
	for name, g := range guests {
		role, pkg := g[0], g[1]
		art := fmt.Sprintf("name: %s\nversion: 1.0.0\nruntime: %s\ndescription: test %s %s\n", name, role, role, name)
		if real, err := os.ReadFile(filepath.Join(pkg, "artifact", "murmur.yaml")); err == nil {
			// An example driver keeps what its own manifest says of its provider (upstream_auth).
			art = regexp.MustCompile(`(?m)^version: .*$`).ReplaceAllString(string(real), "version: 1.0.0")
		}
		publishArtifact(tb, reg, name, []byte(art), guestbuild.Wasm(tb, pkg))
	}
	return e, reg
}

// agentManifest writes and loads an agent capsule whose driver reaches endpoint with the
// key ${TEST_KEY}, read through lookup.
func agentManifest(tb testing.TB, driver, endpoint, maxTurns, extra string, lookup func(string) (string, bool)) *manifest.Manifest {
	tb.Helper()
	mpath := filepath.Join(tb.TempDir(), "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: `+driver+`, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+endpoint+`", api_key: "${TEST_KEY}"}}
  - {name: echo, version: 1.0.0}
inference:
  driver: {artifact: `+driver+`}
  model: m-test
  max_turns: `+maxTurns+`
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`+extra), 0o644)
	m, err := manifest.Load(mpath, manifest.WithLookupEnv(lookup))
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// traceEvents reads a session's trace.jsonl.
func traceEvents(t *testing.T, records string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(records, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("trace line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func TestAgentFailurePaths(t *testing.T) {
	ctx := context.Background()
	e, reg := agentRig(t, map[string][2]string{
		"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"},
		"echo":               {"tool", "../internal/testkit/testguests/echo"},
	})
	p := newProvider(t, faultCassette)
	env := map[string]string{"TEST_KEY": "sk-test-failure-paths"}
	m := agentManifest(t, "anthropic-messages", p.srv.URL, "10", "", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	const err500 = `{"type":"error","error":{"type":"api_error","message":"upstream exploded"}}`
	const err429 = `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`

	tests := []struct {
		name, task string
		fault      fault
		wantStatus string
		wantResult []string // substrings of out/result.txt, in order
		requests   int      // reaching the provider
		waits      int      // backoff waits before a retry
		check      func(t *testing.T, result string, ex []exchange, waits []time.Duration)
	}{
		{name: "unparsable provider data fails the task quoting it", task: "please echo hi", fault: always(200, "this is not json {"),
			wantStatus: StateFailed, wantResult: []string{"error: driver anthropic-messages: ", "malformed response body", "this is not json {"}, requests: 1},
		{name: "provider 500 three times fails after the retries", task: "please echo hi", fault: always(500, err500),
			wantStatus: StateFailed, wantResult: []string{"error: ", "HTTP 500", "upstream exploded"}, requests: murmur.ProviderTries, waits: murmur.ProviderTries - 1,
			check: func(t *testing.T, _ string, _ []exchange, waits []time.Duration) {
				// 0.5 s doubling, ±50 % jitter (hosthttp.go backoff).
				for i, w := range waits {
					base := 500 * time.Millisecond << i
					if w < base/2 || w >= base/2+base {
						t.Errorf("wait %d = %v, want in [%v, %v)", i+1, w, base/2, base/2+base)
					}
				}
			}},
		{name: "one 429 then success completes", task: "please echo hi", fault: first(429, err429),
			wantStatus: StateCompleted, wantResult: []string{"The echo said hi."}, requests: 3, waits: 1,
			check: func(t *testing.T, _ string, ex []exchange, _ []time.Duration) {
				if ex[0].status != 429 || ex[1].status != 200 || !bytes.Equal(ex[0].body, ex[1].body) {
					t.Errorf("first turn: statuses %d, %d; the retry must resend the same body", ex[0].status, ex[1].status)
				}
			}},
		{name: "undeclared tool is an error result the model sees", task: "call a ghost",
			wantStatus: StateCompleted, wantResult: []string{"No ghost."}, requests: 2,
			check: func(t *testing.T, _ string, ex []exchange, _ []time.Duration) {
				var req struct {
					Messages []struct {
						Role    string
						Content []struct {
							Type      string
							ToolUseID string `json:"tool_use_id"`
							IsError   bool   `json:"is_error"`
							Content   []struct{ Text string }
						}
					}
				}
				if err := json.Unmarshal(ex[1].body, &req); err != nil || len(req.Messages) != 3 || len(req.Messages[2].Content) != 1 {
					t.Fatalf("second request (%v): %s", err, ex[1].body)
				}
				res := req.Messages[2].Content[0]
				if req.Messages[2].Role != "user" || res.Type != "tool_result" || res.ToolUseID != "tu_9" || !res.IsError ||
					len(res.Content) != 1 || !strings.Contains(res.Content[0].Text, `no tool named "ghost" is declared in the manifest (declared: echo)`) {
					t.Errorf("the tool error did not reach the model: %s", ex[1].body)
				}
			}},
		{name: "cassette miss reaches the user verbatim", task: "an unscripted question",
			wantStatus: StateFailed, wantResult: []string{"error: ", "HTTP 404"}, requests: 1,
			check: func(t *testing.T, result string, ex []exchange, _ []time.Duration) {
				var miss struct{ Error struct{ Message string } }
				if ex[0].status != 404 || json.Unmarshal(ex[0].answer, &miss) != nil || !strings.HasPrefix(miss.Error.Message, "cassette miss: ") {
					t.Fatalf("replay answered %d %s", ex[0].status, ex[0].answer)
				}
				if !strings.Contains(result, miss.Error.Message) {
					t.Errorf("result %q does not quote the replay server's message %q", result, miss.Error.Message)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.reset(tt.fault)
			var (
				mu    sync.Mutex
				waits []time.Duration
			)
			sleep := func(_ context.Context, d time.Duration) error {
				mu.Lock()
				waits = append(waits, d)
				mu.Unlock()
				return nil
			}
			res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: tt.task, Session: SessionConfig{WorkRoot: t.TempDir(), Sleep: sleep}})
			if err != nil {
				t.Fatal(err)
			}
			file, err := os.ReadFile(filepath.Join(res.Workdir, "out", "result.txt"))
			if err != nil {
				t.Fatal(err)
			}
			result := string(file)
			t.Logf("out/result.txt: %q", result)
			if res.Status != tt.wantStatus || result != res.Result+"\n" {
				t.Fatalf("status %s, result %q, out/result.txt %q", res.Status, res.Result, result)
			}
			if failed := tt.wantStatus != StateCompleted; failed != strings.HasPrefix(result, "error: ") {
				t.Fatalf("out/result.txt %q: a failed task, and only one, writes \"error: <message>\"", result)
			}
			rest := result
			for _, w := range tt.wantResult {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("out/result.txt %q lacks %q (in order)", result, w)
				}
				rest = rest[i+len(w):]
			}
			ex := p.seen()
			mu.Lock()
			defer mu.Unlock()
			if len(ex) != tt.requests || len(waits) != tt.waits {
				t.Fatalf("%d requests with %d backoff waits, want %d and %d", len(ex), len(waits), tt.requests, tt.waits)
			}
			var end map[string]any
			for _, ev := range traceEvents(t, res.Records) {
				if ev["event_type"] == EventTaskEnd {
					end = ev
				}
			}
			if end == nil || end["state"] != tt.wantStatus {
				t.Errorf("task_end = %v, want state %s", end, tt.wantStatus)
			}
			if tt.check != nil {
				tt.check(t, result, ex, waits)
			}
		})
	}
}
