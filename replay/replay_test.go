package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

const anthropicCassette = `{"provider": "anthropic-messages", "conversations": [
  {"match": "list the files", "turns": [
    {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": {}}], "stop_reason": "tool_use"},
    {"id": "msg_2", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "two files"}], "stop_reason": "end_turn"}]},
  {"match": "list", "turns": [{"id": "msg_shadowed"}]},
  {"match": "hello", "turns": [{"id": "msg_hello"}]}]}`

const openaiCassette = `{"provider": "openai-chat", "conversations": [
  {"match": "list the files", "turns": [
    {"id": "chatcmpl-1", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "first"}}]},
    {"id": "chatcmpl-2", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "second"}}]}]}]}`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func testLibrary(t *testing.T) *Library {
	t.Helper()
	lib, err := Load(writeFiles(t, map[string]string{
		"a.json": anthropicCassette, "o.json": openaiCassette, "README.md": "not a cassette",
	}))
	if err != nil {
		t.Fatal(err)
	}
	return lib
}

func TestHandler(t *testing.T) {
	lib := testLibrary(t)
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     []string // substrings of the response body
	}{
		{"anthropic turn 0", "POST", "/v1/messages",
			`{"model":"m","system":"s","messages":[{"role":"user","content":"please list the files here"}]}`,
			200, []string{`"id": "msg_1"`}},
		{"anthropic turn 1 with blocks", "POST", "/v1/messages",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"please"},{"type":"image"},{"type":"text","text":"list the files"}]},
			  {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]},
			  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a b"}]}]}`,
			200, []string{`"id": "msg_2"`, `"two files"`}},
		{"anthropic path prefix", "POST", "/anthropic/v1/messages",
			`{"messages":[{"role":"user","content":"hello there"}]}`, 200, []string{`"msg_hello"`}},
		{"first match wins", "POST", "/v1/messages",
			`{"messages":[{"role":"user","content":"list"}]}`, 200, []string{`"msg_shadowed"`}},
		{"openai turn 0", "POST", "/v1/chat/completions",
			`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":"list the files"}]}`,
			200, []string{`"chatcmpl-1"`}},
		{"openai turn 1 with parts", "POST", "/openai/v1/chat/completions",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"list the files"}]},{"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","tool_call_id":"x","content":"r"}]}`,
			200, []string{`"chatcmpl-2"`}},
		{"provider decided by path", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"hello"}]}`,
			404, []string{`"code":"cassette_miss"`, `\"hello\"`, "turn 0", "o.json", `\"list the files\"`}},
		{"anthropic miss", "POST", "/v1/messages",
			`{"messages":[{"role":"user","content":"something else"}]}`,
			404, []string{`"type":"error"`, `"not_found_error"`, `something else`, "turn 0", "a.json", "hello"}},
		{"turn past the end", "POST", "/v1/messages",
			`{"messages":[{"role":"user","content":"hello"},{"role":"assistant","content":"x"},{"role":"user","content":"again"}]}`,
			404, []string{"not_found_error", "1 turn(s)", "turn 1", "hello"}},
		{"openai turn past the end", "POST", "/v1/chat/completions",
			`{"messages":[{"role":"user","content":"list the files"},{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}`,
			404, []string{"cassette_miss", "turn 2", "list the files"}},
		{"wrong method", "GET", "/v1/messages", "", 405, []string{"invalid_request_error", "GET"}},
		{"bad json", "POST", "/v1/messages", `{"messages":`, 400, []string{"invalid_request_error", "not valid JSON"}},
		{"bad content", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":42}]}`, 400, []string{"messages[0].content"}},
		{"no user message", "POST", "/v1/messages", `{"messages":[]}`, 400, []string{`role \"user\"`}},
		{"unknown path", "POST", "/v1/embeddings", `{}`, 404, []string{"/v1/embeddings"}},
	}
	h := lib.Handler()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			body := rec.Body.String()
			if rec.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tt.status, body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if !json.Valid(rec.Body.Bytes()) {
				t.Errorf("body is not JSON: %s", body)
			}
			for _, w := range tt.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q: %s", w, body)
				}
			}
		})
	}
}

func TestTurnIsVerbatim(t *testing.T) {
	turn := `{"id":  "x",   "spacing": [1, 2]}`
	lib, err := Load(writeFiles(t, map[string]string{"c.json": `{"provider":"openai-chat","conversations":[{"match":"q","turns":[` + turn + `]}]}`}))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	lib.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"q"}]}`)))
	if rec.Code != 200 || rec.Body.String() != turn {
		t.Fatalf("got %d %q, want %q", rec.Code, rec.Body.String(), turn)
	}
}

func TestMissClipsLongText(t *testing.T) {
	lib := testLibrary(t)
	long := strings.Repeat("é", 300)
	rec := httptest.NewRecorder()
	lib.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"`+long+`"}]}`)))
	var e struct{ Error struct{ Message string } }
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 404 {
		t.Fatalf("%d %v %s", rec.Code, err, rec.Body)
	}
	if strings.Contains(e.Error.Message, long) || !strings.Contains(e.Error.Message, strings.Repeat("é", 100)+"…") {
		t.Errorf("searched text not clipped to 200 bytes: %s", e.Error.Message)
	}
}

