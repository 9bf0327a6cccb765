package e2e

import (
	"bytes"
	"crypto/md5"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
)

// TestKillKeepsWorkdirs kills the gateway with SIGKILL while several contexts' agents are
// writing files with a shell tool, starts it again on the same folders, and checks that
// each context's workdir holds every file its completed tasks wrote — on disk, and as a
// shell tool in the context's next task sees it. A completed task is one whose answer the
// client got before the kill.
func TestKillKeepsWorkdirs(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	tmp := t.TempDir()
	home, reg := filepath.Join(tmp, "home"), filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))

	// The model: a "note" task copies task.md into notes/<md5 of it>.txt; a "list notes"
	// task prints every note. The commands run in the context's workdir.
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	turn := func(id, command string) string {
		return fmt.Sprintf(`{"id": %q, "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
  "content": [{"type": "tool_use", "id": "tu_%s", "name": "bash", "input": {"command": %q}}], "usage": {"input_tokens": 1, "output_tokens": 1}}`, id, id, command)
	}
	end := func(id, text string) string {
		return fmt.Sprintf(`{"id": %q, "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
  "content": [{"type": "text", "text": %q}], "usage": {"input_tokens": 1, "output_tokens": 1}}`, id, text)
	}
	cassette := `{"provider": "anthropic-messages", "conversations": [
 {"match": "list notes", "turns": [` + turn("l1", "cat notes/*.txt") + `,` + end("l2", "listed") + `]},
 {"match": "note ", "turns": [` + turn("n1", `mkdir -p notes && cp task.md "notes/$(md5sum < task.md | cut -c1-32).txt"`) + `,` + end("n2", "noted") + `]}]}`
	os.WriteFile(filepath.Join(cassettes, "notes.json"), []byte(cassette), 0o644)
	srv, requests := recordingProvider(t, cassettes)

	capDir := filepath.Join(tmp, "notes")
	os.MkdirAll(capDir, 0o755)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(`name: notes
version: 1.0.0
artifacts:
  - name: anthropic-messages
    version: 0.2.0
    runtime: driver
    gateway:
      endpoint: `+srv.URL+`
inference:
  driver:
    artifact: anthropic-messages
  model: m
  max_turns: 3
capabilities:
  shell:
    allow: [bash, mkdir, cp, md5sum, cut, cat]
  limits: {memory_bytes: 134217728, deadline_seconds: 120}
lifecycle: {task_acceptance: queue}
`), 0o644)
	port := freePort(t)
	workRoot := filepath.Join(tmp, "work")
	cf := filepath.Join(tmp, "Caddyfile")
	os.WriteFile(cf, []byte(fmt.Sprintf(`{
	admin off
	default_bind 127.0.0.1
	capsule {
		registry %s
		work_root %s
		cache_dir %s
	}
}
http://127.0.0.1:%s {
	handle /agents/notes/* {
		capsule %s
	}
}
`, reg, workRoot, gatewayCache(), port, filepath.Join(capDir, "murmur.yaml"))), 0o644)
	g := &gateway{dir: tmp, home: home, base: "http://127.0.0.1:" + port, logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 2 * time.Minute}}
	start := func() {
		g.cmd = exec.Command(caddyBin, "run", "--config", cf, "--adapter", "caddyfile")
		g.cmd.Dir, g.cmd.Env = tmp, []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(tmp, "data"), "XDG_CONFIG_HOME=" + filepath.Join(tmp, "config")}
		g.logs = &syncBuffer{}
		waitServing(t, g.cmd, g.logs)
	}
	start()

	// Load: each context's client sends its notes one after another, all contexts at once.
	const contexts, perContext = 6, 40
	var (
		mu        sync.Mutex
		completed = map[string][]string{} // context → the texts of its completed tasks
		killed    = make(chan struct{})
		enough    = make(chan struct{})
		once      sync.Once
		total     int
	)
	send := func(text, contextID string) (task03, error) {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": map[string]any{"message": msg03(text, "", contextID)}})
		resp, err := g.httpClient.Post(g.base+"/agents/notes/", "application/json", bytes.NewReader(body))
		if err != nil {
			return task03{}, err
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var r rpcReply
		if err := json.Unmarshal(data, &r); err != nil || r.Error != nil {
			return task03{}, fmt.Errorf("reply %d %s", resp.StatusCode, data)
		}
		var tk task03
		err = json.Unmarshal(r.Result, &tk)
		return tk, err
	}
	var wg sync.WaitGroup
	for c := range contexts {
		ctxID := fmt.Sprintf("ctx-%d-%d", c, time.Now().UnixNano())
		wg.Go(func() {
			for i := range perContext {
				text := fmt.Sprintf("note %s #%d", ctxID, i)
				tk, err := send(text, ctxID)
				select {
				case <-killed:
					return // an answer racing the kill is neither counted nor required
				default:
				}
				if err != nil || tk.Status.State != "completed" {
					t.Errorf("before the kill, %q: %v %v", text, tk, err)
					return
				}
				mu.Lock()
				completed[ctxID] = append(completed[ctxID], text)
				if total++; total == contexts*3 {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(5 * time.Minute):
		t.Fatalf("fewer than %d tasks completed in 5 minutes:\n%s", contexts*3, g.logs.String())
	}
	mu.Lock()
	close(killed) // answers after this point are not counted
	g.cmd.Process.Kill()
	snapshot := map[string][]string{}
	for k, v := range completed {
		snapshot[k] = append([]string(nil), v...)
	}
	mu.Unlock()
	g.cmd.Wait()
	wg.Wait()

	start()
	// On disk: every completed task's note, each context's notes in one folder of its own.
	folderOf := map[string]string{}
	for _, texts := range snapshot {
		for _, text := range texts {
			matches, _ := filepath.Glob(filepath.Join(workRoot, "notes", "*", "work", "notes", fmt.Sprintf("%x.txt", md5.Sum([]byte(text)))))
			if len(matches) != 1 {
				t.Errorf("note %q: %d files after the restart, want 1", text, len(matches))
				continue
			}
			if data, err := os.ReadFile(matches[0]); err != nil || string(data) != text {
				t.Errorf("note %q holds %q (%v)", text, data, err)
			}
			ctxID := strings.Fields(text)[1]
			if f, ok := folderOf[ctxID]; ok && f != filepath.Dir(matches[0]) {
				t.Errorf("context %s's notes are in %s and %s", ctxID, f, filepath.Dir(matches[0]))
			}
			folderOf[ctxID] = filepath.Dir(matches[0])
		}
	}
	// Through a shell tool: each context's next task lists its notes. (It queues behind a
	// task admitted before the kill and not yet started, which the restart runs.)
	for ctxID, texts := range snapshot {
		tk, err := send("list notes of "+ctxID, ctxID)
		if err != nil || tk.Status.State != "completed" {
			t.Fatalf("listing %s after the restart: %v %v", ctxID, tk, err)
		}
		var listed string
		for _, b := range requests() {
			if strings.Contains(b, "list notes of "+ctxID) && strings.Contains(b, "tool_result") {
				listed = b
			}
		}
		for _, text := range texts {
			if !strings.Contains(listed, text) {
				t.Errorf("context %s: the shell tool's listing lacks %q: %.600s", ctxID, text, listed)
			}
		}
		for other := range snapshot {
			if other != ctxID && strings.Contains(listed, other) {
				t.Errorf("context %s's listing shows context %s's notes", ctxID, other)
			}
		}
	}
	n := 0
	for _, v := range snapshot {
		n += len(v)
	}
	t.Logf("%d tasks completed over %d contexts before the kill", n, len(snapshot))
}
