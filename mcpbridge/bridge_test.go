package mcpbridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testTools are the tools most tests declare: one with a schema, one without.
var testTools = []Tool{
	{
		Name:        "search",
		Description: "Search the notes.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
	},
	{Name: "skill.summarize", Description: "Summarize the workdir."},
}

// echo is a Dispatch that answers with the tool's name and its input.
func echo(_ context.Context, name string, input json.RawMessage) (string, bool, error) {
	return name + " " + string(input), false, nil
}

// start starts a bridge with cfg's defaults filled for tests and closes it at cleanup.
func start(t testing.TB, cfg Config) *Bridge {
	t.Helper()
	if cfg.ServerName == "" {
		cfg.ServerName = "capsule"
	}
	if cfg.Tools == nil {
		cfg.Tools = testTools
	}
	if cfg.Dispatch == nil {
		cfg.Dispatch = echo
	}
	b, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// bearer adds the Authorization header to every request, as a harness configured with
// the bridge's token does.
type bearer struct {
	token string
	base  http.RoundTripper
}

func (rt bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+rt.token)
	return rt.base.RoundTrip(r)
}

// connect opens an SDK client session to b over Streamable HTTP and closes it at cleanup.
func connect(t testing.TB, b *Bridge) *mcp.ClientSession {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client := mcp.NewClient(&mcp.Implementation{Name: "test-harness", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint:   b.URL(),
		HTTPClient: &http.Client{Transport: bearer{token: b.Token(), base: tr}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func resultText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("content has %d items, want 1", len(res.Content))
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// TestListTools proves the bridge lists exactly the configured tools, with their
// descriptions and schemas (an empty schema becoming any object), under the server name.
func TestListTools(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tools []Tool
	}{
		{"two tools", testTools},
		{"no tools", []Tool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := start(t, Config{ServerName: "notes", ServerVersion: "1.2.3", Tools: tc.tools})
			cs := connect(t, b)
			if got := cs.InitializeResult().ServerInfo; got.Name != "notes" || got.Version != "1.2.3" {
				t.Errorf("server info %+v, want notes 1.2.3", got)
			}
			if caps := cs.InitializeResult().Capabilities; caps.Tools == nil || caps.Logging != nil || caps.Prompts != nil || caps.Resources != nil {
				t.Errorf("capabilities %+v, want tools only", caps)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			if len(res.Tools) != len(tc.tools) {
				t.Fatalf("%d tools listed, want %d", len(res.Tools), len(tc.tools))
			}
			for i, want := range tc.tools {
				got := res.Tools[i]
				if got.Name != want.Name || got.Description != want.Description {
					t.Errorf("tool %d is %q %q, want %q %q", i, got.Name, got.Description, want.Name, want.Description)
				}
				wantSchema := want.InputSchema
				if wantSchema == nil {
					wantSchema = json.RawMessage(`{"type":"object"}`)
				}
				if g, w := normJSON(t, got.InputSchema), normJSON(t, wantSchema); g != w {
					t.Errorf("tool %q schema %s, want %s", want.Name, g, w)
				}
			}
		})
	}
}

// normJSON returns v (a Go value or raw JSON) re-encoded canonically, for comparison.
func normJSON(t *testing.T, v any) string {
	t.Helper()
	raw, ok := v.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(v); err != nil {
			t.Fatal(err)
		}
	}
	var x any
	if err := json.Unmarshal(raw, &x); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(x)
	return string(out)
}

// call is what one Dispatch invocation saw.
type call struct {
	name  string
	input string
}

// TestCall proves a call reaches Dispatch with the tool's name and input and returns its
// text; that isError surfaces as a tool error; that an err is a protocol error; that
// arguments that are not an object are a tool error Dispatch never sees, absent ones the
// empty object; that an undeclared tool is an error naming it and the declared ones;
// and that OnCall hears of each call of a declared tool.
func TestCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		tool     string
		args     any
		dispatch DispatchFunc
		wantCall *call  // what Dispatch should see; nil: not called
		wantText string // the result's text, when no error
		wantTool bool   // IsError
		wantErr  string // a protocol error containing this
		wantOn   bool   // OnCall should hear of it
	}{
		{
			name: "ok", tool: "search", args: map[string]any{"q": "wasm"},
			wantCall: &call{"search", `{"q":"wasm"}`}, wantText: `search {"q":"wasm"}`, wantOn: true,
		},
		{
			name: "no arguments", tool: "skill.summarize",
			wantCall: &call{"skill.summarize", `{}`}, wantText: `skill.summarize {}`, wantOn: true,
		},
		{
			name: "tool error", tool: "search", args: map[string]any{"q": ""},
			dispatch: func(context.Context, string, json.RawMessage) (string, bool, error) { return "empty query", true, nil },
			wantCall: &call{"search", `{"q":""}`}, wantText: "empty query", wantTool: true, wantOn: true,
		},
		{
			name: "dispatch failure", tool: "search", args: map[string]any{"q": "x"},
			dispatch: func(context.Context, string, json.RawMessage) (string, bool, error) {
				return "", false, errors.New("sandbox gone")
			},
			wantCall: &call{"search", `{"q":"x"}`}, wantErr: "sandbox gone", wantOn: true,
		},
		{
			name: "dispatch panic", tool: "search", args: map[string]any{"q": "x"},
			dispatch: func(context.Context, string, json.RawMessage) (string, bool, error) { panic("bug in a hook") },
			wantCall: &call{"search", `{"q":"x"}`}, wantErr: "dispatch panicked: bug in a hook", wantOn: true,
		},
		{
			name: "array arguments", tool: "search", args: []string{"wasm"},
			wantText: "arguments must be a JSON object", wantTool: true, wantOn: true,
		},
		{
			name: "string arguments", tool: "search", args: "wasm",
			wantText: "arguments must be a JSON object", wantTool: true, wantOn: true,
		},
		{
			name: "unknown tool", tool: "rm_rf", args: map[string]any{},
			wantErr: `unknown tool "rm_rf": declared tools are search, skill.summarize`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				calls []call
				heard []string
			)
			inner := tc.dispatch
			if inner == nil {
				inner = echo
			}
			b := start(t, Config{
				Dispatch: func(ctx context.Context, name string, input json.RawMessage) (string, bool, error) {
					mu.Lock()
					calls = append(calls, call{name, string(input)})
					mu.Unlock()
					return inner(ctx, name, input)
				},
				OnCall: func(name string, dur time.Duration, isError bool) {
					mu.Lock()
					heard = append(heard, fmt.Sprintf("%s %v", name, isError))
					mu.Unlock()
				},
			})
			cs := connect(t, b)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("CallTool error %v, want one containing %q", err, tc.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("CallTool: %v", err)
				}
				if got := resultText(t, res); got != tc.wantText || res.IsError != tc.wantTool {
					t.Errorf("result %q isError=%v, want %q isError=%v", got, res.IsError, tc.wantText, tc.wantTool)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var want []call
			if tc.wantCall != nil {
				want = []call{*tc.wantCall}
			}
			if !slices.Equal(calls, want) {
				t.Errorf("Dispatch saw %v, want %v", calls, want)
			}
			var wantHeard []string
			if tc.wantOn {
				wantHeard = []string{fmt.Sprintf("%s %v", tc.tool, tc.wantTool || tc.wantErr != "")}
			}
			if !slices.Equal(heard, wantHeard) {
				t.Errorf("OnCall heard %v, want %v", heard, wantHeard)
			}
		})
	}
}

