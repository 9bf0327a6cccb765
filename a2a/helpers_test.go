package a2a

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/ids"
)

// watchdog bounds every wait in these tests; reaching it is a failure, never a way
// to synchronise.
const watchdog = 15 * time.Second

const prefix = "/agents/hello"

// echoExec answers "echo: <text>" (after its prefix) and streams the answer in three
// chunks.
type echoExec struct {
	prefix string
	mu     sync.Mutex
	jobs   []Job
}

func (e *echoExec) Execute(_ context.Context, job *Job) Outcome {
	e.mu.Lock()
	e.jobs = append(e.jobs, *job)
	e.mu.Unlock()
	ans := e.prefix + "echo: " + job.Text
	n := len(ans)
	for _, c := range []string{ans[:n/3], ans[n/3 : 2*n/3], ans[2*n/3:]} {
		job.Chunk(c)
	}
	return Outcome{State: "completed", Text: ans}
}

func (e *echoExec) recorded() []Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Job(nil), e.jobs...)
}

// blockingExec reports each job on started and finishes it when release is sent to,
// or, unless ignoreCtx, when its context ends (reported on ctxDone).
type blockingExec struct {
	started   chan *Job
	release   chan string // the answer to give
	ctxDone   chan string // ids of tasks whose context ended
	ignoreCtx bool
}

func newBlocking() *blockingExec {
	return &blockingExec{started: make(chan *Job, 16), release: make(chan string), ctxDone: make(chan string, 16)}
}

func (b *blockingExec) Execute(ctx context.Context, job *Job) Outcome {
	b.started <- job
	if b.ignoreCtx {
		ans := <-b.release
		if ctx.Err() != nil {
			b.ctxDone <- job.TaskID
		}
		return Outcome{State: "completed", Text: ans}
	}
	select {
	case ans := <-b.release:
		return Outcome{State: "completed", Text: ans}
	case <-ctx.Done():
		b.ctxDone <- job.TaskID
		return Outcome{State: "failed", Text: ctx.Err().Error()}
	}
}

// inputExec asks for a name and greets it; Input's errors go to errs.
type inputExec struct{ errs chan error }

func (e *inputExec) Execute(ctx context.Context, job *Job) Outcome {
	answer, err := job.Input(ctx, "what is your name?")
	name := answer.Text
	if err != nil {
		e.errs <- err
		return Outcome{State: "failed", Text: err.Error()}
	}
	return Outcome{State: "completed", Text: "hello, " + name}
}

type failingExec struct{}

func (failingExec) Execute(context.Context, *Job) Outcome {
	return Outcome{State: "failed", Text: "boom"}
}

func testCard() Card {
	return Card{Name: "hello", Description: "greets people", Version: "1.2.3",
		Skills: []Skill{{ID: "greet", Name: "Greet", Description: "says hello", Tags: []string{"demo"}}}}
}

// stopNow shuts h down at once, ending what still runs (a test's cleanup).
func stopNow(h *Handler) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = h.Shutdown(ctx)
}

// newServer serves cfg under prefix on 127.0.0.1.
func newServer(t *testing.T, cfg Config) (*Handler, *httptest.Server) {
	t.Helper()
	if cfg.Card.Name == "" {
		cfg.Card = testCard()
	}
	h, err := NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(prefix+"/", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		stopNow(h)
		srv.Close()
	})
	return h, srv
}

func endpoint(srv *httptest.Server) string { return srv.URL + prefix + "/" }

type rpcErr struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// errInfo is google.rpc.ErrorInfo as 1.0 errors carry it in data.
type errInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata"`
}

// detail returns the error's detail from data in either dialect's shape: the 0.3
// object's "error" member or the 1.0 ErrorInfo's metadata.detail ("" if neither).
func (e *rpcErr) detail() string {
	var obj map[string]any
	if json.Unmarshal(e.Data, &obj) == nil {
		s, _ := obj["error"].(string)
		return s
	}
	var infos []errInfo
	if json.Unmarshal(e.Data, &infos) == nil && len(infos) == 1 {
		return infos[0].Metadata["detail"]
	}
	return ""
}

type rpcResp struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *rpcErr         `json:"error"`
}

// post sends body to the endpoint with headers and returns the response and its body.
func post(t *testing.T, srv *httptest.Server, headers map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	return postTo(t, srv, endpoint(srv), headers, body)
}

