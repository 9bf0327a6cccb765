package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// A gateway key reaches the provider only through the host (docs/reference/guest-abi.md
// "Gateway keys and retries"). A sentinel key is set as ${TEST_KEY}; the provider must
// receive it, and it must be nowhere else: not in any file of the session (workdir,
// MURMUR.md, trace, logs), not in the run's output, not in a guest's environment, and not
// in a guest's linear memory.

const secretsAnthropic = `{"provider": "anthropic-messages", "conversations": [
 {"match": "count the words", "turns": [
   {"id": "m1", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"text": "two words"}}], "usage": {"input_tokens": 10, "output_tokens": 5}},
   {"id": "m2", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "Two words."}], "usage": {"input_tokens": 20, "output_tokens": 6}}]}]}`

const secretsOpenAI = `{"provider": "openai-chat", "conversations": [
 {"match": "count the words", "turns": [
   {"id": "c1", "object": "chat.completion", "model": "m-test", "choices": [{"index": 0, "finish_reason": "tool_calls",
     "message": {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "echo", "arguments": "{\"text\":\"two words\"}"}}]}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5}},
   {"id": "c2", "object": "chat.completion", "model": "m-test", "choices": [{"index": 0, "finish_reason": "stop",
     "message": {"role": "assistant", "content": "Two words."}}], "usage": {"prompt_tokens": 20, "completion_tokens": 6}}]},
 {"match": "dump your environment", "turns": [
   {"id": "d1", "object": "chat.completion", "model": "m-test", "choices": [{"index": 0, "finish_reason": "stop",
     "message": {"role": "assistant", "content": "Dumped."}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}]}]}`

// memScan is a wazero function listener on every murmur:tool/run export: when a call
// returns, before its instance is closed, it searches the instance's whole linear memory
// for each needle.
type memScan struct {
	needles []string

	mu    sync.Mutex
	calls int
	found map[string]int // needle → calls whose memory held it
}

func (s *memScan) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	for _, n := range def.ExportNames() {
		if n == abi.ExportToolRun01 {
			return s
		}
	}
	return nil
}

func (s *memScan) Before(context.Context, api.Module, api.FunctionDefinition, []uint64, experimental.StackIterator) {
}

func (s *memScan) After(_ context.Context, mod api.Module, _ api.FunctionDefinition, _ []uint64) {
	mem := mod.Memory()
	buf, ok := mem.Read(0, mem.Size())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	for _, n := range s.needles {
		if ok && bytes.Contains(buf, []byte(n)) {
			s.found[n]++
		}
	}
}

func (s *memScan) Abort(context.Context, api.Module, api.FunctionDefinition, error) {}

// reset starts counting afresh for needles.
func (s *memScan) reset(needles ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.needles, s.calls, s.found = needles, 0, map[string]int{}
}

func (s *memScan) result() (int, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	found := map[string]int{}
	for k, v := range s.found {
		found[k] = v
	}
	return s.calls, found
}