// TestHTTPRefusals proves, over raw HTTP, that the front refuses a missing or wrong token
// (401), a foreign Host or Origin (403), other methods (405, with no CORS headers), other
// paths (404) and oversized bodies (413), and lets a well-formed request through.
func TestHTTPRefusals(t *testing.T) {
	b := start(t, Config{MaxBodyBytes: 1 << 10})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(b.URL(), Path), "http://"))
	good := "Bearer " + b.Token()
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
	for _, tc := range []struct {
		name   string
		method string
		path   string
		host   string // "" keeps the URL's
		auth   []string
		origin string
		body   string
		want   int
	}{
		{name: "well-formed", auth: []string{good}, want: http.StatusOK},
		{name: "localhost host", host: "localhost:" + port, auth: []string{good}, want: http.StatusOK},
		{name: "own origin", auth: []string{good}, origin: "http://127.0.0.1:" + port, want: http.StatusOK},
		{name: "no token", want: http.StatusUnauthorized},
		{name: "wrong token", auth: []string{"Bearer " + strings.Repeat("A", len(b.Token()))}, want: http.StatusUnauthorized},
		{name: "token prefix", auth: []string{"Bearer " + b.Token()[:10]}, want: http.StatusUnauthorized},
		{name: "basic scheme", auth: []string{"Basic " + b.Token()}, want: http.StatusUnauthorized},
		{name: "two headers", auth: []string{good, good}, want: http.StatusUnauthorized},
		{name: "foreign host", host: "attacker.example:" + port, auth: []string{good}, want: http.StatusForbidden},
		{name: "other port", host: "127.0.0.1:1", auth: []string{good}, want: http.StatusForbidden},
		{name: "host without port", host: "localhost", auth: []string{good}, want: http.StatusForbidden},
		{name: "foreign origin", auth: []string{good}, origin: "http://attacker.example", want: http.StatusForbidden},
		{name: "https origin", auth: []string{good}, origin: "https://127.0.0.1:" + port, want: http.StatusForbidden},
		{name: "null origin", auth: []string{good}, origin: "null", want: http.StatusForbidden},
		{name: "PUT", method: http.MethodPut, auth: []string{good}, want: http.StatusMethodNotAllowed},
		{name: "OPTIONS preflight", method: http.MethodOptions, origin: "http://127.0.0.1:" + port, auth: []string{good}, want: http.StatusMethodNotAllowed},
		{name: "other path", path: "/admin", auth: []string{good}, want: http.StatusNotFound},
		{name: "body too large", auth: []string{good}, body: `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`, want: http.StatusRequestEntityTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := cmpOr(tc.method, http.MethodPost)
			url := b.URL()
			if tc.path != "" {
				url = strings.TrimSuffix(url, Path) + tc.path
			}
			req, err := http.NewRequest(method, url, strings.NewReader(cmpOr(tc.body, initBody)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			for _, a := range tc.auth {
				req.Header.Add("Authorization", a)
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("status %d, want %d", resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusUnauthorized && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", resp.Header.Get("WWW-Authenticate"))
			}
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("CORS header %s sent", k)
				}
			}
		})
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestRawJSONRPC proves a client that speaks the wire protocol by hand, as harness CLIs
// do, gets through initialize, the initialized notification and tools/list with the
// bearer token and the session id the server hands out.
func TestRawJSONRPC(t *testing.T) {
	b := start(t, Config{ServerName: "notes"})
	post := func(session, body string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, b.URL(), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+b.Token())
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, data
	}

	resp, data := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: status %d: %s", resp.StatusCode, data)
	}
	var init struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
			ServerInfo      struct{ Name string }
		}
	}
	decodeRPC(t, resp, data, &init)
	if init.Result.ProtocolVersion != "2025-06-18" || init.Result.ServerInfo.Name != "notes" {
		t.Fatalf("initialize result %+v", init.Result)
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatal("no Mcp-Session-Id in the initialize response")
	}

	resp, data = post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: status %d: %s", resp.StatusCode, data)
	}

	resp, data = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tools/list: status %d: %s", resp.StatusCode, data)
	}
	var list struct {
		ID     int `json:"id"`
		Result struct {
			Tools []struct{ Name string }
		}
	}
	decodeRPC(t, resp, data, &list)
	var names []string
	for _, tool := range list.Result.Tools {
		names = append(names, tool.Name)
	}
	if list.ID != 2 || !slices.Equal(names, []string{"search", "skill.summarize"}) {
		t.Fatalf("tools/list answered id %d with %v", list.ID, names)
	}
}

