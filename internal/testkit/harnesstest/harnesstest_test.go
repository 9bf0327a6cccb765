package harnesstest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"strings"
	"testing"
)

// TestInstallWithoutNPM: no npm on PATH is ErrNoRegistry (Claude and Codex skip on it,
// or fail under CI=true), and an installed harness is found without npm.
func TestInstallWithoutNPM(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	t.Setenv("PATH", t.TempDir())
	if _, err := Install(context.Background(), ClaudeCode); !errors.Is(err, ErrNoRegistry) {
		t.Errorf("no npm: %v", err)
	}
}

// recorder is a testing.TB that records a skip or a failure and stops the goroutine, as
// testing's own do.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = fmt.Sprintf(format, args...)
	goruntime.Goexit()
}
func (r *recorder) Fatal(args ...any) {
	r.failed = fmt.Sprint(args...)
	goruntime.Goexit()
}

// TestNeedSkipsOrFails: without npm, Claude skips saying why, and fails under CI=true.
func TestNeedSkipsOrFails(t *testing.T) {
	t.Setenv(CacheEnv, t.TempDir())
	t.Setenv("PATH", t.TempDir())
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			Claude(r)
		}()
		<-done
		if ci == "true" && (r.failed == "" || r.skipped != "") || ci == "" && (r.skipped == "" || r.failed != "") {
			t.Errorf("CI=%q: skipped %q, failed %q", ci, r.skipped, r.failed)
		}
		if !strings.Contains(r.skipped+r.failed, "npm") {
			t.Errorf("CI=%q: no reason given: %q %q", ci, r.skipped, r.failed)
		}
	}
}

// events reads a server-sent event stream into its events' data.
func events(t *testing.T, r io.Reader) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(data), &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
	}
	return out
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func types(evs []map[string]any) string {
	var out []string
	for _, e := range evs {
		out = append(out, e["type"].(string))
	}
	return strings.Join(out, " ")
}

// TestProvider checks the stand-in's streams: the text answer, the tool call while no
// tool result is in the conversation, the answer once one is, and an error status.
func TestProvider(t *testing.T) {
	p := NewProvider(t, Script{Answer: "hello there", Tool: EchoTool, ToolInput: `{"text":"hi"}`})
	msgTools := `"tools":[{"name":"mcp__b__echo"}]`
	respTools := `"tools":[{"type":"namespace","name":"mcp__b","tools":[{"type":"function","name":"echo"}]}]`
	tests := []struct {
		name, path, body, want, has string
	}{
		{"messages text", "/v1/messages", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			"message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop", `"text":"hello"`},
		{"messages tool call", "/v1/messages", `{"model":"m",` + msgTools + `,"messages":[{"role":"user","content":"hi"}]}`,
			"message_start content_block_start content_block_delta content_block_stop message_delta message_stop", `"name":"mcp__b__echo"`},
		{"messages after the tool", "/v1/messages", `{"model":"m",` + msgTools + `,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":"echo: hi"}]}]}`,
			"message_start content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop", `"stop_reason":"end_turn"`},
		{"responses text", "/v1/responses", `{"model":"m","input":[]}`,
			"response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed", `"cached_tokens":5`},
		{"responses namespaced tool call", "/v1/responses", `{"model":"m",` + respTools + `,"input":[]}`,
			"response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed", `"namespace":"mcp__b"`},
		{"responses after the tool", "/v1/responses", `{"model":"m",` + respTools + `,"input":[{"type":"function_call_output","call_id":"c","output":"echo: hi"}]}`,
			"response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta response.output_text.done response.content_part.done response.output_item.done response.completed", `"text":"hello there"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, p.URL+tt.path, tt.body)
			raw, _ := io.ReadAll(resp.Body)
			if got := types(events(t, bytes.NewReader(raw))); got != tt.want {
				t.Errorf("events %s\nwant   %s", got, tt.want)
			}
			if !strings.Contains(string(raw), tt.has) {
				t.Errorf("no %s in\n%s", tt.has, raw)
			}
		})
	}
	if resp := post(t, NewProvider(t, Script{Status: 401, ErrorMessage: "no"}).URL+"/v1/messages", `{}`); resp.StatusCode != 401 {
		t.Errorf("status %d", resp.StatusCode)
	}
	if resp := post(t, p.URL+"/v1/other", `{}`); resp.StatusCode != 404 {
		t.Errorf("another path: %d", resp.StatusCode)
	}
	if n := len(p.Requests()); n != len(tests)+1 {
		t.Errorf("%d requests recorded", n)
	}
}

// TestBridge checks the stand-in bridge: the bearer token, the MCP handshake, the tool.
func TestBridge(t *testing.T) {
	b := NewBridge(t, "tok")
	call := func(token, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, b.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	tests := []struct {
		name, token, body string
		status            int
		has               string
	}{
		{"a wrong token", "bad", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`, 401, "unauthorized"},
		{"initialize", "tok", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`, 200, `"protocolVersion":"2025-03-26"`},
		{"a notification", "tok", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, 202, ""},
		{"tools/list", "tok", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`, 200, `"name":"echo"`},
		{"tools/call", "tok", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`, 200, `"text":"echo: hi"`},
		{"an unknown method", "tok", `{"jsonrpc":"2.0","id":4,"method":"resources/list"}`, 200, `"code":-32601`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := call(tt.token, tt.body)
			if status != tt.status || !strings.Contains(body, tt.has) {
				t.Errorf("%d %s", status, body)
			}
		})
	}
	if b.Unauthorized() != 1 || len(b.Calls()) != 1 || string(b.Calls()[0]) != `{"text":"hi"}` {
		t.Errorf("unauthorized %d, calls %s", b.Unauthorized(), b.Calls())
	}
	if got := strings.Join(b.Methods(), " "); got != "initialize notifications/initialized tools/list tools/call resources/list" {
		t.Errorf("methods %s", got)
	}
}
