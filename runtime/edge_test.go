package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// memBudget is a principal's budget kept in memory, as the A2A layer's ledger is.
type memBudget struct {
	mu            sync.Mutex
	spent, budget int64
	calls         []int64
}

func (b *memBudget) Spend(_ context.Context, n int64) (int64, int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent += n
	b.calls = append(b.calls, n)
	return b.spent, b.budget, nil
}

// edgeCassette: a two-turn task with known usage (15 and 26 tokens), and one whose tool
// fetches the URL the test serves.
func edgeCassette(fetch string) string {
	return `{"provider": "anthropic-messages", "conversations": [
 {"match": "echo hi", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "hi"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The echo said hi."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]},
 {"match": "fetch it", "turns": [
   {"id": "f1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_2", "name": "hostile-net", "input": {"url": "` + fetch + `"}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
   {"id": "f2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Fetched."}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`
}

// edgeCapsule serves an agent capsule with the echo and hostile-net (fetch a URL) tools,
// granted allow.
func edgeCapsule(t *testing.T, f *agentFixture, allow string) *Hosted {
	t.Helper()
	publishWasm(t, f.reg, "hostile-net", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/hostile-net"))
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: edge
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+f.srv.URL+`", api_key: "k"}}
  - {name: echo, version: 1.0.0}
  - {name: hostile-net, version: 1.0.0}
inference:
  driver: {artifact: anthropic-messages}
  model: claude-test
  max_turns: 5
capabilities:
  network: {allow: ["`+allow+`"]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	h, err := f.e.Serve(context.Background(), m, ServeOptions{Registry: f.reg, Session: SessionConfig{WorkRoot: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestBudgetSink: a principal's tasks report every turn's tokens, as the cassette gives
// them, to its budget; once the budget is spent, a task that needs another model turn
// ends failed with the budget's message instead of calling the model again.
func TestBudgetSink(t *testing.T) {
	f := newAgentFixture(t, "anthropic-messages", edgeCassette("http://unused.invalid/"), "x-api-key")
	h := edgeCapsule(t, f, "api.example.com")
	b := &memBudget{budget: 50}
	first := h.RunTask(context.Background(), TaskRequest{Principal: "alice", Text: "echo hi", Budget: b})
	if first.State != StateCompleted || fmt.Sprint(b.calls) != "[15 26]" {
		t.Fatalf("first task: %s %q, spent %v; want completed, [15 26]", first.State, first.Result, b.calls)
	}
	requests := len(f.headers())
	second := h.RunTask(context.Background(), TaskRequest{Principal: "alice", Text: "echo hi", Budget: b})
	if second.State != StateFailed || !strings.Contains(second.Result, CodeBudget) || !strings.Contains(second.Result, "56 of 50") {
		t.Errorf("second task: %s %q; want failed with %s and the count", second.State, second.Result, CodeBudget)
	}
	if got := len(f.headers()) - requests; got != 1 {
		t.Errorf("the second task called the model %d times, want 1 (it stops before another turn)", got)
	}
	// Another principal's budget is its own.
	other := &memBudget{budget: 50}
	if out := h.RunTask(context.Background(), TaskRequest{Principal: "bob", Text: "echo hi", Budget: other}); out.State != StateCompleted {
		t.Errorf("bob's task: %s %q", out.State, out.Result)
	}
}

// TestEgressNarrowing: the same capsule, granted a loopback host, run for two principals
// whose caller's policy narrowed their reach differently: one reaches the host, the
// other is refused by the policy dialer (E-NET-027) and the host sees nothing from it.
func TestEgressNarrowing(t *testing.T) {
	var hits atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "secret-payload")
	}))
	t.Cleanup(target.Close)
	f := newAgentFixture(t, "anthropic-messages", edgeCassette(target.URL+"/x"), "x-api-key")
	h := edgeCapsule(t, f, target.URL)
	allowed, err := netpolicy.ParseRules([]string{target.URL})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		principal string
		egress    netpolicy.Rules
		narrowed  bool
		reach     bool
	}{
		{"alice", allowed, true, true},
		{"bob", netpolicy.Rules{}, true, false},
		{"carol", nil, false, true}, // not narrowed: the capsule's own grant
	} {
		t.Run(tc.principal, func(t *testing.T) {
			before := hits.Load()
			out := h.RunTask(context.Background(), TaskRequest{Principal: tc.principal, Text: "fetch it", Egress: tc.egress, Narrowed: tc.narrowed})
			if out.State != StateCompleted {
				t.Fatalf("task: %s %q", out.State, out.Result)
			}
			if got := hits.Load() - before; (got == 1) != tc.reach {
				t.Errorf("the host saw %d requests; reachable %v", got, tc.reach)
			}
			if !tc.reach && !strings.Contains(f.lastBody(), netpolicy.CodeNarrowed) {
				t.Errorf("the model was not told the narrowing refused the fetch: %s", f.lastBody())
			}
			if tc.reach && !strings.Contains(f.lastBody(), "secret-payload") {
				t.Errorf("the tool's answer did not reach the model: %s", f.lastBody())
			}
		})
	}
}

// lastBody is the last request the provider got.
func (f *agentFixture) lastBody() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bodies) == 0 {
		return ""
	}
	return f.bodies[len(f.bodies)-1]
}
