package murmur

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/replay"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// The shipped drivers (docs/reference/driver-protocol.md "Shipped drivers") are exercised
// end to end: the guest built from examples/drivers, run as a driver through CallTool,
// its HTTP going through Outgoing to a loopback replay server
// (docs/reference/cassettes.md) that checks the translated request.

const driverKey = "sk-driver-sentinel-4f1c"

// Driver inputs (docs/reference/driver-protocol.md "Input"): turn 0 offers a tool; turn 1
// carries the call and its result.
const (
	driverTools = `"tools":[{"name":"wordcount","description":"counts words","parameters":{"type":"object","properties":{"text":{"type":"string"}}}}]`
	driverTurn0 = `{"model":"m-test","max_tokens":512,"system":"be brief","messages":[
		{"role":"user","content":[{"type":"text","text":"count the words in hello world"}]}],` + driverTools + `}`
	driverTurn1 = `{"model":"m-test","max_tokens":512,"system":"be brief","messages":[
		{"role":"user","content":[{"type":"text","text":"count the words in hello world"}]},
		{"role":"assistant","content":[{"type":"text","text":"Let me count."},{"type":"tool_call","id":"call_1","name":"wordcount","input":{"text":"hello world"}}]},
		{"role":"tool","tool_call_id":"call_1","is_error":false,"content":[{"type":"text","text":"{\"words\":2}"}]}],` + driverTools + `}`
	driverMiss = `{"model":"m-test","max_tokens":512,"messages":[{"role":"user","content":[{"type":"text","text":"an unscripted question"}]}]}`
)

// driverSpec is what differs between the two drivers.
type driverSpec struct {
	name     string
	cassette string // the provider's response bodies for turn 0 and turn 1
	fail500  string // a provider-shaped 500 body
	checkKey func(h http.Header) error
	checkReq map[string]func(body map[string]any) error // by case name
}