func TestBodyTooLarge(t *testing.T) {
	h := testLibrary(t).Handler()
	h.maxBody = 64
	rec := httptest.NewRecorder()
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 100) + `"}]}`
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body)))
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), `"type":"error"`) {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

func TestOnRequest(t *testing.T) {
	h := testLibrary(t).Handler()
	var gotKey, gotBody string
	h.OnRequest = func(r *http.Request, body []byte) { gotKey, gotBody = r.Header.Get("x-api-key"), string(body) }
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("x-api-key", "sk-sentinel")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if gotKey != "sk-sentinel" || !strings.Contains(gotBody, "hello") {
		t.Fatalf("hook saw key %q body %q", gotKey, gotBody)
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name, file string
		code, want string
	}{
		{"bad json", `{"provider": "openai-chat", `, CodeCassette, "not a valid cassette"},
		{"unknown key", `{"provider": "openai-chat", "conversation": []}`, CodeCassette, "conversation"},
		{"trailing data", `{"provider":"openai-chat","conversations":[{"match":"a","turns":[{}]}]} {}`, CodeCassette, "data after"},
		{"unknown provider", `{"provider": "gemini", "conversations": [{"match":"a","turns":[{}]}]}`, CodeProvider, `"gemini"`},
		{"no provider", `{"conversations": [{"match":"a","turns":[{}]}]}`, CodeProvider, "no provider"},
		{"no conversations", `{"provider": "anthropic-messages", "conversations": []}`, CodeConversations, "no conversations"},
		{"empty match", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{}]},{"match":"","turns":[{}]}]}`, CodeConversation, "conversations[1]"},
		{"no turns", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[]}]}`, CodeConversation, "no turns"},
		{"turn not object", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":["hi"]}]}`, CodeConversation, "turns[0]"},
		{"stream and more", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[{"data":{}}],"id":"x"}]}]}`, CodeConversation, "only the key"},
		{"empty stream", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[]}]}]}`, CodeConversation, "no events"},
		{"event without data", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[{"event":"ping"}]}]}]}`, CodeConversation, "no data"},
		{"negative delay", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[{"delay_ms":-1,"data":{}}]}]}]}`, CodeConversation, "delay_ms"},
		{"unknown event key", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[{"delay":1,"data":{}}]}]}]}`, CodeConversation, "delay"},
		{"line break in event", `{"provider": "anthropic-messages", "conversations": [{"match":"a","turns":[{"stream":[{"event":"a\nb","data":{}}]}]}]}`, CodeConversation, "line break"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"good.json": openaiCassette, "bad.json": tt.file})
			_, err := Load(dir)
			if errs.Code(err) != tt.code || !strings.Contains(err.Error(), "bad.json") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want %s naming bad.json and %q", err, tt.code, tt.want)
			}
		})
	}
	for name, dir := range map[string]string{"missing": filepath.Join(t.TempDir(), "nope"), "empty": t.TempDir(), "unset": ""} {
		if _, err := Load(dir); errs.Code(err) != CodeDir {
			t.Errorf("%s folder: got %v, want %s", name, err, CodeDir)
		}
	}
}

func TestServe(t *testing.T) {
	lib := testLibrary(t)
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, lib, "127.0.0.1:0", func(a net.Addr) { addrc <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrc:
	case err := <-done:
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+addr.String()+"/v1/chat/completions", "application/json",
		bytes.NewReader([]byte(`{"messages":[{"role":"user","content":"list the files"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "chatcmpl-1") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v after cancel", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after cancel")
	}
	if _, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		t.Error("listener still open after shutdown")
	}
}

func TestServeListenError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := Serve(context.Background(), testLibrary(t), ln.Addr().String(), nil); errs.Code(err) != CodeListen {
		t.Fatalf("got %v, want %s", err, CodeListen)
	}
}

func TestConcurrentRequests(t *testing.T) {
	h := testLibrary(t).Handler()
	start := make(chan struct{})
	errc := make(chan string, 32)
	for i := 0; i < 32; i++ {
		go func() {
			<-start
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"hello"}]}`)))
			if rec.Code != 200 {
				errc <- rec.Body.String()
				return
			}
			errc <- ""
		}()
	}
	close(start)
	for i := 0; i < 32; i++ {
		if e := <-errc; e != "" {
			t.Error(e)
		}
	}
}
