package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/taskstore"
)

// pullRig is a script capsule (the puller guest) granted to install tools named echo*,
// declaring gatetool itself, with a trusted folder registry holding echo and echo-two
// and an untrusted one holding echo-three.
type pullRig struct {
	e       *Runtime
	metrics *prometheus.Registry
	trusted *registry.Local
	other   *registry.Local
	cache   *registry.Cache
	pins    *taskstore.MemPins
	m       *manifest.Manifest
	reg     *registry.Local // the operator's registry
}

func newPullRig(t *testing.T) *pullRig {
	t.Helper()
	e, metrics := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	r := &pullRig{e: e, metrics: metrics, trusted: registry.NewLocal(t.TempDir()), other: registry.NewLocal(t.TempDir()),
		reg: registry.NewLocal(t.TempDir()), pins: &taskstore.MemPins{}}
	echo := guestbuild.Wasm(t, "../internal/testkit/testguests/echo")
	publishWasm(t, r.trusted, "echo", "tool", echo)
	publishWasm(t, r.trusted, "echo-two", "tool", echo)
	publishWasm(t, r.trusted, "echo-hook", "hook", guestbuild.Wasm(t, "../internal/testkit/testguests/readerhook"))
	publishWasm(t, r.other, "echo-three", "tool", echo)
	publishWasm(t, r.reg, "gatetool", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/gatetool"))
	var err error
	if r.cache, err = registry.OpenCache(t.TempDir(), 0); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte("name: puller\nversion: 1.0.0\nartifacts:\n  - {name: gatetool, version: 1.0.0}\n"+
		"capabilities:\n  install: {tool: [\"echo*\", gatetool]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 120}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/puller"), 0o644)
	if r.m, err = manifest.Load(mpath); err != nil {
		t.Fatal(err)
	}
	return r
}

