package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
)

// TestUpstreamGateway serves upstream Murmur's driver and tool components from one
// gateway (`caddy run`) and drives it as an A2A client, next to hostile components:
//
//   - streaming-driver, an agent capsule's driver: its three emit-chunk calls reach a
//     message/stream client as working status updates, in order, before the answer
//     (upstream's streaming.rs streaming_text_chunks_received);
//   - request-input-tool, called by the model through upstream's Anthropic driver: the
//     task turns input-required with the tool's prompt, the client answers in the same
//     task, the tool hands the answer back to the model and the task completes
//     (upstream's input_required.rs);
//   - components that forge a handle or flood the resource table fail their task with
//     a classified trap, counted in capsule_guest_traps_total, while the others keep
//     answering; one importing an interface the host does not serve (wasi:sockets) is
//     refused with E-COMP-010 — at start the gateway does not start, on a reload the
//     reload is refused and the running configuration keeps serving.
func TestUpstreamGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	reg := filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	publishUpstream(t, home, reg, "streaming-driver", "name: streaming-driver\nversion: 0.1.0\nruntime: driver\nimplementation: wasm\ndescription: upstream's streaming test driver\n",
		"streaming-driver/tool/streaming-driver.wasm")
	publishUpstream(t, home, reg, "murmur-driver-anthropic", "name: murmur-driver-anthropic\nversion: 0.1.4\nruntime: driver\nimplementation: wasm\ndescription: upstream Murmur's Anthropic driver\n",
		"drivers/anthropic/driver/murmur-driver-anthropic.wasm")
	publishUpstream(t, home, reg, "request-input-tool", "name: request-input-tool\nversion: 0.1.0\nruntime: tool\nimplementation: wasm\ndescription: asks the user\n",
		"input-required/tool/request-input-tool.wasm")

	// The model, as upstream's input_required.rs scripts it: call the tool, then end.
	const prompt, reply, final = "What branch should I use?", "use main branch", "Working on the branch you chose."
	cassettes := filepath.Join(dir, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "input.json"), []byte(`{"provider": "anthropic-messages", "conversations": [{"match": "start the task", "turns": [
  {"id": "msg_1", "type": "message", "role": "assistant", "model": "test-model", "stop_reason": "tool_use",
   "content": [{"type": "tool_use", "id": "call_1", "name": "request-input-tool", "input": {"data": "`+prompt+`"}}],
   "usage": {"input_tokens": 1, "output_tokens": 1}},
  {"id": "msg_2", "type": "message", "role": "assistant", "model": "test-model", "stop_reason": "end_turn",
   "content": [{"type": "text", "text": "`+final+`"}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`), 0o644)
	provider, requests := recordingProvider(t, cassettes)

	write := func(name, yaml string, wasm []byte) {
		os.MkdirAll(filepath.Join(dir, name), 0o755)
		os.WriteFile(filepath.Join(dir, name, "murmur.yaml"), []byte(yaml), 0o644)
		if wasm != nil {
			os.WriteFile(filepath.Join(dir, name, "capsule.wasm"), wasm, 0o644)
		}
	}
	write("stream", "name: stream\nversion: 0.0.1\nartifacts:\n  - {name: streaming-driver, version: 0.1.0, runtime: driver}\n"+
		"inference:\n  driver: {artifact: streaming-driver}\n  model: test-model\n  max_turns: 2\n", nil)
	write("input", "name: input\nversion: 0.0.1\nartifacts:\n  - name: murmur-driver-anthropic\n    version: 0.1.4\n    runtime: driver\n"+
		"    gateway: {endpoint: "+provider.URL+"}\n  - {name: request-input-tool, version: 0.1.0}\n"+
		"inference:\n  driver: {artifact: murmur-driver-anthropic}\n  model: test-model\n  max_turns: 3\n", nil)
	for _, name := range []string{"forged", "flood", "unserved"} {
		write(name, "name: "+name+"\nversion: 0.0.1\n", watbuild.Wasm(t, filepath.Join("testdata", "hostile", name+".wat")))
	}

	port, admin := freePort(t), freePort(t)
	caddyfile := func(capsules ...string) string {
		var sites strings.Builder
		for _, c := range capsules {
			fmt.Fprintf(&sites, "\thandle /agents/%s/* {\n\t\tcapsule %s/murmur.yaml\n\t}\n", c, c)
		}
		cf := fmt.Sprintf("{\n\tadmin 127.0.0.1:%s\n\tdefault_bind 127.0.0.1\n\tcapsule {\n\t\tregistry %s\n\t\twork_root work\n\t\tcache_dir cache\n\t}\n}\n\n"+
			"http://127.0.0.1:%s {\n%s\thandle /metrics {\n\t\tmetrics\n\t}\n}\n", admin, reg, port, sites.String())
		cf = strings.Replace(cf, "cache_dir cache", "cache_dir "+gatewayCache(), 1)
		path := filepath.Join(dir, "Caddyfile")
		os.WriteFile(path, []byte(cf), 0o644)
		return path
	}
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}

	// A capsule the host cannot serve refuses the configuration at start: Caddy exits,
	// naming the import and the code, rather than serving without that capsule.
	cmd := exec.Command(caddyBin, "run", "--config", caddyfile("stream", "unserved"), "--adapter", "caddyfile")
	cmd.Dir, cmd.Env = dir, env
	out, err := cmd.CombinedOutput()
	if err == nil || !bytes.Contains(out, []byte("E-COMP-010")) || !bytes.Contains(out, []byte("wasi:sockets")) {
		t.Fatalf("caddy run with the unserved capsule: %v\n%s", err, out)
	}

	g := &gateway{dir: dir, home: home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	g.caddyfile = caddyfile("stream", "input", "forged", "flood")
	g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir, g.cmd.Env = dir, env
	waitServing(t, g.cmd, g.logs)

	streamChunks := func(t *testing.T) {
		t.Helper()
		var events []string
		var ans answerStream
		final := ""
		for ev := range g.stream(t, "/agents/stream/", "", "message/stream", map[string]any{"message": msg03("stream please")}) {
			var r struct {
				Result struct {
					Kind              string
					Final             bool
					Status            struct{ State string }
					Artifact          struct{ Parts []struct{ Text string } }
					Append, LastChunk bool
				}
			}
			json.Unmarshal(ev.data, &r)
			events = append(events, r.Result.Kind+":"+r.Result.Status.State)
			// Each chunk is an append to the answer artifact (docs/reference/a2a.md "Streams").
			if r.Result.Kind == "artifact-update" {
				text := ""
				for _, p := range r.Result.Artifact.Parts {
					text += p.Text
				}
				ans.add(text, r.Result.Append, r.Result.LastChunk)
			}
			if r.Result.Final {
				final = r.Result.Status.State
			}
		}
		if c := ans.chunks; len(c) < 3 || c[0] != "chunk_one " || c[1] != "chunk_two " || c[2] != "chunk_three" {
			t.Errorf("answer chunks: %q, want chunk_one , chunk_two , chunk_three first (events %v)", c, events)
		}
		if ans.answer != "chunk_one chunk_two chunk_three" || final != "completed" {
			t.Errorf("answer %q, final %q (events %v)", ans.answer, final, events)
		}
		t.Logf("events %v; chunks %q; answer %q", events, ans.chunks, ans.answer)
	}
	t.Run("streaming-driver chunks reach message/stream", streamChunks)

	t.Run("request-input-tool round trip", func(t *testing.T) {
		tk := decodeTask(t, g.call(t, "/agents/input/", "", "message/send", map[string]any{"message": msg03("please start the task")}))
		if tk.Status.State != "input-required" || !strings.Contains(string(tk.Status.Message), prompt) {
			t.Fatalf("task = %v", tk)
		}
		done := decodeTask(t, g.call(t, "/agents/input/", "", "message/send", map[string]any{"message": msg03(reply, tk.ID, tk.ContextID)}))
		if done.ID != tk.ID || done.Status.State != "completed" || done.text() != final {
			t.Fatalf("answered task = %v", done)
		}
		// The tool returned the client's answer; the driver carried it to the model.
		bodies := requests()
		if len(bodies) != 2 || !strings.Contains(bodies[1], `"tool_result"`) || !strings.Contains(bodies[1], reply) {
			t.Fatalf("provider requests: %q", bodies)
		}
		t.Logf("asked %s; answered %q; second model request: %s", tk.Status.Message, done.text(), bodies[1])
	})

	t.Run("hostile components fail classified, the gateway serves on", func(t *testing.T) {
		for _, tt := range []struct{ capsule, reason, code string }{
			{"forged", "abi", "E-WASI2-002"},
			{"flood", "trap", "E-WASI2-003"},
		} {
			tk := decodeTask(t, g.call(t, "/agents/"+tt.capsule+"/", "", "message/send", map[string]any{"message": msg03("go")}))
			if tk.Status.State != "failed" || !strings.Contains(tk.String(), tt.code) {
				t.Errorf("%s: %v, want failed with %s", tt.capsule, tk, tt.code)
			}
			waitMetric(t, g, fmt.Sprintf(`capsule_guest_traps_total{artifact=%q,capsule=%q,reason=%q,role="capsule"}`, tt.capsule, tt.capsule, tt.reason), 1)
			t.Logf("%s: %s", tt.capsule, tk.Status.Message)
		}
		streamChunks(t)
	})

	t.Run("a reload adding an unserved import is refused; the gateway serves on", func(t *testing.T) {
		reload := exec.Command(caddyBin, "reload", "--force", "--config", caddyfile("stream", "input", "forged", "flood", "unserved"), "--adapter", "caddyfile", "--address", g.admin)
		reload.Dir, reload.Env = dir, env
		out, err := reload.CombinedOutput()
		if err == nil || !bytes.Contains(out, []byte("E-COMP-010")) {
			t.Fatalf("reload: %v\n%s", err, out)
		}
		caddyfile("stream", "input", "forged", "flood") // back to what runs
		// The running configuration has no route for it: Caddy's empty answer, no card.
		resp, err := g.httpClient.Get(g.base + "/agents/unserved/.well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		card, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(card) != 0 {
			t.Errorf("the refused capsule answers: %s", card)
		}
		streamChunks(t)
	})
}