// decodeRPC decodes the one JSON-RPC message of a response, plain JSON or a server-sent
// event stream.
func decodeRPC(t *testing.T, resp *http.Response, data []byte, v any) {
	t.Helper()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var msg []byte
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				msg = append(msg, strings.TrimSpace(d)...)
			}
		}
		data = msg
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decoding %s: %v", data, err)
	}
}

// blocking returns a Dispatch that signals entered and then waits for its context to
// end, recording that it returned.
func blocking(entered chan<- struct{}, returned *atomic.Bool, why chan<- error) DispatchFunc {
	return func(ctx context.Context, name string, input json.RawMessage) (string, bool, error) {
		entered <- struct{}{}
		<-ctx.Done()
		why <- context.Cause(ctx)
		returned.Store(true)
		return "", false, ctx.Err()
	}
}

// TestCloseEndsInFlight proves Close cancels a call blocked in Dispatch and does not
// return before Dispatch does (here, Dispatch lingers after its cancellation until the
// test lets it go, once the rest of Close is done), fails the client's call, is
// idempotent, and leaves nothing listening.
func TestCloseEndsInFlight(t *testing.T) {
	entered, cancelled, finish := make(chan struct{}), make(chan error, 1), make(chan struct{})
	var returned atomic.Bool
	b := start(t, Config{Dispatch: func(ctx context.Context, _ string, _ json.RawMessage) (string, bool, error) {
		close(entered)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		<-finish
		returned.Store(true)
		return "", false, ctx.Err()
	}})
	cs := connect(t, b)
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": "x"}})
		done <- err
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("Dispatch's context ended with %v, want cancelled", err)
	}
	<-b.served // all of Close but the wait for Dispatch is done
	select {
	case <-closed:
		t.Fatal("Close returned while Dispatch was still running")
	default:
	}
	close(finish)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !returned.Load() {
		t.Error("Close returned before Dispatch did")
	}
	if err := <-done; err == nil {
		t.Error("the client's call succeeded after Close")
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	addr := strings.TrimSuffix(strings.TrimPrefix(b.URL(), "http://"), Path)
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after Close", addr)
	}
}

