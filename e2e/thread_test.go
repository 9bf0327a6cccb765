package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// TestThreadedAcrossRestart: through the real gateway, with its durable store, the second
// task of a threaded context — after a restart between the two — sends the driver the
// first task's tool call and tool result, in order, in the driver protocol's format; when
// the first task compacted, the second starts from its summary instead of the messages
// the summary replaced. The driver is recdriver (internal/testkit/testguests), which records each
// input it gets in its session's out/driver-inputs.jsonl.
func TestThreadedAcrossRestart(t *testing.T) {
	// Parallel: it waits on its own gateways more than it computes, and the package's
	// wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	const (
		task1User = `{"role":"user","content":[{"type":"text","text":"call echo hi"}]},`
		task1Rest = `{"role":"assistant","content":[{"type":"text","text":"Calling echo."},{"type":"tool_call","id":"call_hi","name":"echo","input":{"text":"hi"}}]},` +
			`{"role":"tool","content":[{"type":"text","text":"{\"text\":\"hi\"}"}],"tool_call_id":"call_hi"},` +
			`{"role":"assistant","content":[{"type":"text","text":"the tool said: {\"text\":\"hi\"}"}]},` +
			`{"role":"user","content":[{"type":"text","text":"and now?"}]}]`
		summary = `{"role":"user","content":[{"type":"text","text":"Summary of the conversation so far:\n\nyou said: Summarise the conversation below.\n\nuser: call echo hi\n"}]},`
	)
	tests := []struct {
		name        string
		config      string // the driver's
		more        string // more manifest lines after the inference block's (indented to join it)
		task1Inputs int    // driver calls of task 1
		want        string // task 2's messages
	}{
		{name: "whole conversation", config: "{}", task1Inputs: 2, want: `[` + task1User + task1Rest},
		{name: "compacted", config: "{tokens_per_message: 50}", more: "  compaction: {threshold: 0.5}\ncontext: {max_tokens: 100}\n", task1Inputs: 3, want: `[` + summary + task1Rest},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			testThreadedAcrossRestart(t, tc.config, tc.more, tc.task1Inputs, tc.want)
		})
	}
}

// testThreadedAcrossRestart runs task 1, kills and restarts the gateway, runs task 2 and
// checks task 2's one driver input is want.
func testThreadedAcrossRestart(t *testing.T, config, more string, task1Inputs int, want string) {
	dir := t.TempDir()
	home, reg := filepath.Join(dir, "home"), filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	for _, a := range []struct{ name, role, src string }{
		{"recdriver", "driver", "../internal/testkit/testguests/recdriver"},
		{"echo", "tool", "../internal/testkit/testguests/echo"},
	} {
		src := filepath.Join(t.TempDir(), a.name)
		os.MkdirAll(src, 0o755)
		os.WriteFile(filepath.Join(src, "murmur.yaml"), []byte("name: "+a.name+"\nversion: 1.0.0\nruntime: "+a.role+"\ndescription: "+a.name+"\n"), 0o644)
		publish(t, home, reg, src, a.name, guestbuild.Wasm(t, a.src))
	}
	capsuleDir := filepath.Join(dir, "threads")
	os.MkdirAll(capsuleDir, 0o755)
	os.WriteFile(filepath.Join(capsuleDir, "murmur.yaml"), []byte(`name: threads
version: 1.0.0
artifacts:
  - {name: recdriver, version: 1.0.0, runtime: driver}
  - {name: echo, version: 1.0.0}
inference:
  driver: {artifact: recdriver, config: `+config+`}
  model: m
  max_turns: 5
`+more+`capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 120}
lifecycle: {conversation: threaded}
`), 0o644)
	port, admin := freePort(t), freePort(t)
	work := filepath.Join(dir, "work")
	cf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(cf, []byte(`{
	admin 127.0.0.1:`+admin+`
	default_bind 127.0.0.1
	capsule {
		registry `+reg+`
		work_root `+work+`
		cache_dir `+gatewayCache()+`
		state_dir `+filepath.Join(dir, "state")+`
	}
}

http://127.0.0.1:`+port+` {
	handle /agents/threads/* {
		capsule `+filepath.Join(capsuleDir, "murmur.yaml")+`
	}
}
`), 0o644)
	g := &gateway{dir: dir, home: home, base: "http://127.0.0.1:" + port, logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	start := func() {
		g.cmd = exec.Command(caddyBin, "run", "--config", cf, "--adapter", "caddyfile")
		g.cmd.Dir = dir
		g.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
		g.logs = &syncBuffer{}
		waitServing(t, g.cmd, g.logs)
	}
	start()
	const ctxID = "ctx_threads"
	first := decodeTask(t, g.call(t, "/agents/threads/", "", "message/send", map[string]any{"message": msg03("call echo hi", "", ctxID)}))
	if first.Status.State != "completed" || first.text() != `the tool said: {"text":"hi"}` {
		t.Fatalf("task 1: %v", first)
	}

	g.cmd.Process.Kill() // SIGKILL: what the next process knows is what the store holds
	g.cmd.Wait()
	g.httpClient.CloseIdleConnections()
	start()
	second := decodeTask(t, g.call(t, "/agents/threads/", "", "message/send", map[string]any{"message": msg03("and now?", "", ctxID)}))
	if second.Status.State != "completed" || second.text() != "you said: and now?" {
		t.Fatalf("task 2: %v", second)
	}

	// Each process opened its own session of the context, both in the context's one
	// folder: the driver's inputs of task 1, then task 2's one input.
	var inputs [][]string
	filepath.WalkDir(work, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "driver-inputs.jsonl" {
			data, _ := os.ReadFile(p)
			var lines []string
			for sc := bufio.NewScanner(bytes.NewReader(data)); sc.Scan(); {
				lines = append(lines, sc.Text())
			}
			inputs = append(inputs, lines)
		}
		return nil
	})
	if len(inputs) != 1 || len(inputs[0]) != task1Inputs+1 {
		t.Fatalf("driver inputs in %d folders, want the context's one with %d lines: %v", len(inputs), task1Inputs+1, inputs)
	}
	task1, task2 := inputs[0][:task1Inputs], inputs[0][task1Inputs:]
	var in struct {
		Messages       json.RawMessage `json:"messages"`
		ContinuationID *string         `json:"continuation_id"`
	}
	if err := json.Unmarshal([]byte(task2[0]), &in); err != nil {
		t.Fatal(err)
	}
	if got := string(in.Messages); got != want || in.ContinuationID != nil {
		t.Errorf("task 2's driver input after the restart (continuation %v):\n%s\nwant\n%s", in.ContinuationID, got, want)
	}
	if !strings.Contains(task1[task1Inputs-1], `"role":"tool"`) {
		t.Errorf("task 1's last turn: %s", task1[task1Inputs-1])
	}
}