// postTo is post to any URL of srv (a query on the endpoint, say).
func postTo(t *testing.T, srv *httptest.Server, url string, headers map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	return roundTrip(t, srv, req, headers)
}

// roundTrip sends req with headers set and returns the response and its whole body.
func roundTrip(t *testing.T, srv *httptest.Server, req *http.Request, headers map[string]string) (*http.Response, []byte) {
	t.Helper()
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func request(method string, params any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return b
}

// call makes one JSON-RPC call; version "" sends no A2A-Version header.
func call(t *testing.T, srv *httptest.Server, version, method string, params any) rpcResp {
	t.Helper()
	return callWith(t, srv, version, method, params, nil)
}

// callWith is call with more request headers.
func callWith(t *testing.T, srv *httptest.Server, version, method string, params any, headers map[string]string) rpcResp {
	t.Helper()
	h := map[string]string{}
	for k, v := range headers {
		h[k] = v
	}
	if version != "" {
		h["A2A-Version"] = version
	}
	resp, body := post(t, srv, h, request(method, params))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, body)
	}
	var r rpcResp
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s: %v: %s", method, err, body)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != "7" {
		t.Fatalf("%s: bad envelope: %s", method, body)
	}
	return r
}

// ok returns the result of a call that must succeed.
func ok(t *testing.T, r rpcResp) json.RawMessage {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("unexpected error %d: %s", r.Error.Code, r.Error.Message)
	}
	return r.Result
}

// fails checks that a call failed with code.
func fails(t *testing.T, r rpcResp, code int) {
	t.Helper()
	if r.Error == nil {
		t.Fatalf("want error %d, got result %s", code, r.Result)
	}
	if r.Error.Code != code {
		t.Fatalf("want error %d, got %d: %s", code, r.Error.Code, r.Error.Message)
	}
}

// Decoded wire shapes, one union struct for every event and task of both dialects.
type tPart struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

type tMsg struct {
	Kind      string  `json:"kind"`
	MessageID string  `json:"messageId"`
	Role      string  `json:"role"`
	TaskID    string  `json:"taskId"`
	ContextID string  `json:"contextId"`
	Parts     []tPart `json:"parts"`
}

type tStatus struct {
	State     string `json:"state"`
	Message   *tMsg  `json:"message"`
	Timestamp string `json:"timestamp"`
}

type tArtifact struct {
	ArtifactID string  `json:"artifactId"`
	Name       string  `json:"name"`
	Parts      []tPart `json:"parts"`
}