// TestClientCancelEndsCall proves a client abandoning its call (notifications/cancelled)
// cancels Dispatch's context.
func TestClientCancelEndsCall(t *testing.T) {
	entered, why := make(chan struct{}, 1), make(chan error, 1)
	var returned atomic.Bool
	b := start(t, Config{Dispatch: blocking(entered, &returned, why)})
	cs := connect(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "search", Arguments: map[string]any{}})
		done <- err
	}()
	<-entered
	cancel()
	if err := <-why; !errors.Is(err, context.Canceled) {
		t.Errorf("Dispatch's context ended with %v, want cancelled", err)
	}
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("CallTool returned %v, want cancelled", err)
	}
}

// TestStartContextEndsBridge proves that when Start's context ends, calls in flight are
// cancelled as by Close.
func TestStartContextEndsBridge(t *testing.T) {
	entered, why := make(chan struct{}, 1), make(chan error, 1)
	var returned atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := Start(ctx, Config{ServerName: "capsule", Tools: testTools, Dispatch: blocking(entered, &returned, why)})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cs := connect(t, b)
	go cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{}})
	<-entered
	cancel()
	if err := <-why; !errors.Is(err, context.Canceled) {
		t.Errorf("Dispatch's context ended with %v, want cancelled", err)
	}
}

// TestConcurrencyBound proves a call beyond MaxConcurrent waits for a slot instead of
// reaching Dispatch, and goes on once one frees.
func TestConcurrencyBound(t *testing.T) {
	var running, peak atomic.Int32
	entered := make(chan string, 2)
	release := make(chan struct{})
	waiting := make(chan struct{}, 1)
	b := start(t, Config{
		MaxConcurrent: 1,
		Dispatch: func(ctx context.Context, name string, input json.RawMessage) (string, bool, error) {
			n := running.Add(1)
			defer running.Add(-1)
			if n > peak.Load() {
				peak.Store(n)
			}
			entered <- string(input)
			<-release
			return "ok", false, nil
		},
		slotWait: func() { waiting <- struct{}{} },
	})
	cs := connect(t, b)
	errs := make(chan error, 2)
	callQ := func(q string) {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Arguments: map[string]any{"q": q}})
		errs <- err
	}
	go callQ("first")
	if got := <-entered; got != `{"q":"first"}` {
		t.Fatalf("first Dispatch saw %s", got)
	}
	go callQ("second")
	<-waiting // the second call found no slot
	if len(entered) != 0 {
		t.Fatal("the second call reached Dispatch while the first held the only slot")
	}
	close(release)
	if got := <-entered; got != `{"q":"second"}` {
		t.Fatalf("second Dispatch saw %s", got)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("CallTool: %v", err)
		}
	}
	if p := peak.Load(); p != 1 {
		t.Errorf("%d calls ran at once, want 1", p)
	}
}

