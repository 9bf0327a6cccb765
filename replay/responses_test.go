package replay

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// codexPrelude is what the Codex CLI sends before the task: its instructions as
// developer messages, then the environment as a user message.
const codexPrelude = `
  {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
  {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions instructions>read-only</permissions instructions>"}]},
  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>count the words of everything</INSTRUCTIONS>"}]},
  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/repo</cwd>\n</environment_context>"}]}`

// codexTurn1 is the input of Codex's second request: the task, the model's first answer
// (reasoning, a remark, a call) and the call's output.
const codexTurn1 = `[` + codexPrelude + `,
  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "count the words in a.txt"}]},
  {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
  {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Counting."}]},
  {"type": "function_call", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"wc -w a.txt\"}"},
  {"type": "function_call_output", "call_id": "call_1", "output": "3 a.txt"}]`

const responsesCassette = `{"provider": "openai-responses", "conversations": [
  {"match": "count the words", "turns": [
    {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-5",
     "output": [
       {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Use wc."}]},
       {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": [{"type": "output_text", "text": "Let me count the words of the file for you.", "annotations": []}]},
       {"type": "function_call", "id": "fc_1", "status": "completed", "call_id": "call_1", "name": "exec_command", "arguments": "{\"cmd\":\"wc -w a.txt\"}"}],
     "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 15}},
    {"id": "resp_2", "object": "response", "status": "completed",
     "output": [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Three words."}]}],
     "usage": {"input_tokens": 20, "output_tokens": 3, "total_tokens": 23}}]},
  {"match": "stream me", "turns": [{"stream": [
    {"event": "response.created", "data": {"type": "response.created", "sequence_number": 0, "response": {"id": "resp_s", "object": "response", "status": "in_progress", "output": []}}},
    {"delay_ms": 5, "event": "response.output_text.delta", "data": {"type": "response.output_text.delta", "sequence_number": 1, "item_id": "msg_s", "output_index": 0, "content_index": 0, "delta": "Hel"}},
    {"delay_ms": 5, "event": "response.output_text.delta", "data": {"type": "response.output_text.delta", "sequence_number": 2, "item_id": "msg_s", "output_index": 0, "content_index": 0, "delta": "lo"}},
    {"event": "response.completed", "data": {"type": "response.completed", "sequence_number": 3, "response": {"id": "resp_s", "object": "response", "status": "completed", "output": []}}}]}]},
  {"match": "hello", "turns": [{"id": "resp_hello", "object": "response", "status": "completed", "output": []}]}]}`