type driverOut struct {
	StopReason string `json:"stop_reason"`
	Content    []struct {
		Type, Text, ID, Name string
		Input                json.RawMessage
	} `json:"content"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	Error string `json:"error"`
}

// jget walks a decoded JSON value by object keys and array indexes.
func driverJSONGet(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// expect returns an error listing every path whose value is not the one wanted.
func driverExpect(body map[string]any, want map[string]any) error {
	var bad []string
	for path, w := range want {
		var p []any
		for _, s := range strings.Split(path, ".") {
			var n int
			if _, err := fmt.Sscanf(s, "%d", &n); err == nil {
				p = append(p, n)
			} else {
				p = append(p, s)
			}
		}
		if got := driverJSONGet(body, p...); fmt.Sprint(got) != fmt.Sprint(w) {
			bad = append(bad, fmt.Sprintf("%s = %v, want %v", path, got, w))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("translated request: %s", strings.Join(bad, "; "))
	}
	return nil
}

var anthropicDriver = driverSpec{
	name: "anthropic-messages",
	cassette: `[
		{"id":"msg_1","type":"message","role":"assistant","model":"m-test","content":[{"type":"text","text":"Let me count."},{"type":"tool_use","id":"call_1","name":"wordcount","input":{"text":"hello world"}}],"stop_reason":"tool_use","usage":{"input_tokens":20,"output_tokens":10}},
		{"id":"msg_2","type":"message","role":"assistant","model":"m-test","content":[{"type":"text","text":"There are 2 words."}],"stop_reason":"end_turn","usage":{"input_tokens":40,"output_tokens":7}}]`,
	fail500: `{"type":"error","error":{"type":"api_error","message":"upstream exploded"}}`,
	checkKey: func(h http.Header) error {
		if h.Get("X-Api-Key") != driverKey || h.Get("Anthropic-Version") != "2023-06-01" || h.Get("Content-Type") != "application/json" {
			return fmt.Errorf("headers x-api-key %q, anthropic-version %q, content-type %q", h.Get("X-Api-Key"), h.Get("Anthropic-Version"), h.Get("Content-Type"))
		}
		return nil
	},
	checkReq: map[string]func(map[string]any) error{
		"turn 0 tool call": func(b map[string]any) error {
			return driverExpect(b, map[string]any{
				"model": "m-test", "max_tokens": 512, "system": "be brief",
				"messages.0.role": "user", "messages.0.content.0.type": "text",
				"messages.0.content.0.text": "count the words in hello world", "messages.1": nil,
				"tools.0.name": "wordcount", "tools.0.description": "counts words",
				"tools.0.input_schema.type": "object", "tools.0.parameters": nil,
			})
		},
		"turn 1 final text": func(b map[string]any) error {
			return driverExpect(b, map[string]any{
				"system": "be brief", "messages.0.role": "user",
				"messages.1.role": "assistant", "messages.1.content.0.text": "Let me count.",
				"messages.1.content.1.type": "tool_use", "messages.1.content.1.id": "call_1",
				"messages.1.content.1.name": "wordcount", "messages.1.content.1.input.text": "hello world",
				"messages.2.role": "user", "messages.2.content.0.type": "tool_result",
				"messages.2.content.0.tool_use_id": "call_1", "messages.2.content.0.content.0.text": `{"words":2}`,
				"messages.2.content.0.is_error": nil, "messages.3": nil,
			})
		},
	},
}

var openaiDriver = driverSpec{
	name: "openai-chat",
	cassette: `[
		{"id":"chatcmpl-1","object":"chat.completion","model":"m-test","choices":[{"index":0,"message":{"role":"assistant","content":"Let me count.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"wordcount","arguments":"{\"text\":\"hello world\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":20,"completion_tokens":10,"total_tokens":30}},
		{"id":"chatcmpl-2","object":"chat.completion","model":"m-test","choices":[{"index":0,"message":{"role":"assistant","content":"There are 2 words."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":7,"total_tokens":47}}]`,
	fail500: `{"error":{"message":"upstream exploded","type":"server_error"}}`,
	checkKey: func(h http.Header) error {
		if h.Get("Authorization") != "Bearer "+driverKey || h.Get("Content-Type") != "application/json" {
			return fmt.Errorf("headers authorization %q, content-type %q", h.Get("Authorization"), h.Get("Content-Type"))
		}
		return nil
	},
	checkReq: map[string]func(map[string]any) error{
		"turn 0 tool call": func(b map[string]any) error {
			return driverExpect(b, map[string]any{
				"model": "m-test", "max_tokens": 512, "system": nil,
				"messages.0.role": "system", "messages.0.content": "be brief",
				"messages.1.role": "user", "messages.1.content": "count the words in hello world", "messages.2": nil,
				"tools.0.type": "function", "tools.0.function.name": "wordcount",
				"tools.0.function.description": "counts words", "tools.0.function.parameters.type": "object",
			})
		},
		"turn 1 final text": func(b map[string]any) error {
			return driverExpect(b, map[string]any{
				"messages.0.role":                            "system",
				"messages.2.role":                            "assistant",
				"messages.2.content":                         "Let me count.",
				"messages.2.tool_calls.0.id":                 "call_1",
				"messages.2.tool_calls.0.type":               "function",
				"messages.2.tool_calls.0.function.name":      "wordcount",
				"messages.2.tool_calls.0.function.arguments": `{"text":"hello world"}`,
				"messages.3.role":                            "tool",
				"messages.3.tool_call_id":                    "call_1",
				"messages.3.content":                         `{"words":2}`,
				"messages.4":                                 nil,
			})
		},
	},
}

func TestDriverAnthropicMessages(t *testing.T) { testDriver(t, anthropicDriver) }

func TestDriverOpenAIChat(t *testing.T) { testDriver(t, openaiDriver) }

func testDriver(t *testing.T, spec driverSpec) {
	t.Parallel()
	ctx := context.Background()
	code := guestbuild.Wasm(t, "../../../examples/drivers/"+spec.name)
	e, _ := newEngine(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	mod, err := Compile(ctx, e, "drivercap", spec.name, manifest.RoleDriver, code)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, "driver"); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	cassette := fmt.Sprintf(`{"provider":%q,"conversations":[{"match":"count the words","turns":%s}]}`, spec.name, spec.cassette)
	if err := os.WriteFile(filepath.Join(dir, "c.json"), []byte(cassette), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := replay.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		header http.Header
		body   []byte
	}
	var (
		mu    sync.Mutex
		reqs  []seen
		fails int
	)
	rh := lib.Handler()
	rh.OnRequest = func(r *http.Request, body []byte) {
		mu.Lock()
		reqs = append(reqs, seen{r.Header.Clone(), body})
		mu.Unlock()
	}
	mux := http.NewServeMux()
	mux.Handle("/", rh)
	mux.HandleFunc("/fail/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		fails++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte(spec.fail500))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	keyHeader := [2]string{"x-api-key", driverKey}
	if spec.name == "openai-chat" {
		keyHeader = [2]string{"Authorization", "Bearer " + driverKey}
	}
	var sleeps int
	hh := &Outgoing{Capsule: "drivercap", Rules: rules, Metrics: e.Metrics(),
		Credentials: []Credential{{Endpoint: srv.URL, Headers: [][2]string{keyHeader}}},
		Sleep:       func(context.Context, time.Duration) error { sleeps++; return nil }}
	hh.Init()
	var chunks string // the text the driver streamed (murmur:stream/events emit-chunk)
	host := &Imports{HTTP: hh, Who: spec.name, Chunk: func(thinking bool, text string) {
		if !thinking {
			chunks += text
		}
	}}

	tests := []struct {
		name, endpoint, input string
		wantStatus            abi.Status
		wantStop              string
		wantErr               []string // substrings of the output's error, or of the summary on status error
		check                 func(t *testing.T, out driverOut)
	}{
		{name: "turn 0 tool call", input: driverTurn0, wantStatus: abi.StatusPassed, wantStop: "tool_call",
			check: func(t *testing.T, out driverOut) {
				if len(out.Content) != 2 || out.Content[0].Type != "text" || out.Content[0].Text != "Let me count." {
					t.Fatalf("content %+v", out.Content)
				}
				c := out.Content[1]
				var in map[string]string
				if c.Type != "tool_call" || c.ID != "call_1" || c.Name != "wordcount" || json.Unmarshal(c.Input, &in) != nil || in["text"] != "hello world" {
					t.Fatalf("tool call %+v (input %s)", c, c.Input)
				}
				if out.Usage.InputTokens != 20 || out.Usage.OutputTokens != 10 {
					t.Fatalf("usage %+v", out.Usage)
				}
			}},
		{name: "turn 1 final text", input: driverTurn1, wantStatus: abi.StatusPassed, wantStop: "end_turn",
			check: func(t *testing.T, out driverOut) {
				if len(out.Content) != 1 || out.Content[0].Type != "text" || out.Content[0].Text != "There are 2 words." {
					t.Fatalf("content %+v", out.Content)
				}
				if out.Usage.InputTokens != 40 || out.Usage.OutputTokens != 7 {
					t.Fatalf("usage %+v", out.Usage)
				}
			}},
		{name: "cassette miss", input: driverMiss, wantStatus: abi.StatusPassed, wantStop: "error",
			wantErr: []string{spec.name, "HTTP 404", "cassette miss", "an unscripted question"}},
		{name: "provider 500", endpoint: "/fail", input: driverTurn0, wantStatus: abi.StatusPassed, wantStop: "error",
			wantErr: []string{spec.name, "HTTP 500", "upstream exploded"}},
		{name: "input not JSON", input: `{"model":`, wantStatus: abi.StatusError, wantErr: []string{"driver JSON"}},
		{name: "input without messages", input: `{"model":"m","max_tokens":10,"messages":[]}`, wantStatus: abi.StatusError, wantErr: []string{"messages is empty"}},
		{name: "input bad block", input: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image"}]}]}`,
			wantStatus: abi.StatusError, wantErr: []string{`messages[0].content[0]`, `"image"`}},
		{name: "input zero max_tokens", input: `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":[]}]}`,
			wantStatus: abi.StatusError, wantErr: []string{"max_tokens"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			reqs, fails = nil, 0
			mu.Unlock()
			sleeps, chunks = 0, ""
			g := wasm.Grants{MemoryBytes: 256 << 20, Deadline: 30 * time.Second, Env: []string{
				"MURMUR_INFERENCE_ENDPOINT=" + srv.URL + tt.endpoint, "MURMUR_INFERENCE_MODEL=m-test"}}
			input := tt.input
			res, err := CallTool(ctx, e, mod, g, host, abi.ToolInput{Data: &input})
			if err != nil {
				t.Fatal(err)
			}
			summary, data := driverDeref(res.Summary), driverDeref(res.Data)
			if res.Status != tt.wantStatus {
				t.Fatalf("status %v, want %v (summary %q, data %q)", res.Status, tt.wantStatus, summary, data)
			}
			if strings.Contains(summary+data, driverKey) {
				t.Fatalf("the key reached the driver's result: %q %q", summary, data)
			}
			if tt.wantStatus != abi.StatusPassed {
				for _, w := range tt.wantErr {
					if !strings.Contains(summary, w) {
						t.Errorf("summary %q lacks %q", summary, w)
					}
				}
				mu.Lock()
				n := len(reqs)
				mu.Unlock()
				if n != 0 {
					t.Errorf("a bad input reached the provider (%d requests)", n)
				}
				return
			}
			var out driverOut
			if err := json.Unmarshal([]byte(data), &out); err != nil {
				t.Fatalf("data is not the driver output: %v: %q", err, data)
			}
			if out.StopReason != tt.wantStop {
				t.Fatalf("stop_reason %q, want %q (error %q)", out.StopReason, tt.wantStop, out.Error)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(out.Error, w) {
					t.Errorf("error %q lacks %q", out.Error, w)
				}
			}
			if tt.wantStop == "error" && !strings.Contains(data, `"content":[]`) {
				t.Errorf("an error output should carry an empty content list: %s", data)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
			// The driver asks for a stream and emits the text as its deltas arrive: what it
			// emitted is the answer's text.
			var text string
			for _, c := range out.Content {
				if c.Type == "text" {
					text += c.Text
				}
			}
			if chunks != text {
				t.Errorf("streamed chunks %q, want the answer's text %q", chunks, text)
			}
			mu.Lock()
			defer mu.Unlock()
			if tt.endpoint == "/fail" {
				if fails != ProviderTries || sleeps != ProviderTries-1 {
					t.Errorf("500 answered %d times with %d waits, want %d tries", fails, sleeps, ProviderTries)
				}
				return
			}
			if len(reqs) != 1 {
				t.Fatalf("%d requests reached the replay server, want 1", len(reqs))
			}
			if err := spec.checkKey(reqs[0].header); err != nil {
				t.Error(err)
			}
			if !strings.Contains(string(reqs[0].body), `"stream":true`) {
				t.Errorf("the driver did not ask for a stream: %s", reqs[0].body)
			}
			if check := spec.checkReq[tt.name]; check != nil {
				var body map[string]any
				if err := json.Unmarshal(reqs[0].body, &body); err != nil {
					t.Fatalf("request body: %v", err)
				}
				if err := check(body); err != nil {
					t.Errorf("%v\nbody: %s", err, reqs[0].body)
				}
			}
		})
	}
}

func driverDeref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// TestDriverArtifactManifests: each shipped driver's artifact folder declares it as a
// wasm driver of its own name.
func TestDriverArtifactManifests(t *testing.T) {
	for _, name := range []string{"anthropic-messages", "openai-chat"} {
		file := filepath.Join("..", "..", "..", "examples", "drivers", name, "artifact", "murmur.yaml")
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		a, warns, err := manifest.ParseArtifactManifest(data, file)
		if err != nil {
			t.Fatal(err)
		}
		if len(warns) > 0 || a.Name != name || a.Version != "0.2.0" || a.Runtime != manifest.RoleDriver || a.Implementation != manifest.ImplWasm || a.Description == "" {
			t.Errorf("%s: %+v (warnings %v)", file, a, warns)
		}
	}
}