// host serves the capsule on a gateway whose trust policy is policy.
func (r *pullRig) host(t *testing.T, policy *PullPolicy) *Hosted {
	t.Helper()
	h, err := r.e.Serve(context.Background(), r.m, ServeOptions{Registry: r.reg, Pulls: policy, Pins: r.pins,
		Session: SessionConfig{WorkRoot: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func (r *pullRig) policy(pins map[string]string) *PullPolicy {
	return &PullPolicy{Sources: []PullSource{{Spec: r.trusted.Root, Registry: r.trusted}}, Pins: pins, Cache: r.cache}
}

// run runs the puller's commands as one task and returns its answer, line by line.
func run(t *testing.T, h *Hosted, ctxID string, sink Sink, cmds ...string) []string {
	t.Helper()
	out := h.RunTask(context.Background(), TaskRequest{ContextID: ctxID, Text: strings.Join(cmds, "\n"), Sink: sink})
	if out.State != StateCompleted {
		t.Fatalf("task %s: %+v", out.State, out)
	}
	return strings.Split(strings.TrimSpace(out.Result), "\n")
}

func wantLines(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("answer %d:\n got %s\nwant %s…", i+1, got[i], want[i])
		}
	}
}

// TestArtifactManagerPull: a script capsule pulls a tool and calls it in the same task;
// another session, and another gateway on the same pins, sees it; refusals are the
// strings the guest reads; every call is a trace event and counted.
func TestArtifactManagerPull(t *testing.T) {
	r := newPullRig(t)
	h := r.host(t, r.policy(nil))
	sink := &recordSink{}
	got := run(t, h, "ctx-a", sink,
		"pull echo 1.0.0",
		"invoke echo hello",
		"list",
		"describe echo",
		"diagnostics",
		"search echo",
		"pull other 1.0.0",      // outside capabilities.install
		"pull echo-three 1.0.0", // only in an untrusted registry
		"pull gatetool 1.0.0",   // the operator declared it
		"pull echo-hook 1.0.0",  // a hook, never pullable
		"remove gatetool",
		"remove echo-two",
	)
	wantLines(t, got,
		`ok: {"name":"echo","version":"1.0.0","runtime":"wasm"}`,
		`ok: {"status":"passed","summary":"echo","data":"hello"}`,
		`ok: [{"name":"gatetool","version":"1.0.0","runtime":"wasm"},{"name":"echo","version":"1.0.0","runtime":"wasm"}]`,
		`ok: {"name":"echo","version":"1.0.0"`,
		`ok: {"capsule-id":"puller@1.0.0","installed":[{"name":"echo","version":"1.0.0","runtime":"wasm"}]`,
		`ok: [{"name":"echo","version":"1.0.0","runtime":"wasm"},{"name":"echo-hook"`,
		`error: not-granted: 'other' matches no capabilities.install entry`,
		`error: pull: 'echo-three@1.0.0`,
		`error: not-granted: murmur.lock pins 'gatetool' with origin: operator`,
		`error: not-granted: 'echo-hook' is a 'hook' artifact`,
		`error: not-removable: murmur.lock pins 'gatetool' with origin: operator`,
		`ok: false`,
	)
	pins, _ := r.pins.RuntimePins(context.Background(), "puller")
	if len(pins) != 1 || pins[0].Name != "echo" || pins[0].Origin != taskstore.OriginRuntime || pins[0].Registry != r.trusted.Root || !r.cache.Has(pins[0].SHA256) {
		t.Fatalf("pins %+v", pins)
	}

	// The trace has one artifact_manager event per call, the pulled tool's call is
	// marked, and the counters agree.
	var ops []string
	var runtimeCall bool
	for _, e := range sink.events {
		switch d := e.Data.(type) {
		case ArtifactCall:
			ops = append(ops, d.Op+":"+d.Status)
		case ToolCall:
			runtimeCall = runtimeCall || (d.ToolName == "echo" && d.Origin == OriginRuntime)
		}
	}
	if strings.Join(ops, " ") != "pull:ok list:ok describe:ok diagnostics:ok search:ok pull:refused pull:refused pull:refused pull:refused remove:refused remove:ok" || !runtimeCall {
		t.Fatalf("events %v, runtime tool call recorded %v", ops, runtimeCall)
	}
	if n := counterValue(t, r.metrics, "capsule_artifact_pulls_total", map[string]string{"capsule": "puller", "result": "refused"}); n != 4 {
		t.Fatalf("refused pulls counted %v, want 4", n)
	}

	// Another context's session, and a gateway restarted on the same pins, call it
	// without pulling; a removal is seen by both.
	wantLines(t, run(t, h, "ctx-b", nil, "invoke echo again"), `ok: {"status":"passed","summary":"echo","data":"again"}`)
	h2 := r.host(t, r.policy(nil))
	wantLines(t, run(t, h2, "ctx-c", nil, "invoke echo third", "remove echo"), `ok: {"status":"passed","summary":"echo","data":"third"}`, `ok: true`)
	wantLines(t, run(t, h, "ctx-b", nil, "invoke echo gone"), `error: tool-registry: no wasm tool named "echo"`)
}

// TestArtifactManagerRefusesBadBytes: a registry serving bytes that differ from what it
// states, and a trust policy pinning a digest the registry does not serve: both pulls
// refused, nothing written, each traced and counted.
func TestArtifactManagerRefusesBadBytes(t *testing.T) {
	r := newPullRig(t)
	// The folder's .sha256 now states other bytes than its archive holds.
	side := filepath.Join(r.trusted.Root, "echo-two", "1.0.0", "echo-two-1.0.0.sha256")
	os.WriteFile(side, []byte(strings.Repeat("ab", 32)+"  echo-two-1.0.0.mur.zip\n"), 0o644)
	h := r.host(t, r.policy(map[string]string{"echo@1.0.0": strings.Repeat("cd", 32)}))
	sink := &recordSink{}
	got := run(t, h, "ctx", sink, "pull echo-two 1.0.0", "pull echo 1.0.0", "list")
	wantLines(t, got,
		`error: pull: 'echo-two@1.0.0`,
		`error: pull: 'echo@1.0.0`,
		`ok: [{"name":"gatetool","version":"1.0.0","runtime":"wasm"}]`)
	if !strings.Contains(got[0], "E-REG-033") || !strings.Contains(got[1], "E-REG-092") || !strings.Contains(got[1], strings.Repeat("cd", 32)) {
		t.Fatalf("refusals do not name their codes and digests:\n%s", strings.Join(got, "\n"))
	}
	if pins, _ := r.pins.RuntimePins(context.Background(), "puller"); len(pins) != 0 {
		t.Fatalf("pins written: %+v", pins)
	}
	if used, n, _ := r.cache.Usage(); n != 0 {
		t.Fatalf("the cache kept %d entries (%d bytes)", n, used)
	}
	var statuses []string
	for _, e := range sink.events {
		if d, ok := e.Data.(ArtifactCall); ok && d.Op == "pull" {
			statuses = append(statuses, d.Status)
		}
	}
	if strings.Join(statuses, " ") != "refused refused" {
		t.Fatalf("pull events %v", statuses)
	}
	if n := counterValue(t, r.metrics, "capsule_artifact_pulls_total", map[string]string{"capsule": "puller", "result": "refused"}); n != 2 {
		t.Fatalf("refused pulls counted %v, want 2", n)
	}
}

// TestArtifactManagerWithoutPolicy: a gateway whose operator trusts no registry refuses
// every pull, with the reason.
func TestArtifactManagerWithoutPolicy(t *testing.T) {
	r := newPullRig(t)
	h := r.host(t, nil)
	wantLines(t, run(t, h, "ctx", nil, "pull echo 1.0.0", "search echo"),
		`error: not-granted: the gateway's trust policy names no registry for runtime pulls, so pulling 'echo' is refused`,
		`error: not-granted: the gateway's trust policy names no registry to search`)
}

// counterValue reads one series of a counter from reg (0 when absent).
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
					continue next
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

const pullCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "get the echo tool", "turns": [
   {"id": "p1", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "artifact_pull", "input": {"name": "echo-remote", "version": "1.0.0"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "p2", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_2", "name": "echo-remote", "input": {"text": "hi"}}],
    "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "p3", "type": "message", "role": "assistant", "model": "claude-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Pulled and called."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]}]}`

// TestAgentPullsAndCalls: the model of an agent capsule pulls a tool with artifact_pull
// and calls it on its next turn; the request of that turn offers the tool marked as
// runtime-installed, and the next one carries its result marked the same way.
func TestAgentPullsAndCalls(t *testing.T) {
	f := newAgentFixture(t, "anthropic-messages", pullCassette, "x-api-key")
	trusted := registry.NewLocal(t.TempDir())
	publishWasm(t, trusted, "echo-remote", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	dir := t.TempDir()
	mpath := filepath.Join(dir, "murmur.yaml")
	os.WriteFile(mpath, []byte(`name: agent
version: 1.0.0
artifacts:
  - {name: anthropic-messages, version: 1.0.0, runtime: driver, gateway: {endpoint: "`+f.srv.URL+`", api_key: "k"}}
inference:
  driver: {artifact: anthropic-messages}
  model: claude-test
  max_turns: 5
capabilities:
  install: {tool: ["echo-*"]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
`), 0o644)
	m, err := manifest.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.e.RunOnce(context.Background(), m, RunOptions{Registry: f.reg, Task: "get the echo tool", Session: SessionConfig{WorkRoot: t.TempDir()},
		Pulls: &PullPolicy{Sources: []PullSource{{Spec: trusted.Root, Registry: trusted}}}})
	if err != nil || res.Status != StateCompleted || res.Result != "Pulled and called." {
		t.Fatalf("result %+v, %v", res, err)
	}
	f.mu.Lock()
	bodies := append([]string(nil), f.bodies...)
	f.mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("%d requests, want 3", len(bodies))
	}
	mark := "[runtime-installed artifact echo-remote@1.0.0"
	switch {
	case !strings.Contains(bodies[0], `"name":"artifact_pull"`) || strings.Contains(bodies[0], `"name":"echo-remote","description"`):
		t.Fatalf("first request's tools: %s", bodies[0])
	case !strings.Contains(bodies[1], `"name":"echo-remote","description":"`+mark):
		t.Fatalf("the turn after the pull does not offer the tool, marked: %s", bodies[1])
	case !strings.Contains(bodies[2], mark) || !strings.Contains(bodies[2], "hi"):
		t.Fatalf("the tool's result does not reach the model marked: %s", bodies[2])
	}
}