// TestParseResponsesRequest pins the matching rule on Codex-like inputs: the task is the
// first user message that is not Codex's context, the turn the number of runs of the
// model's items.
func TestParseResponsesRequest(t *testing.T) {
	tests := []struct {
		name, body string
		first      string
		turns      int
		stream     bool
		err        string
	}{
		{"string input", `{"model": "gpt-5", "input": "count the words"}`, "count the words", 0, false, ""},
		{"codex first request", `{"stream": true, "input": [` + codexPrelude + `,
			{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "count the words in a.txt"}]}]}`,
			"count the words in a.txt", 0, true, ""},
		{"context and task in one message", `{"input": [{"type": "message", "role": "user", "content": [
			{"type": "input_text", "text": "  <user_instructions>be brief</user_instructions>"},
			{"type": "input_text", "text": "the task"}, {"type": "input_image", "image_url": "data:,"}, {"type": "input_text", "text": "its second line"}]}]}`,
			"the task\nits second line", 0, false, ""},
		{"short form messages", `{"input": [{"role": "user", "content": "<environment_context>x</environment_context>"}, {"role": "user", "content": "the task"}, {"role": "assistant", "content": "ok"}]}`,
			"the task", 1, false, ""},
		{"second turn: reasoning, text and a call are one turn", `{"stream": true, "input": ` + codexTurn1 + `}`,
			"count the words in a.txt", 1, true, ""},
		{"parallel calls are one turn", `{"input": [{"role": "user", "content": "task"},
			{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}, {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
			{"type": "function_call_output", "call_id": "a", "output": "1"}, {"type": "function_call_output", "call_id": "b", "output": "2"}]}`,
			"task", 1, false, ""},
		{"third turn", `{"input": [{"role": "user", "content": "task"},
			{"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"}, {"type": "function_call_output", "call_id": "a", "output": "1"},
			{"type": "custom_tool_call", "call_id": "b", "name": "apply_patch", "input": "*** Begin Patch"}, {"type": "custom_tool_call_output", "call_id": "b", "output": "ok"},
			{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and then?"}]}]}`,
			"task", 2, false, ""},
		{"developer and system messages are not the task", `{"input": [{"role": "system", "content": "s"}, {"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]}`,
			"u", 0, false, ""},
		{"only codex context", `{"input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context></environment_context>"}]}]}`,
			"", 0, false, "no message with role"},
		{"previous_response_id continues that response's conversation", `{"previous_response_id": "resp_1", "input": [{"type": "function_call_output", "call_id": "a", "output": "1"}]}`,
			"the task", 2, false, ""},
		{"previous_response_id with a new answer in input", `{"previous_response_id": "resp_1", "input": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "a new message"}]}`,
			"the task", 3, false, ""},
		{"unknown previous_response_id", `{"previous_response_id": "resp_9", "input": [{"role": "user", "content": "x"}]}`, "", 0, false, "previous_response_id \"resp_9\" is not a response this replay answered"},
		{"no input", `{"model": "gpt-5"}`, "", 0, false, "no input"},
		{"input not a list", `{"input": 42}`, "", 0, false, "a string or a list"},
		{"content not parts", `{"input": [{"role": "user", "content": 42}]}`, "", 0, false, "input[0].content"},
		{"not json", `{"input": `, "", 0, false, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ch chain
			ch.remember("resp_1", query{first: "the task", turn: 1})
			q, err := parseRequest(Responses, []byte(tt.body), &ch)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil || q.first != tt.first || q.turn != tt.turns || q.stream != tt.stream {
				t.Fatalf("got %+v, %v; want %q, turn %d, stream %v", q, err, tt.first, tt.turns, tt.stream)
			}
		})
	}
}