// TestStartRefuses proves Start rejects configurations the SDK would panic on or a
// harness could not use, and reports a listener failure.
func TestStartRefuses(t *testing.T) {
	listenErr := errors.New("no namespace")
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no server name", Config{ServerName: "", Dispatch: echo}, "server name"},
		{"server name with dot", Config{ServerName: "a.b", Dispatch: echo}, "server name"},
		{"no dispatch", Config{ServerName: "s"}, "Dispatch is nil"},
		{"tool without name", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{}}}, "want a name"},
		{"tool name with space", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a b"}}}, "want a name"},
		{"duplicate tool", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a"}, {Name: "a"}}}, "declared twice"},
		{"schema not an object", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`[1]`)}}}, "not a JSON object"},
		{"schema null", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`null`)}}}, "not a JSON object"},
		{"schema of a string", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":"string"}`)}}}, `"type" must be "object"`},
		{"schema without type", Config{ServerName: "s", Dispatch: echo, Tools: []Tool{{Name: "a", InputSchema: json.RawMessage(`{}`)}}}, `got nothing`},
		{"negative body bound", Config{ServerName: "s", Dispatch: echo, MaxBodyBytes: -1}, "negative"},
		{"negative concurrency", Config{ServerName: "s", Dispatch: echo, MaxConcurrent: -1}, "negative"},
		{"listen fails", Config{ServerName: "s", Dispatch: echo, Listen: func() (net.Listener, error) { return nil, listenErr }}, "no namespace"},
		{"bad address", Config{ServerName: "s", Dispatch: echo, Addr: "127.0.0.1:notaport"}, "listen"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Start(context.Background(), tc.cfg)
			if err == nil {
				b.Close()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			if tc.cfg.Listen != nil && !errors.Is(err, listenErr) {
				t.Errorf("error %v does not wrap the listener's", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Start(ctx, Config{ServerName: "s", Dispatch: echo}); !errors.Is(err, context.Canceled) {
		t.Errorf("Start with a done context: %v, want cancelled", err)
	}
}

// TestListenAndToken proves a caller-made listener is used (its address in URL) and that
// every bridge gets its own token of at least 128 random bits.
func TestListenAndToken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b1 := start(t, Config{Listen: func() (net.Listener, error) { return ln, nil }})
	if want := "http://" + ln.Addr().String() + Path; b1.URL() != want {
		t.Errorf("URL %s, want %s", b1.URL(), want)
	}
	cs := connect(t, b1)
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("ListTools over the given listener: %v", err)
	}
	b2 := start(t, Config{})
	if b1.Token() == b2.Token() {
		t.Error("two bridges share a token")
	}
	for _, tok := range []string{b1.Token(), b2.Token()} {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		if err != nil || len(raw) < 16 {
			t.Errorf("token %q: %d bytes (%v), want at least 16", tok, len(raw), err)
		}
	}
}

// TestAddresses proves the URL names the listener's own address (loopback for an
// unspecified one) and that the Host values accepted are that address and the loopback
// forms of its port, nothing else.
func TestAddresses(t *testing.T) {
	loopback := []string{"127.0.0.1:5000", "localhost:5000", "[::1]:5000"}
	for _, tc := range []struct {
		addr    string
		wantURL string
		extra   string // accepted besides the loopback forms; "" for none
	}{
		{"127.0.0.1:5000", "http://127.0.0.1:5000/mcp", ""},
		{"0.0.0.0:5000", "http://127.0.0.1:5000/mcp", ""},
		{"[::]:5000", "http://127.0.0.1:5000/mcp", ""},
		{"10.200.0.1:5000", "http://10.200.0.1:5000/mcp", "10.200.0.1:5000"},
		{"[fd00::1]:5000", "http://[fd00::1]:5000/mcp", "[fd00::1]:5000"},
	} {
		t.Run(tc.addr, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			url, hosts, err := addresses(addr)
			if err != nil {
				t.Fatal(err)
			}
			if url != tc.wantURL {
				t.Errorf("URL %s, want %s", url, tc.wantURL)
			}
			want := slices.Clone(loopback)
			if tc.extra != "" {
				want = append(want, tc.extra)
			}
			var got []string
			for h := range hosts {
				got = append(got, h)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("hosts %v, want %v", got, want)
			}
		})
	}
}

// TestUnknownMessage proves the unknown-tool error lists the declared tools, at most
// maxNamesInError of them, and says so when there are none.
func TestUnknownMessage(t *testing.T) {
	var many []string
	for i := range maxNamesInError + 3 {
		many = append(many, fmt.Sprintf("t%d", i))
	}
	for _, tc := range []struct {
		name  string
		names []string
		want  string
	}{
		{"none", nil, `unknown tool "x": this server declares no tools`},
		{"two", []string{"a", "b"}, `unknown tool "x": declared tools are a, b`},
		{"capped", many, `unknown tool "x": declared tools are ` + strings.Join(many[:maxNamesInError], ", ") + " and 3 more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := (&Bridge{names: tc.names}).unknownMessage("x"); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
