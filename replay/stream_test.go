package replay

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// streamedCassette has one Anthropic turn recorded as a stream with delays between its
// events, and one OpenAI turn the same way.
const streamedCassette = `{"provider": "anthropic-messages", "conversations": [
  {"match": "stream me", "turns": [{"stream": [
    {"event": "message_start", "data": {"type": "message_start", "message": {"id": "m1", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 3, "output_tokens": 0}}}},
    {"event": "content_block_start", "data": {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}},
    {"delay_ms": 5, "event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}},
    {"delay_ms": 5, "event": "content_block_delta", "data": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}}},
    {"event": "content_block_stop", "data": {"type": "content_block_stop", "index": 0}},
    {"event": "message_delta", "data": {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 2}}},
    {"event": "message_stop", "data": {"type": "message_stop"}}]}]}]}`

const streamedOpenAI = `{"provider": "openai-chat", "conversations": [
  {"match": "stream me", "turns": [{"stream": [
    {"data": {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hel"}, "finish_reason": null}]}},
    {"delay_ms": 5, "data": {"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}]}},
    {"data": "[DONE]"}]}]}]}`

type sse struct{ event, data string }

// readSSE reads every event of a server-sent event body.
func readSSE(t *testing.T, resp *http.Response) []sse {
	t.Helper()
	var out []sse
	var cur sse
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			out = append(out, cur)
			cur = sse{}
		case strings.HasPrefix(line, "event: "):
			cur.event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	return out
}

func TestStreaming(t *testing.T) {
	lib, err := Load(writeFiles(t, map[string]string{"a.json": anthropicCassette, "o.json": openaiCassette,
		"s.json": streamedCassette, "so.json": streamedOpenAI}))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(lib.Handler())
	defer srv.Close()
	tests := []struct {
		name, path, body string
		status           int
		events           []string // event names, or the data of unnamed events
		text             string   // the text the deltas carry, in order
	}{
		{"anthropic recorded stream", "/v1/messages", `{"stream": true, "messages": [{"role": "user", "content": "stream me"}]}`, 200,
			[]string{"message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, "Hello"},
		{"anthropic synthesized from a whole body", "/v1/messages", `{"stream": true, "messages": [{"role": "user", "content": "list the files"}, {"role": "assistant", "content": "x"}]}`, 200,
			[]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, "two files"},
		{"anthropic tool_use synthesized", "/v1/messages", `{"stream": true, "messages": [{"role": "user", "content": "list the files"}]}`, 200,
			[]string{"message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"}, ""},
		{"openai recorded stream", "/v1/chat/completions", `{"stream": true, "messages": [{"role": "user", "content": "stream me"}]}`, 200,
			[]string{"chunk", "chunk", "[DONE]"}, "Hello"},
		{"openai synthesized", "/v1/chat/completions", `{"stream": true, "messages": [{"role": "user", "content": "list the files"}]}`, 200,
			[]string{"chunk", "chunk", "[DONE]"}, "first"},
		{"a recorded stream asked without stream", "/v1/messages", `{"messages": [{"role": "user", "content": "stream me"}]}`, 400, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+tt.path, "application/json", strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.status != 200 {
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Errorf("Content-Type %q", ct)
			}
			var names []string
			var text strings.Builder
			for _, ev := range readSSE(t, resp) {
				name := ev.event
				if name == "" {
					name = "chunk"
					if !strings.HasPrefix(ev.data, "{") {
						name = ev.data
					}
				}
				names = append(names, name)
				var d struct {
					Delta   struct{ Text string } `json:"delta"`
					Choices []struct {
						Delta struct{ Content string } `json:"delta"`
					} `json:"choices"`
				}
				if strings.HasPrefix(ev.data, "{") {
					if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
						t.Fatalf("event data is not JSON: %v: %s", err, ev.data)
					}
				}
				text.WriteString(d.Delta.Text)
				for _, c := range d.Choices {
					text.WriteString(c.Delta.Content)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.events, ",") || text.String() != tt.text {
				t.Errorf("events %v, text %q; want %v, %q", names, text.String(), tt.events, tt.text)
			}
		})
	}
}

// TestBeforeEvent holds the stream before its last event until the client has read the
// first: the client gets text while the provider is still answering.
func TestBeforeEvent(t *testing.T) {
	lib, err := Load(writeFiles(t, map[string]string{"s.json": streamedCassette}))
	if err != nil {
		t.Fatal(err)
	}
	h := lib.Handler()
	release := make(chan struct{})
	var mu sync.Mutex
	var seen []int
	h.BeforeEvent = func(_ *http.Request, i, n int) {
		mu.Lock()
		seen = append(seen, i)
		mu.Unlock()
		if i == n-1 {
			<-release
		}
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/v1/messages", "application/json", strings.NewReader(`{"stream": true, "messages": [{"role": "user", "content": "stream me"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	// Reading the first delta returns while the last event is held: no deadlock is the
	// proof that the text arrived before the provider's answer ended.
	for sc.Scan() && !strings.Contains(sc.Text(), `"Hel"`) {
	}
	close(release)
	for sc.Scan() {
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 7 {
		t.Errorf("BeforeEvent saw %v, want 0…6", seen)
	}
}