func responsesLibrary(t *testing.T) *Library {
	t.Helper()
	lib, err := Load(writeFiles(t, map[string]string{"r.json": responsesCassette, "o.json": openaiCassette}))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

// TestResponsesHandler answers whole turns and misses over HTTP, in the OpenAI error shape.
func TestResponsesHandler(t *testing.T) {
	h := responsesLibrary(t).Handler()
	tests := []struct {
		name, path, body string
		status           int
		want             []string
	}{
		{"turn 0", "/v1/responses", `{"input": "please count the words"}`, 200, []string{`"id": "resp_1"`}},
		{"turn 1 after a call", "/openai/v1/responses", `{"input": ` + codexTurn1 + `}`, 200, []string{`"id": "resp_2"`, "Three words."}},
		{"miss names what was asked", "/v1/responses", `{"input": [` + codexPrelude + `, {"role": "user", "content": "an unscripted question"}]}`,
			404, []string{`"code":"cassette_miss"`, "cassette miss: no openai-responses conversation", `\"an unscripted question\"`, "turn 0", `r.json \"count the words\" (2 turns)`}},
		{"turn past the end", "/v1/responses", `{"input": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}, {"role": "user", "content": "again"}]}`,
			404, []string{"cassette_miss", `conversation \"hello\" in r.json has 1 turn(s)`, "turn 1 (1 assistant turns)"}},
		{"only chat cassettes for the chat path", "/v1/chat/completions", `{"messages": [{"role": "user", "content": "hello"}]}`, 404, []string{"no openai-chat conversation"}},
		{"a recorded stream asked without stream", "/v1/responses", `{"input": "stream me"}`, 400, []string{"invalid_request_error", "recorded stream"}},
		// "turn 0" above answered resp_1: continuing it is turn 1 of its conversation.
		{"previous_response_id continues", "/v1/responses", `{"previous_response_id": "resp_1", "input": [{"type": "function_call_output", "call_id": "call_1", "output": "3"}]}`,
			200, []string{`"id": "resp_2"`}},
		{"store false is not remembered", "/v1/responses", `{"store": false, "input": "hello"}`, 200, []string{`"resp_hello"`}},
		{"previous_response_id of a store false answer", "/v1/responses", `{"previous_response_id": "resp_hello", "input": "more"}`,
			400, []string{"invalid_request_error", `previous_response_id \"resp_hello\" is not a response this replay answered`}},
		{"wrong method", "GET", "", 405, []string{"GET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method, path := "POST", tt.path
			if tt.path == "GET" {
				method, path = "GET", "/v1/responses"
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(tt.body)))
			body := rec.Body.String()
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, body)
			}
			var shape struct {
				Error *struct{ Message, Type string } `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &shape); err != nil {
				t.Fatalf("body is not JSON: %s", body)
			}
			if (tt.status != 200) != (shape.Error != nil && shape.Error.Message != "" && shape.Error.Type != "") {
				t.Errorf("error shape: %s", body)
			}
			if tt.status != 200 && !strings.Contains(body, `"code":`) {
				t.Errorf("error without code: %s", body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q: %s", w, body)
				}
			}
		})
	}
}

// responseEvent is the part of a Responses stream event the tests read.
type responseEvent struct {
	Type         string          `json:"type"`
	Seq          *int            `json:"sequence_number"`
	ItemID       string          `json:"item_id"`
	OutputIndex  int             `json:"output_index"`
	ContentIndex int             `json:"content_index"`
	Delta        string          `json:"delta"`
	Text         string          `json:"text"`
	Arguments    string          `json:"arguments"`
	Item         json.RawMessage `json:"item"`
	Response     json.RawMessage `json:"response"`
}

func postStream(t *testing.T, url, body string) []sse {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, %s: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return readSSE(t, resp)
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%v: %s", err, a)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return reflect.DeepEqual(x, y)
}

// TestResponsesSynthesizedStream streams whole turns as the API would: the event
// sequence, sequence numbers 0…n-1, item ids, deltas adding up to the text and the
// arguments, and response.completed carrying the turn as it is.
func TestResponsesSynthesizedStream(t *testing.T) {
	lib := responsesLibrary(t)
	srv := httptest.NewServer(lib.Handler())
	defer srv.Close()
	turns := lib.byPro[Responses][0].Turns
	tests := []struct {
		name, body string
		turn       json.RawMessage
		events     []string
		text, args string
	}{
		{"reasoning, text and a call", `{"stream": true, "input": "count the words"}`, turns[0], []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.reasoning_summary_part.added", "response.reasoning_summary_text.delta",
			"response.reasoning_summary_text.done", "response.reasoning_summary_part.done", "response.output_item.done",
			"response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
			"response.completed"}, "Let me count the words of the file for you.", `{"cmd":"wc -w a.txt"}`},
		{"a message without ids", `{"stream": true, "input": ` + codexTurn1 + `}`, turns[1], []string{
			"response.created", "response.in_progress",
			"response.output_item.added", "response.content_part.added", "response.output_text.delta",
			"response.output_text.done", "response.content_part.done", "response.output_item.done",
			"response.completed"}, "Three words.", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var names []string
			var text, args strings.Builder
			itemIDs := map[int]string{} // output_index → the id output_item.added gave
			for i, ev := range postStream(t, srv.URL+"/v1/responses", tt.body) {
				var d responseEvent
				if err := json.Unmarshal([]byte(ev.data), &d); err != nil {
					t.Fatalf("event %d: %v: %s", i, err, ev.data)
				}
				if d.Type != ev.event || d.Seq == nil || *d.Seq != i {
					t.Errorf("event %d: event %q, data type %q, sequence_number %v", i, ev.event, d.Type, d.Seq)
				}
				names = append(names, ev.event)
				switch ev.event {
				case "response.created", "response.in_progress":
					var r struct {
						ID, Status string
						Output     []any
					}
					json.Unmarshal(d.Response, &r)
					if r.ID == "" || r.Status != "in_progress" || r.Output == nil || len(r.Output) != 0 {
						t.Errorf("%s: response %s", ev.event, d.Response)
					}
				case "response.output_item.added":
					var it struct{ ID string }
					json.Unmarshal(d.Item, &it)
					if it.ID == "" {
						t.Errorf("item without id: %s", d.Item)
					}
					itemIDs[d.OutputIndex] = it.ID
				case "response.output_text.delta":
					text.WriteString(d.Delta)
				case "response.output_text.done":
					if d.Text != text.String() {
						t.Errorf("output_text.done %q, deltas %q", d.Text, text.String())
					}
				case "response.function_call_arguments.delta":
					args.WriteString(d.Delta)
				case "response.function_call_arguments.done":
					if d.Arguments != args.String() {
						t.Errorf("arguments.done %q, deltas %q", d.Arguments, args.String())
					}
				case "response.completed":
					if !jsonEqual(t, d.Response, tt.turn) {
						t.Errorf("response.completed carries %s, want the turn %s", d.Response, tt.turn)
					}
				}
				if d.ItemID != "" && d.ItemID != itemIDs[d.OutputIndex] {
					t.Errorf("%s: item_id %q, output_item.added said %q", ev.event, d.ItemID, itemIDs[d.OutputIndex])
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.events, ",") {
				t.Errorf("events\n%v\nwant\n%v", names, tt.events)
			}
			if text.String() != tt.text || args.String() != tt.args {
				t.Errorf("text %q, arguments %q; want %q, %q", text.String(), args.String(), tt.text, tt.args)
			}
		})
	}
}

// TestSynthesizeResponsesStatus ends the stream with the event the response's status
// calls for.
func TestSynthesizeResponsesStatus(t *testing.T) {
	for status, want := range map[string]string{"completed": "response.completed", "": "response.completed",
		"incomplete": "response.incomplete", "failed": "response.failed"} {
		evs, err := synthesizeResponses(json.RawMessage(`{"id": "r", "status": "` + status + `", "output": [{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]}]}`))
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, ev := range evs {
			names = append(names, ev.Event)
		}
		if names[len(names)-1] != want || !strings.Contains(strings.Join(names, ","), "response.refusal.delta,response.refusal.done") {
			t.Errorf("status %q: events %v", status, names)
		}
	}
	if _, err := synthesizeResponses(json.RawMessage(`{"output": {}}`)); err == nil {
		t.Error("an output that is not a list was streamed")
	}
}

// TestResponsesRecordedStream serves a streamed cassette event by event, in order, each
// after its delay.
func TestResponsesRecordedStream(t *testing.T) {
	h := responsesLibrary(t).Handler()
	var mu sync.Mutex
	var order []int
	h.BeforeEvent = func(_ *http.Request, i, _ int) {
		mu.Lock()
		order = append(order, i)
		mu.Unlock()
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	start := time.Now()
	evs := postStream(t, srv.URL+"/v1/responses", `{"stream": true, "input": [`+codexPrelude+`, {"role": "user", "content": "stream me"}]}`)
	elapsed := time.Since(start)
	var names, text []string
	for _, ev := range evs {
		var d responseEvent
		json.Unmarshal([]byte(ev.data), &d)
		names = append(names, ev.event)
		text = append(text, d.Delta)
	}
	want := []string{"response.created", "response.output_text.delta", "response.output_text.delta", "response.completed"}
	if !reflect.DeepEqual(names, want) || strings.Join(text, "") != "Hello" {
		t.Errorf("events %v, text %q", names, strings.Join(text, ""))
	}
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(order, []int{0, 1, 2, 3}) {
		t.Errorf("events written in the order %v", order)
	}
	if elapsed < 10*time.Millisecond { // the two 5 ms delays were waited
		t.Errorf("stream took %v, less than its delays", elapsed)
	}

	// The stream's response id is remembered: continuing it asks for turn 1, which the
	// conversation does not have.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/responses", strings.NewReader(`{"stream": true, "previous_response_id": "resp_s", "input": [{"role": "user", "content": "go on"}]}`)))
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), `conversation \"stream me\" in r.json has 1 turn(s), the request asks for turn 1`) {
		t.Errorf("continuing the stream: %d %s", rec.Code, rec.Body)
	}
}