type tObj struct {
	Kind      string         `json:"kind"`
	ID        string         `json:"id"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    tStatus        `json:"status"`
	Artifacts []tArtifact    `json:"artifacts"`
	History   []tMsg         `json:"history"`
	Final     *bool          `json:"final"`
	Artifact  *tArtifact     `json:"artifact"`
	Append    bool           `json:"append"`
	LastChunk bool           `json:"lastChunk"`
	Metadata  map[string]any `json:"metadata"`
}

// tWrap is the 1.0 SendMessage result and StreamResponse.
type tWrap struct {
	Task           *tObj `json:"task"`
	StatusUpdate   *tObj `json:"statusUpdate"`
	ArtifactUpdate *tObj `json:"artifactUpdate"`
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

func text(parts []tPart) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// msg03 and msg10 build a user message in each dialect.
func msg03(text string, extra ...string) map[string]any {
	m := map[string]any{"kind": "message", "messageId": ids.New("m_"), "role": "user",
		"parts": []map[string]any{{"kind": "text", "text": text}}}
	addIDs(m, extra)
	return m
}

func msg10(text string, extra ...string) map[string]any {
	m := map[string]any{"messageId": ids.New("m_"), "role": "ROLE_USER", "parts": []map[string]any{{"text": text}}}
	addIDs(m, extra)
	return m
}

// addIDs sets taskId and contextId from "taskId=…", "contextId=…" pairs.
func addIDs(m map[string]any, extra []string) {
	for _, kv := range extra {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
}

type sseEvent struct {
	ID    uint64
	HasID bool
	Name  string
	Data  rpcResp
}

// stream opens a streaming call and delivers its events until the server ends it.
func stream(t *testing.T, srv *httptest.Server, version, method string, params any) <-chan sseEvent {
	t.Helper()
	return streamWith(t, srv, version, method, params, nil)
}

// streamWith is stream with extra request headers.
func streamWith(t *testing.T, srv *httptest.Server, version, method string, params any, headers map[string]string) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, endpoint(srv), bytes.NewReader(request(method, params)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if version != "" {
		req.Header.Set("A2A-Version", version)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("%s: HTTP %d, Content-Type %q", method, resp.StatusCode, ct)
	}
	out := make(chan sseEvent, 1024)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		for e := range parseSSE(resp.Body) {
			out <- e
		}
	}()
	return out
}

// parseSSE reads SSE events; it reports malformed data as an event with ID 0 and
// the JSON-RPC version "bad".
func parseSSE(r io.Reader) <-chan sseEvent {
	out := make(chan sseEvent)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur sseEvent
		var data []byte
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if data != nil {
					if err := json.Unmarshal(data, &cur.Data); err != nil {
						cur.Data.JSONRPC = "bad: " + string(data)
					}
					out <- cur
				}
				cur, data = sseEvent{}, nil
			case strings.HasPrefix(line, "id: "):
				n, err := strconv.ParseUint(line[4:], 10, 64)
				cur.ID, cur.HasID = n, err == nil
			case strings.HasPrefix(line, "event: "):
				cur.Name = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = []byte(line[6:])
			}
		}
	}()
	return out
}

// next returns the next event, failing if the stream ended or stalled or the event is
// malformed.
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	e := recvOpen(t, ch)
	if strings.HasPrefix(e.Data.JSONRPC, "bad") {
		t.Fatalf("malformed event data: %s", e.Data.JSONRPC)
	}
	return e
}

// recvOpen returns the next value of a stream, failing if it ended or stalled.
func recvOpen[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case e, open := <-ch:
		if !open {
			t.Fatal("the stream ended early")
		}
		return e
	case <-time.After(watchdog):
		t.Fatal("no event within the watchdog")
	}
	panic("unreachable")
}

// drain returns a stream's remaining events, failing if it does not end.
func drain[T any](t *testing.T, ch <-chan T) []T {
	t.Helper()
	var out []T
	timeout := time.After(watchdog)
	for {
		select {
		case e, open := <-ch:
			if !open {
				return out
			}
			out = append(out, e)
		case <-timeout:
			t.Fatalf("the stream did not end; got %d events", len(out))
		}
	}
}

// recv receives from ch within the watchdog.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(watchdog):
		t.Fatal("nothing received within the watchdog")
	}
	panic("unreachable")
}

// checkIDs checks that the events carry strictly increasing ids.
func checkIDs(t *testing.T, events []sseEvent) {
	t.Helper()
	var last uint64
	for i, e := range events {
		if !e.HasID {
			t.Fatalf("event %d has no id", i)
		}
		if e.ID <= last {
			t.Fatalf("event %d: id %d after %d", i, e.ID, last)
		}
		last = e.ID
	}
}

// waitState reads the task until it reaches state, through resubscribe streams rather
// than polling.
func waitState(t *testing.T, srv *httptest.Server, id, state string) tObj {
	t.Helper()
	return waitStateWith(t, srv, nil, id, state)
}

// waitStateWith is waitState with request headers (a principal's token).
func waitStateWith(t *testing.T, srv *httptest.Server, headers map[string]string, id, state string) tObj {
	t.Helper()
	deadline := time.Now().Add(watchdog)
	for time.Now().Before(deadline) {
		task := decode[tObj](t, ok(t, callWith(t, srv, "", "tasks/get", map[string]any{"id": id}, headers)))
		if task.Status.State == state {
			return task
		}
		if terminal(task.Status.State) {
			t.Fatalf("task %s is %s, want %s", id, task.Status.State, state)
		}
		events := streamWith(t, srv, "", "tasks/resubscribe", map[string]any{"id": id}, headers)
		for e := range events {
			var ev tObj
			_ = json.Unmarshal(e.Data.Result, &ev)
			if ev.Status.State == state || ev.Kind == "status-update" && ev.Final != nil && *ev.Final {
				break
			}
		}
	}
	t.Fatalf("task %s never reached %s", id, state)
	return tObj{}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return string(b)
}

// oneCtx puts a message in one fixed context: the lifecycle (single, queue) applies
// within a context, so tests of it send every message there.
const oneCtx = "contextId=ctx_one"

// execFunc is an Executor made of a function.
type execFunc func(context.Context, *Job) Outcome

func (f execFunc) Execute(ctx context.Context, job *Job) Outcome { return f(ctx, job) }
