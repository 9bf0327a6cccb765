package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// TestRunOnceScriptCapsule runs the test script capsule end to end: stage from a
// registry, a session workdir, the script invoking the echo wasm tool, the result file.
func TestRunOnceScriptCapsule(t *testing.T) {
	ctx := context.Background()
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	script := guestbuild.Wasm(t, "../internal/testkit/testguests/script")

	tests := []struct {
		name       string
		tool       string // TESTGUEST_TOOL on the host
		wantStatus string
		wantResult string
		wantEvents []string
	}{
		{"completes", "", StateCompleted, "hello",
			[]string{EventSessionStart, EventTaskStart, EventToolCall, EventTaskEnd, EventReceipt, EventSessionEnd}},
		{"undeclared tool fails the task", "nope", StateFailed, `no wasm tool named "nope" is declared`,
			[]string{EventSessionStart, EventTaskStart, EventToolCall, EventTaskEnd, EventReceipt, EventSessionEnd}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte("name: scripted\nversion: 1.0.0\nartifacts:\n  - {name: echo, version: 1.0.0}\ncapabilities:\n  env: {allow: [TESTGUEST_TOOL]}\n  limits: {memory_bytes: 134217728, deadline_seconds: 60}\n"), 0o644)
			os.WriteFile(filepath.Join(dir, "capsule.wasm"), script, 0o644)
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			workRoot := t.TempDir()
			lookup := func(k string) (string, bool) {
				if k == "TESTGUEST_TOOL" && tt.tool != "" {
					return tt.tool, true
				}
				return "", false
			}
			res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: "say hello", Session: SessionConfig{WorkRoot: workRoot, LookupEnv: lookup}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != tt.wantStatus || !strings.Contains(res.Result, tt.wantResult) {
				t.Fatalf("result = %+v", res)
			}
			if !strings.HasPrefix(res.SessionID, "ses_") || res.Records != filepath.Join(workRoot, "scripted", res.SessionID) {
				t.Errorf("session = %+v", res)
			}
			onDisk, _ := os.ReadFile(filepath.Join(res.Workdir, "out", "result.txt"))
			if !strings.Contains(string(onDisk), tt.wantResult) {
				t.Errorf("out/result.txt = %q", onDisk)
			}
			if task, _ := os.ReadFile(filepath.Join(res.Workdir, "task.md")); string(task) != "say hello" {
				t.Errorf("task.md = %q", task)
			}
			checkTrace(t, filepath.Join(res.Records, "trace.jsonl"), tt.wantEvents, tt.wantStatus)
		})
	}
}

// checkTrace asserts the trace holds exactly the wanted events, in order, with the common
// fields, valid parent links (session → task → tool call) and no content under capture meta.
func checkTrace(t *testing.T, path string, want []string, state string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("trace has %d events, want %v:\n%s", len(lines), want, data)
	}
	ids := map[string]string{} // event id → type
	var session string
	for i, line := range lines {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		typ, _ := ev["event_type"].(string)
		id, _ := ev["event_id"].(string)
		if typ != want[i] || !strings.HasPrefix(id, "evt_") || ev["timestamp"] == nil {
			t.Fatalf("event %d = %v, want type %s", i, ev, want[i])
		}
		if session == "" {
			session, _ = ev["session_id"].(string)
		}
		if ev["session_id"] != session || !strings.HasPrefix(session, "ses_") {
			t.Errorf("event %d session_id = %v", i, ev["session_id"])
		}
		parent, _ := ev["parent_id"].(string)
		wantParent := map[string]string{EventSessionStart: "", EventTaskStart: EventSessionStart, EventToolCall: EventTaskStart,
			EventTaskEnd: EventTaskStart, EventReceipt: EventTaskEnd, EventSessionEnd: EventSessionStart}[typ]
		if ids[parent] != wantParent || (typ == EventSessionStart) != (ev["parent_id"] == nil) {
			t.Errorf("event %s has parent %q (%s), want a %q", typ, parent, ids[parent], wantParent)
		}
		if _, ok := ev["input"]; ok {
			t.Errorf("capture meta kept content: %v", ev)
		}
		if typ == EventTaskEnd && ev["state"] != state {
			t.Errorf("task_end state = %v, want %s", ev["state"], state)
		}
		ids[id] = typ
	}
}

// TestRefusedSessionLeavesNothing: a session refused after its folders were made (here its
// filesystem.scope cannot be created in the user's --workdir) removes its records, and
// keeps the user's folder.
func TestRefusedSessionLeavesNothing(t *testing.T) {
	ctx := context.Background()
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "echo", "tool", guestbuild.Wasm(t, "../internal/testkit/testguests/echo"))
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte("name: refused\nversion: 1.0.0\nartifacts:\n  - {name: echo, version: 1.0.0}\ncapabilities:\n  filesystem: {scope: data}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, "../internal/testkit/testguests/script"), 0o644)
	m, err := manifest.Load(filepath.Join(dir, "murmur.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	workdir := t.TempDir()
	os.WriteFile(filepath.Join(workdir, "data"), []byte("a file where the scope folder should be"), 0o644)
	workRoot := t.TempDir()
	if _, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Workdir: workdir, Task: "x", Session: SessionConfig{WorkRoot: workRoot}}); err == nil {
		t.Fatal("the session was not refused")
	}
	if left, _ := os.ReadDir(filepath.Join(workRoot, "refused")); len(left) != 0 {
		t.Errorf("records left behind: %v", left)
	}
	if _, err := os.Stat(filepath.Join(workdir, "data")); err != nil {
		t.Errorf("the user's workdir lost its file: %v", err)
	}
}
