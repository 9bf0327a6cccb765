package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/replay"
)

// streamedAnswer is what the streamed cassette's model says, in three text deltas.
var streamedAnswer = []string{"The first words, ", "then more, ", "and the end."}

// streamCassette is one Anthropic turn recorded as a stream, gap milliseconds between its
// text deltas. Its events: 0 message_start, 1 content_block_start, 2–4 the deltas,
// 5 content_block_stop, 6 message_delta, 7 message_stop.
func streamCassette(gap int) string {
	ev := func(delay int, name, data string) string {
		return fmt.Sprintf(`{"delay_ms": %d, "event": %q, "data": %s}`, delay, name, data)
	}
	evs := []string{
		ev(0, "message_start", `{"type": "message_start", "message": {"id": "msg_s", "type": "message", "role": "assistant", "model": "m", "content": [], "usage": {"input_tokens": 5, "output_tokens": 0}}}`),
		ev(0, "content_block_start", `{"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}`),
	}
	for i, text := range streamedAnswer {
		delay := gap
		if i == 0 {
			delay = 0
		}
		evs = append(evs, ev(delay, "content_block_delta", fmt.Sprintf(`{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": %q}}`, text)))
	}
	evs = append(evs,
		ev(0, "content_block_stop", `{"type": "content_block_stop", "index": 0}`),
		ev(0, "message_delta", `{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 9}}`),
		ev(0, "message_stop", `{"type": "message_stop"}`))
	return `{"provider": "anthropic-messages", "conversations": [{"match": "stream the answer", "turns": [{"stream": [` + strings.Join(evs, ",\n") + `]}]}]}`
}

// lastTextEvent is the index of the streamed turn's last text delta.
const lastTextEvent = 4

// startStreamGateway runs the gateway with one agent capsule, "streamer", whose
// anthropic-messages driver (built from examples/drivers) talks to a replay provider in
// this process serving cassette; before is the provider's BeforeEvent hook.
func startStreamGateway(t *testing.T, cassette string, before func(r *http.Request, i, n int)) *gateway {
	t.Helper()
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	reg := filepath.Join(dir, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	cassettes := filepath.Join(dir, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "stream.json"), []byte(cassette), 0o644)
	lib, err := replay.Load(cassettes)
	if err != nil {
		t.Fatal(err)
	}
	h := lib.Handler()
	h.BeforeEvent = before
	provider := httptest.NewServer(h)
	t.Cleanup(provider.Close)

	os.MkdirAll(filepath.Join(dir, "streamer"), 0o755)
	os.WriteFile(filepath.Join(dir, "streamer", "murmur.yaml"), []byte("name: streamer\nversion: 0.0.1\nartifacts:\n"+
		"  - name: anthropic-messages\n    version: 0.2.0\n    runtime: driver\n    gateway: {endpoint: "+provider.URL+"}\n"+
		"inference:\n  driver: {artifact: anthropic-messages}\n  model: m\n  max_turns: 2\n"), 0o644)
	port, admin := freePort(t), freePort(t)
	cf := fmt.Sprintf("{\n\tadmin 127.0.0.1:%s\n\tdefault_bind 127.0.0.1\n\tcapsule {\n\t\tregistry %s\n\t\twork_root work\n\t\tcache_dir cache\n\t}\n}\n\n"+
		"http://127.0.0.1:%s {\n\thandle /agents/streamer/* {\n\t\tcapsule streamer/murmur.yaml\n\t}\n}\n", admin, reg, port)
	cf = strings.Replace(cf, "cache_dir cache", "cache_dir "+gatewayCache(), 1)
	g := &gateway{dir: dir, home: home, base: "http://127.0.0.1:" + port, admin: "127.0.0.1:" + admin,
		logs: &syncBuffer{}, httpClient: &http.Client{Timeout: 60 * time.Second}}
	g.caddyfile = filepath.Join(dir, "Caddyfile")
	os.WriteFile(g.caddyfile, []byte(cf), 0o644)
	g.cmd = exec.Command(caddyBin, "run", "--config", g.caddyfile, "--adapter", "caddyfile")
	g.cmd.Dir = dir
	g.cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config")}
	waitServing(t, g.cmd, g.logs)
	return g
}

