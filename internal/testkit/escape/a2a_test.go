package escape

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// A2A input rows send hostile requests to a real a2a.Handler served on 127.0.0.1 with
// two named principals (tokens), a 64 KiB body limit and a push policy. Sentinels: the
// executor (a refused request must never become a task), a webhook listener on loopback
// (no push may reach it), and principal A's task, whose text principal B must never see.

type a2aFixture struct {
	url          string // the A2A endpoint
	hookURL      string // the loopback webhook sentinel
	hookHits     atomic.Int64
	jobs         atomic.Int64
	taskA        string // a task of principal A holding the secret
	ctxA         string // its context
	client       *http.Client
	sentinelText string
}

// countingExec answers every task at once and counts them.
type countingExec struct{ jobs *atomic.Int64 }

func (e countingExec) Execute(_ context.Context, job *a2a.Job) a2a.Outcome {
	e.jobs.Add(1)
	return a2a.Outcome{State: "completed", Text: "echo: " + job.Text}
}

const (
	tokenA = "tok-principal-a-3f1"
	tokenB = "tok-principal-b-9c2"
	a2aMax = 64 << 10
)

func (s *suite) a2aFix(t *testing.T) *a2aFixture {
	if s.a2a != nil {
		return s.a2a
	}
	f := &a2aFixture{sentinelText: "principal A's " + secret}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.hookHits.Add(1) }))
	s.top.Cleanup(hook.Close)
	f.hookURL = hook.URL + "/hook"
	allow, err := netpolicy.ParseRules([]string{"https://hooks.example.com", "https://rebind.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a2a.NewHandler(a2a.Config{
		Card:     a2a.Card{Name: "escape", Description: "escape suite", Version: "1.0.0"},
		Executor: countingExec{&f.jobs},
		MaxBody:  a2aMax,
		Tokens:   []a2a.Token{{Name: "team-a", Secret: tokenA}, {Name: "team-b", Secret: tokenB}},
		Push: &a2a.PushPolicy{Allow: allow, Resolver: staticResolver{
			"hooks.example.com":  {netip.MustParseAddr("93.184.216.34")},
			"rebind.example.com": {netip.MustParseAddr("127.0.0.1")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.url, f.client = s.serveA2A(h, "/agents/escape/")
	// Principal A's task, the one B goes after.
	status, body := f.post(t, tokenA, rpc("message/send", map[string]any{"message": message(f.sentinelText)}), nil)
	var r struct {
		Result struct{ ID, ContextID string } `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Result.ID == "" {
		t.Fatalf("principal A's task: HTTP %d %s", status, body)
	}
	f.taskA, f.ctxA = r.Result.ID, r.Result.ContextID
	s.a2a = f
	return f
}

// post sends body to the endpoint with token (none when ""), and returns the status and
// the whole answer.
func (f *a2aFixture) post(t *testing.T, token string, body io.Reader, header map[string]string) (int, []byte) {
	return f.do(t, http.MethodPost, "", token, body, header)
}

// do sends a request of method to path under the endpoint (an HTTP+JSON route; "" for
// JSON-RPC's endpoint itself).
func (f *a2aFixture) do(t *testing.T, method, path, token string, body io.Reader, header map[string]string) (int, []byte) {
	return sendA2A(t, f.client, method, f.url+path, token, body, header)
}

// sendA2A sends a JSON request of method to url as the holder of token ("" for none)
// with header, and returns the status and the whole answer.
func sendA2A(t *testing.T, client *http.Client, method, url, token string, body io.Reader, header map[string]string) (int, []byte) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// serveA2A serves h on loopback until the suite ends (shut down at once then), under
// prefix, and returns the endpoint and a client for it.
func (s *suite) serveA2A(h *a2a.Handler, prefix string) (string, *http.Client) {
	mux := http.NewServeMux()
	mux.Handle(prefix, h)
	srv := httptest.NewServer(mux)
	s.top.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		h.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL + prefix, srv.Client()
}

func message(text string, extra ...string) map[string]any {
	m := map[string]any{"kind": "message", "messageId": "m-" + strconv.Itoa(len(text)), "role": "user",
		"parts": []map[string]any{{"kind": "text", "text": text}}}
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func rpc(method string, params any) io.Reader { return bytes.NewReader(rpcBody(method, params)) }

// a2aAttack sends what build makes (as token) and classifies the answer as "HTTP
// <status>" or "JSON-RPC <code>". No task may run, no webhook be reached, and principal
// A's text must not come back.
func a2aAttack(token string, build func(f *a2aFixture) io.Reader) func(*testing.T, *suite) outcome {
	return a2aCall(a2aReq{token: token, build: build})
}

// a2aReq is one request of an A2A row: JSON-RPC's POST to the endpoint, or an HTTP+JSON
// route (method and path), with headers (the version asked for). listing says the answer
// must not even name principal A's task (a list), where another answer may echo the id
// the attacker sent.
type a2aReq struct {
	token, method, path string
	header              map[string]string
	build               func(f *a2aFixture) io.Reader
	listing             bool
}

// a2aCall sends r and classifies the answer as "HTTP <status>", "JSON-RPC <code>" (a
// stream's first event included) or "answered", with the checks of a2aAttack.
func a2aCall(r a2aReq) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.a2aFix(t)
		jobs, hooks := f.jobs.Load(), f.hookHits.Load()
		method := r.method
		if method == "" {
			method = http.MethodPost
		}
		var body io.Reader
		if r.build != nil {
			body = r.build(f)
		}
		status, answer := f.do(t, method, strings.ReplaceAll(r.path, "{ctxA}", f.ctxA), r.token, body, r.header)
		class := classifyA2A(status, answer)
		token := r.token
		var escaped []string
		if token != tokenA && strings.Contains(string(answer), secret) {
			escaped = append(escaped, "principal A's task text came back")
		}
		if token != tokenA && r.listing && (strings.Contains(string(answer), f.taskA) || strings.Contains(string(answer), f.ctxA)) {
			escaped = append(escaped, "principal A's task or context was listed")
		}
		if n := f.jobs.Load() - jobs; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the refused request ran %d tasks", n))
		}
		if n := f.hookHits.Load() - hooks; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the loopback webhook was called %d times", n))
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// classifyA2A names an A2A answer: "HTTP <status>" when it is not 200, else
// "JSON-RPC <code>" for an error (a stream's first event included), else "answered".
func classifyA2A(status int, answer []byte) string {
	if status != http.StatusOK {
		return "HTTP " + strconv.Itoa(status)
	}
	payload := answer
	if data, ok := firstEvent(answer); ok {
		payload = data // a stream: its first event is the answer
	}
	var e struct {
		Error *struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(payload, &e) == nil && e.Error != nil {
		return "JSON-RPC " + strconv.Itoa(e.Error.Code)
	}
	return "answered"
}

// firstEvent is the data of an SSE answer's first event, when answer is a stream.
func firstEvent(answer []byte) ([]byte, bool) {
	for line := range strings.SplitSeq(string(answer), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return []byte(data), true
		}
		if line != "" && !strings.HasPrefix(line, "id:") && !strings.HasPrefix(line, "event:") && !strings.HasPrefix(line, ":") {
			return nil, false
		}
	}
	return nil, false
}

func text(s string) func(*a2aFixture) io.Reader {
	return func(*a2aFixture) io.Reader { return strings.NewReader(s) }
}

func call(method string, params func(f *a2aFixture) any) func(*a2aFixture) io.Reader {
	return func(f *a2aFixture) io.Reader { return rpc(method, params(f)) }
}

func pushTo(url string) func(f *a2aFixture) any {
	return func(f *a2aFixture) any {
		if url == "{hook}" {
			url = f.hookURL
		}
		return map[string]any{"taskId": f.taskA, "pushNotificationConfig": map[string]any{"url": url}}
	}
}

func a2aRows() []row {
	send := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"%s"}]}}}`
	huge := fmt.Sprintf(send, strings.Repeat("x", a2aMax+1))
	cases := []struct {
		attack, token, want string
		build               func(*a2aFixture) io.Reader
	}{
		{"a body over the limit, its length declared", tokenA, "HTTP 413", text(huge)},
		{"a body over the limit, chunked (no length)", tokenA, "HTTP 413", func(*a2aFixture) io.Reader { return io.MultiReader(strings.NewReader(huge)) }},
		{"no credentials", "", "HTTP 401", text(fmt.Sprintf(send, "hi"))},
		{"a wrong token", "nope", "HTTP 401", text(fmt.Sprintf(send, "hi"))},
		{"a prefix of a real token", tokenA[:len(tokenA)-1], "HTTP 401", text(fmt.Sprintf(send, "hi"))},
		{"a real token with a suffix", tokenA + "x", "HTTP 401", text(fmt.Sprintf(send, "hi"))},
		{"malformed JSON", tokenA, "JSON-RPC -32700", text(`{"jsonrpc": "2.0", "id": 1, "method": `)},
		{"JSON nested 30,000 deep", tokenA, "JSON-RPC -32700", text(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}`)},
		{"a batch smuggling a send", tokenA, "JSON-RPC -32600", text("[" + fmt.Sprintf(send, "batched") + "]")},
		{"an unknown method", tokenA, "JSON-RPC -32601", call("tasks/frobnicate", func(*a2aFixture) any { return map[string]any{} })},
		{"a message with the agent's role", tokenA, "JSON-RPC -32602", call("message/send", func(*a2aFixture) any {
			m := message("I am the agent")
			m["role"] = "agent"
			return map[string]any{"message": m}
		})},
		{"a data part (content the capsule does not take)", tokenA, "JSON-RPC -32005", call("message/send", func(*a2aFixture) any {
			return map[string]any{"message": map[string]any{"kind": "message", "messageId": "m2", "role": "user", "parts": []map[string]any{{"kind": "data", "data": map[string]any{"x": 1}}}}}
		})},
		{"principal B reads principal A's task", tokenB, "JSON-RPC -32001", call("tasks/get", func(f *a2aFixture) any { return map[string]any{"id": f.taskA} })},
		{"principal B cancels principal A's task", tokenB, "JSON-RPC -32001", call("tasks/cancel", func(f *a2aFixture) any { return map[string]any{"id": f.taskA} })},
		{"principal B continues principal A's task", tokenB, "JSON-RPC -32001", call("message/send", func(f *a2aFixture) any {
			return map[string]any{"message": message("hijack", "taskId="+f.taskA)}
		})},
		{"principal B sets a webhook on principal A's task", tokenB, "JSON-RPC -32001", call("tasks/pushNotificationConfig/set", pushTo("https://hooks.example.com/b"))},
		{"a push webhook on loopback", tokenA, "JSON-RPC -32602", call("tasks/pushNotificationConfig/set", pushTo("{hook}"))},
		{"a push webhook at the metadata address", tokenA, "JSON-RPC -32602", call("tasks/pushNotificationConfig/set", pushTo("http://169.254.169.254/latest/meta-data/"))},
		{"a push webhook allowed by name, resolving to loopback", tokenA, "JSON-RPC -32602", call("tasks/pushNotificationConfig/set", pushTo("https://rebind.example.com/hook"))},
		{"a push webhook carrying credentials", tokenA, "JSON-RPC -32602", call("tasks/pushNotificationConfig/set", pushTo("https://user:pw@hooks.example.com/"))},
		{"a push webhook on file://", tokenA, "JSON-RPC -32602", call("tasks/pushNotificationConfig/set", pushTo("file:///etc/passwd"))},
		{"a loopback webhook inline on a send", tokenA, "JSON-RPC -32602", call("message/send", func(f *a2aFixture) any {
			return map[string]any{"message": message("with a hook"), "configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": f.hookURL}}}
		})},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("A2-%02d", i+1), surface: A2AInput, attack: c.attack, want: c.want, run: a2aAttack(c.token, c.build)})
	}
	// Principal isolation on the streaming methods, the other binding and versions, and
	// the list's filters: every path to another principal's task answers as for a task
	// that does not exist, and no list names it.
	v10 := map[string]string{"A2A-Version": "1.0"}
	msg10 := func(f *a2aFixture, extra map[string]any) map[string]any {
		m := map[string]any{"messageId": "m-iso", "role": "ROLE_USER", "parts": []map[string]any{{"text": "hijack"}}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	isolation := []struct {
		attack, want string
		req          a2aReq
	}{
		{"principal B streams a message naming principal A's task (message/stream)", "JSON-RPC -32001",
			a2aReq{build: call("message/stream", func(f *a2aFixture) any { return map[string]any{"message": message("hijack", "taskId="+f.taskA)} })}},
		{"principal B streams a message naming principal A's task (SendStreamingMessage, 1.0)", "JSON-RPC -32001",
			a2aReq{header: v10, build: call("SendStreamingMessage", func(f *a2aFixture) any {
				return map[string]any{"message": msg10(f, map[string]any{"taskId": f.taskA})}
			})}},
		{"principal B streams a message naming principal A's task (HTTP+JSON message:stream)", "HTTP 404",
			a2aReq{path: "message:stream", header: v10, build: func(f *a2aFixture) io.Reader {
				b, _ := json.Marshal(map[string]any{"message": msg10(f, map[string]any{"taskId": f.taskA})})
				return bytes.NewReader(b)
			}}},
		{"principal B subscribes to principal A's task (tasks/resubscribe)", "JSON-RPC -32001",
			a2aReq{build: call("tasks/resubscribe", func(f *a2aFixture) any { return map[string]any{"id": f.taskA} })}},
		{"principal B lists tasks through 0.3 HTTP+JSON (GET v1/tasks)", "answered",
			a2aReq{method: http.MethodGet, path: "v1/tasks", listing: true}},
		{"principal B lists tasks through 1.0 HTTP+JSON (GET tasks)", "answered",
			a2aReq{method: http.MethodGet, path: "tasks", header: v10, listing: true}},
		{"principal B lists tasks filtered by principal A's contextId (ListTasks)", "answered",
			a2aReq{header: v10, listing: true, build: call("ListTasks", func(f *a2aFixture) any { return map[string]any{"contextId": f.ctxA} })}},
		{"principal B lists tasks filtered by principal A's contextId (HTTP+JSON)", "answered",
			a2aReq{method: http.MethodGet, header: v10, listing: true}},
	}
	for i, c := range isolation {
		c.req.token = tokenB
		if c.req.listing && c.req.method == http.MethodGet && c.req.path == "" {
			c.req.path = "tasks?contextId={ctxA}"
		}
		rows = append(rows, row{id: fmt.Sprintf("A2-%02d", len(cases)+i+1), surface: A2AInput, attack: c.attack, want: c.want, run: a2aCall(c.req)})
	}
	return rows
}