// TestRecorderResponses records a Codex-like exchange over the Responses API from a
// fake upstream on 127.0.0.1 — a streamed first turn, a whole second — and replays it:
// the match is the task, not Codex's context, and the key is in no cassette.
func TestRecorderResponses(t *testing.T) {
	const key = "sk-proj-SECRET-0123456789"
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/responses" || r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "wrong path or key", http.StatusNotFound)
			return
		}
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write([]byte("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"status\":\"in_progress\",\"output\":[]}}\n\n"))
			w.(http.Flusher).Flush()
			w.Write([]byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"m\",\"output_index\":0,\"content_index\":0,\"delta\":\"echo " + key + "\"}\n\n"))
			w.Write([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[]}}\n\n"))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"resp_2","object":"response","status":"completed","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}]}`))
	}))
	defer upstream.Close()
	dir := filepath.Join(t.TempDir(), "rec")
	rc, err := NewRecorder(upstream.URL, dir)
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	rc.OnRecord = func(file string, turn int, err error) {
		if err != nil {
			t.Errorf("turn %d not recorded: %v", turn, err)
		}
		recorded = append(recorded, filepath.Base(file))
	}
	front := httptest.NewServer(rc)
	defer front.Close()
	turn0 := `{"stream":true,"input":[` + codexPrelude + `,{"type":"message","role":"user","content":[{"type":"input_text","text":"record me"}]}]}`
	turn1 := `{"input":[` + codexPrelude + `,{"type":"message","role":"user","content":[{"type":"input_text","text":"record me"}]},
		{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"x"}]}`
	// The third continues the second by its id, as clients that let the API store
	// responses do: it is turn 2 of the same conversation.
	turn2 := `{"previous_response_id":"resp_2","input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"and then?"}]}]}`
	for i, body := range []string{turn0, turn1, turn2} {
		req, _ := http.NewRequest("POST", front.URL+"/v1/responses", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || (i == 0 && !strings.Contains(string(b), "event: response.completed")) || (i > 0 && !strings.Contains(string(b), `"done"`)) {
			t.Fatalf("turn %d through the recorder: %d %s", i, resp.StatusCode, b)
		}
	}
	if len(recorded) != 3 || recorded[0] != "recorded-openai-responses.json" {
		t.Errorf("recorded into %v", recorded)
	}
	if q, ok := rc.chain.lookup("resp_1"); !ok || q.first != "record me" || q.turn != 0 {
		t.Errorf("the streamed answer's id was remembered as %+v, %v", q, ok)
	}
	data, err := os.ReadFile(filepath.Join(dir, "recorded-openai-responses.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c Cassette
	if err := json.Unmarshal(data, &c); err != nil {
		t.Fatal(err)
	}
	if c.Provider != Responses || len(c.Conversations) != 1 || c.Conversations[0].Match != "record me" || len(c.Conversations[0].Turns) != 3 {
		t.Fatalf("cassette:\n%s", data)
	}
	if strings.Contains(string(data), "SECRET") || !strings.Contains(string(data), redacted) {
		t.Fatalf("the cassette holds the key, or does not show it redacted:\n%s", data)
	}

	lib, err := Load(dir)
	if err != nil {
		t.Fatalf("loading the recording: %v", err)
	}
	srv := httptest.NewServer(lib.Handler())
	defer srv.Close()
	evs := postStream(t, srv.URL+"/v1/responses", turn0)
	if len(evs) != 3 || evs[0].event != "response.created" || evs[2].event != "response.completed" {
		t.Errorf("replayed stream %+v", evs)
	}
	resp, err := http.Post(srv.URL+"/v1/responses", "application/json", strings.NewReader(turn1))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"resp_2"`) {
		t.Errorf("replayed turn 1: %d %s", resp.StatusCode, b)
	}
}