// jsEvent is one line of jsclient/stream-lines.mjs: an A2A 0.3 stream event as the JS
// SDK delivered it, ms after the message was sent.
type jsEvent struct {
	MS    float64
	Event struct {
		Kind   string
		Final  bool
		Status struct {
			State   string
			Message *struct {
				Parts []struct {
					Text     string
					Metadata map[string]any
				}
			}
		}
		Artifact          struct{ Parts []struct{ Text string } }
		Append, LastChunk bool
	}
}

// chunkText is the text an answer chunk carries (an artifact update before the last), ""
// for any other event.
func (e jsEvent) chunkText() string {
	if e.Event.Kind != "artifact-update" || e.Event.LastChunk {
		return ""
	}
	var s string
	for _, p := range e.Event.Artifact.Parts {
		s += p.Text
	}
	return s
}

// TestStreamFirstTextBeforeLastChunk: a streaming client — the official A2A JS SDK —
// receives the first text of a turn before the replay provider has sent that turn's last
// text chunk. The provider holds its last text delta until the client has printed its
// first text event, and both sides write to one ordered log; the driver reads the
// provider's answer through capsulegate:http/outgoing@0.2.0 and emits each delta.
func TestStreamFirstTextBeforeLastChunk(t *testing.T) {
	t.Parallel() // its own gateway or CLI run, folders and ports
	if testing.Short() {
		t.Skip("builds and runs the gateway")
	}
	node, jsDir := jsSDK(t, "../a2a/testdata/jsclient")

	var (
		mu      sync.Mutex
		order   []string
		release = make(chan struct{})
	)
	log := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	g := startStreamGateway(t, streamCassette(20), func(r *http.Request, i, n int) {
		if i != lastTextEvent {
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(2 * time.Minute): // a watchdog: reaching it fails the test below
		}
		log("provider: last text chunk")
	})

	js := exec.Command(node, "stream-lines.mjs", g.base+"/agents/streamer/.well-known/agent-card.json?A2A-Version=0.3", "please stream the answer")
	js.Dir = jsDir
	var stderr syncBuffer
	js.Stderr = &stderr
	out, err := js.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := js.Start(); err != nil {
		t.Fatal(err)
	}
	var events []jsEvent
	var ans answerStream
	var final string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		var e jsEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		events = append(events, e)
		if w := e.chunkText(); w != "" && len(ans.chunks) == 0 {
			log("client: first text")
			close(release)
		}
		if e.Event.Kind == "artifact-update" {
			w := ""
			for _, p := range e.Event.Artifact.Parts {
				w += p.Text
			}
			ans.add(w, e.Event.Append, e.Event.LastChunk)
		}
		if e.Event.Final {
			final = e.Event.Status.State
		}
	}
	if err := js.Wait(); err != nil {
		t.Fatalf("node stream-lines.mjs: %v\n%s", err, stderr.String())
	}
	text, answer := ans.streamed(), ans.answer
	if text == "" {
		close(release)
	}
	want := strings.Join(streamedAnswer, "")
	if text != want || answer != want || final != "completed" {
		t.Fatalf("streamed text %q, answer %q, final %q; want %q completed\nevents %+v", text, answer, final, want, events)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"client: first text", "provider: last text chunk"}) {
		t.Fatalf("order %q: the client's first text must come before the provider's last chunk", order)
	}
	var first, last float64
	for _, e := range events {
		if e.chunkText() != "" && first == 0 {
			first = e.MS
		}
		last = e.MS
	}
	t.Logf("order %q; first text event at %.1f ms, last event at %.1f ms (JS SDK clock)", order, first, last)
}