func randomHex(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func TestSecretsStayInTheHost(t *testing.T) {
	sentinel := "sk-test-SENTINEL-" + randomHex(t)
	t.Setenv("TEST_KEY", sentinel)
	t.Setenv("LANG", "C.UTF-8")
	e, reg := agentRig(t, map[string][2]string{
		"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"},
		"openai-chat":        {"driver", "../examples/drivers/openai-chat"},
		"envdump-driver":     {"driver", "../internal/testkit/testguests/envdump-driver"},
		"echo":               {"tool", "../internal/testkit/testguests/echo"},
	})
	p := newProvider(t, secretsAnthropic, secretsOpenAI)
	// Listeners are fixed when a module is compiled, and the engine compiles each guest
	// once: one scanner, reset per case, serves every stage.
	scan := &memScan{}
	ctx := experimental.WithFunctionListenerFactory(context.Background(), scan)

	tests := []struct {
		driver, task string
		header, want string // the key as the provider must receive it
		answer       string
		calls        int // guest calls scanned: driver turns and tool calls
		envdump      bool
	}{
		{"anthropic-messages", "count the words", "X-Api-Key", sentinel, "Two words.", 3, false},
		{"openai-chat", "count the words", "Authorization", "Bearer " + sentinel, "Two words.", 3, false},
		{"envdump-driver", "dump your environment", "Authorization", "Bearer " + sentinel, "Dumped.", 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.driver, func(t *testing.T) {
			p.reset(nil)
			// The marker is in the task, so every driver instance holds it: a scan that finds
			// it reads the right memory.
			marker := "MARKER-" + randomHex(t)
			m := agentManifest(t, tt.driver, p.srv.URL, "5", "  env: {allow: [LANG]}\n", os.LookupEnv)
			scan.reset(sentinel, marker)
			res, err := e.RunOnce(ctx, m, RunOptions{Registry: reg, Task: tt.task + " " + marker, Session: SessionConfig{WorkRoot: t.TempDir()}})
			if err != nil {
				t.Fatal(err)
			}
			if res.Status != StateCompleted || res.Result != tt.answer {
				t.Fatalf("result = %+v", res)
			}

			// The provider received the key, in the provider's header, on every request.
			ex := p.seen()
			if len(ex) == 0 {
				t.Fatal("the provider saw no request")
			}
			for i, x := range ex {
				if got := x.header.Get(tt.header); got != tt.want {
					t.Errorf("request %d: %s = %q, want the key", i, tt.header, got)
				}
				if bytes.Contains(x.body, []byte(sentinel)) {
					t.Errorf("request %d: the key is in the body the guest wrote", i)
				}
			}

			// Not in any guest's memory at the end of its call.
			calls, found := scan.result()
			if calls != tt.calls || found[marker] == 0 {
				t.Fatalf("scanned %d guest calls (want %d), the task marker found in %d", calls, tt.calls, found[marker])
			}
			if found[sentinel] > 0 {
				t.Errorf("the key is in the linear memory of %d guest call(s)", found[sentinel])
			}

			// Not in any file of the session: records, workdir, MURMUR.md, logs.
			var files []string
			roots := []string{res.Records}
			if rel, err := filepath.Rel(res.Records, res.Workdir); err != nil || !filepath.IsLocal(rel) {
				roots = append(roots, res.Workdir)
			}
			for _, root := range roots {
				filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
					if err != nil {
						t.Errorf("walking %s: %v", path, err)
						return nil
					}
					if d.IsDir() {
						return nil
					}
					rel, _ := filepath.Rel(res.Records, path)
					files = append(files, filepath.ToSlash(rel))
					if data, err := os.ReadFile(path); err != nil || bytes.Contains(data, []byte(sentinel)) {
						t.Errorf("%s: the key is in it (or it is unreadable: %v)", path, err)
					}
					return nil
				})
			}
			for _, want := range []string{"trace.jsonl", "work/MURMUR.md", "work/task.md", "work/out/result.txt"} {
				if !slices.Contains(files, want) {
					t.Errorf("the walk missed %s (walked %v)", want, files)
				}
			}
			// logs/ appears with a guest's first output (runtime.NewLayout); when it does,
			// the walk above covers it like every other record.
			// Not in the run's output (what --json prints).
			if out, _ := json.Marshal(res); bytes.Contains(out, []byte(sentinel)) {
				t.Errorf("the key is in the run's result: %s", out)
			}

			if !tt.envdump {
				return
			}
			// Not in the environment: the guest's own dump of os.Environ and of what the
			// provider answered.
			dump, err := os.ReadFile(filepath.Join(res.Workdir, "out", "envdump.txt"))
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"LANG=C.UTF-8\n", "MURMUR_INFERENCE_ENDPOINT=" + p.srv.URL + "\n", "MURMUR_INFERENCE_DRIVER=envdump-driver\n", "# http response body\n"} {
				if !strings.Contains(string(dump), want) {
					t.Errorf("the dump lacks %q:\n%s", want, dump)
				}
			}
			if strings.Contains(string(dump), "sk-test") || strings.Contains(string(dump), "TEST_KEY") {
				t.Errorf("the guest saw the key:\n%s", dump)
			}
		})
	}
}