// TestTimeToFirstText measures, through the gateway and the A2A stream, how long a client
// waits for the first text of a turn whose model streams three deltas gap ms apart —
// against the time to the turn's answer. It prints the figures of docs/benchmarks.md
// ("Time to first text"); set CAPSULEGATE_TTFT=1 to run it.
func TestTimeToFirstText(t *testing.T) {
	if os.Getenv("CAPSULEGATE_TTFT") == "" {
		t.Skip("a measurement: set CAPSULEGATE_TTFT=1")
	}
	const runs, gap = 30, 200
	g := startStreamGateway(t, streamCassette(gap), nil)
	var firsts, answers []time.Duration
	for i := 0; i < runs+1; i++ {
		start := time.Now()
		var first, ans time.Duration
		for ev := range g.stream(t, "/agents/streamer/", "", "message/stream", map[string]any{"message": msg03("please stream the answer")}) {
			var r struct {
				Result struct {
					Kind      string
					LastChunk bool
				}
			}
			json.Unmarshal(ev.data, &r)
			if first == 0 && r.Result.Kind == "artifact-update" && !r.Result.LastChunk {
				first = time.Since(start)
			}
			if ans == 0 && r.Result.Kind == "artifact-update" && r.Result.LastChunk {
				ans = time.Since(start)
			}
		}
		if i == 0 {
			continue // the first task opens the session and compiles nothing more: not counted
		}
		if first == 0 || ans == 0 {
			t.Fatalf("run %d: no text (%v) or no answer (%v)", i, first, ans)
		}
		firsts, answers = append(firsts, first), append(answers, ans)
	}
	med := func(d []time.Duration) time.Duration {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return d[len(d)/2]
	}
	p90 := func(d []time.Duration) time.Duration { return d[len(d)*9/10] }
	fmt.Printf("time to first text event: median %v, p90 %v; time to the answer: median %v, p90 %v (%d runs, deltas %d ms apart)\n",
		med(firsts).Round(100*time.Microsecond), p90(firsts).Round(100*time.Microsecond), med(answers).Round(100*time.Microsecond), p90(answers).Round(100*time.Microsecond), runs, gap)
}

// TestReplayRecordCommand runs `caddy capsule replay --record <dir> --upstream <url>`
// against a fake provider on 127.0.0.1: the client gets the provider's stream, the
// provider gets the key, and the cassette written holds the stream but not the key.
func TestReplayRecordCommand(t *testing.T) {
	const key = "sk-ant-RECORD-SENTINEL-42"
	var gotKey string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKey = r.Header.Get("x-api-key")
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"m","type":"message","role":"assistant","content":[],"usage":{"input_tokens":1,"output_tokens":0}}}`,
			`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"recorded"}}`,
			`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
			`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}}`,
			`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
		} {
			w.Write([]byte(ev + "\n\n"))
			w.(http.Flusher).Flush()
		}
	}))
	defer upstream.Close()
	home, dir := t.TempDir(), filepath.Join(t.TempDir(), "recorded")

	if r := capsule(t, home, "replay", "--record", dir); r.code != 2 {
		t.Errorf("--record without --upstream: exit %d, want 2 (%s)", r.code, r.stderr)
	}
	cmd := exec.Command(caddyBin, "capsule", "replay", "--record", dir, "--upstream", upstream.URL, "--listen", "127.0.0.1:0")
	cmd.Env = []string{"HOME=" + home}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := bufio.NewReader(stderr)
	line, err := lines.ReadString('\n')
	i := strings.LastIndex(line, " on http://") + len(" on ") // the line names the upstream too
	if err != nil || i < len(" on ") {
		t.Fatalf("ready line %q: %v", line, err)
	}
	req, _ := http.NewRequest("POST", strings.TrimSpace(line[i:])+"/v1/messages",
		strings.NewReader(`{"model":"m","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"record this"}]}`))
	req.Header.Set("x-api-key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), `"text":"recorded"`) || gotKey != key {
		t.Fatalf("through the recorder: key %q, body %s", gotKey, body)
	}
	// The recorder reports the turn once the file is written.
	if line, err = lines.ReadString('\n'); err != nil || !strings.Contains(line, "recorded turn 0") {
		t.Fatalf("after the request: %q %v", line, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "recorded-anthropic-messages.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), key) || !strings.Contains(string(data), `"match": "record this"`) || !strings.Contains(string(data), "content_block_delta") {
		t.Fatalf("the cassette:\n%s", data)
	}
	if _, err := replay.Load(dir); err != nil {
		t.Fatalf("the recording does not load: %v", err)
	}
}
