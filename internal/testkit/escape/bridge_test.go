package escape

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/mcpbridge"
)

// MCP-bridge rows attack mcpbridge.Start's server directly, over raw HTTP as a harness
// (or anything else on the host's loopback) reaches it. The sentinel is the dispatcher
// behind it: every row but the control must leave it uncalled, and what it would answer
// carries the secret, so a call that got through also shows in the answer. Three
// bridges stand for three runs: a, the one attacked, with an initialized session; b,
// another run's, with a session of its own; and one closed before the rows.

// bridgeMaxBody is bridge a's body limit, small so the oversized row stays small.
const bridgeMaxBody = 64 << 10

// slowlorisBudget is how long after it was opened a half-sent request may hold its
// connection: the bridge's ReadHeaderTimeout (10 s) and a margin.
const slowlorisBudget = 15 * time.Second

type bridgeFixture struct {
	a, b         *mcpbridge.Bridge
	sessA, sessB string // Mcp-Session-Id of an initialized session on each
	closedURL    string // the endpoint of a bridge closed before the rows
	client       *http.Client
	slow         []net.Conn // half-sent requests, opened with the fixture
	slowOpened   time.Time
	portA        string
	mu           sync.Mutex
	calls        []string // "<bridge> <tool> <input>" of every dispatched call
}

// bridges starts the three bridges. TestEscapeSuite makes the fixture before the rows
// run, so the slow clients' clock runs while the other surfaces' rows do.
func (s *suite) bridges(t *testing.T) *bridgeFixture {
	if s.mb != nil {
		return s.mb
	}
	tr := &http.Transport{}
	s.top.Cleanup(tr.CloseIdleConnections)
	f := &bridgeFixture{client: &http.Client{Timeout: 20 * time.Second, Transport: tr}}
	tools := []mcpbridge.Tool{
		{Name: "echo", Description: "Echo the text.", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
		{Name: "notes.search", Description: "Search the notes."},
	}
	start := func(label string, maxBody int64) *mcpbridge.Bridge {
		b, err := mcpbridge.Start(context.Background(), mcpbridge.Config{ServerName: "capsule", Tools: tools, MaxBodyBytes: maxBody,
			Dispatch: func(_ context.Context, name string, input json.RawMessage) (string, bool, error) {
				f.mu.Lock()
				f.calls = append(f.calls, label+" "+name+" "+string(input))
				f.mu.Unlock()
				return "dispatched: " + secret, false, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		s.top.Cleanup(func() { b.Close() })
		return b
	}
	f.a, f.b = start("a", bridgeMaxBody), start("b", 0)
	f.closedURL = closedBridge(t, s, func() *mcpbridge.Bridge { return start("closed", 0) })
	f.sessA, f.sessB = f.initialize(t, f.a), f.initialize(t, f.b)
	_, f.portA, _ = net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(f.a.URL(), "http://"), mcpbridge.Path))
	f.slowOpened = time.Now()
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", "127.0.0.1:"+f.portA)
		if err != nil {
			t.Fatal(err)
		}
		s.top.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nX-Slow: ", f.portA, f.a.Token())
		f.slow = append(f.slow, c)
	}
	s.mb = f
	return f
}

// closedBridge starts a bridge, closes it and returns its URL, with its port held by a
// socket bound but not listening until the suite ends: a call there is refused
// (ECONNREFUSED) as after any bridge's close, and no server started meanwhile — by this
// suite or by another package's tests beside it — can take the freed port and answer
// instead. A port taken in the moment between close and bind is given up for another.
func closedBridge(t *testing.T, s *suite, start func() *mcpbridge.Bridge) string {
	for range 20 {
		b := start()
		url := b.URL()
		b.Close()
		_, portText, _ := net.SplitHostPort(strings.TrimSuffix(strings.TrimPrefix(url, "http://"), mcpbridge.Path))
		port, _ := strconv.Atoi(portText)
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			syscall.Close(fd)
			continue // taken already: try another bridge
		}
		s.top.Cleanup(func() { syscall.Close(fd) })
		return url
	}
	t.Fatal("no closed bridge's port could be held: each was taken again at once")
	return ""
}

// initialize opens a session on b as a harness does: initialize, then the initialized
// notification.
func (f *bridgeFixture) initialize(t *testing.T, b *mcpbridge.Bridge) string {
	resp, body, err := f.post(b.URL(), http.MethodPost, bridgeInit, map[string]string{"Authorization": "Bearer " + b.Token()})
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %v %v %s", err, resp, body)
	}
	sess := resp.Header.Get("Mcp-Session-Id")
	resp, body, err = f.post(b.URL(), http.MethodPost, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		map[string]string{"Authorization": "Bearer " + b.Token(), "Mcp-Session-Id": sess})
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("initialized: %v %v %s", err, resp, body)
	}
	return sess
}

const bridgeInit = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"escape","version":"1"}}}`

// post sends one request with header: a value "" deletes the header, a name "+X" adds
// a second X, and "Host" sets the Host.
func (f *bridgeFixture) post(url, method, body string, header map[string]string) (*http.Response, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	for k, v := range header {
		switch {
		case k == "Host":
			req.Host = v
		case strings.HasPrefix(k, "+"):
		case v == "":
			req.Header.Del(k)
		default:
			req.Header.Set(k, v)
		}
	}
	for k, v := range header {
		if name, ok := strings.CutPrefix(k, "+"); ok { // a second value, added after the first is set
			req.Header.Add(name, v)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, data, err
}

func (f *bridgeFixture) dispatched() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// callsSince describes the calls dispatched after the first n.
func (f *bridgeFixture) callsSince(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.calls) == n {
		return ""
	}
	return "the dispatcher ran " + strings.Join(f.calls[n:], "; ")
}

// bridgeClass names how the bridge answered: "HTTP <status>" when the HTTP front (or the
// transport) refused, "JSON-RPC <code>" for a protocol error, "tool error: <text>" for a
// call answered as a failed tool, "passed" for one that ran.
func bridgeClass(resp *http.Response, body []byte) string {
	if resp.StatusCode != http.StatusOK {
		return "HTTP " + strconv.Itoa(resp.StatusCode)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var msg []byte
		sc := bufio.NewScanner(bytes.NewReader(body))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data:"); ok {
				msg = append(msg, strings.TrimSpace(d)...)
			}
		}
		body = msg
	}
	var m struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return "unreadable answer: " + string(body)
	}
	switch {
	case m.Error != nil:
		return "JSON-RPC " + strconv.Itoa(m.Error.Code)
	case m.Result != nil && m.Result.IsError && len(m.Result.Content) > 0:
		return "tool error: " + m.Result.Content[0].Text
	case m.Result != nil:
		return "passed"
	}
	return "unreadable answer: " + string(body)
}

// bridgeReq is one raw request to a bridge. Placeholders: {token} and {tokenB} the
// bridges' tokens, {half} the first half of a's, {sessA} and {sessB} their sessions, {port} bridge a's port.
type bridgeReq struct {
	to     string // "a" (default), "b" or "closed"
	method string // POST when empty
	path   string // mcpbridge.Path when empty
	body   string
	header map[string]string
}

// bridgeAttack sends req and classifies the answer; the dispatcher must stay uncalled.
func bridgeAttack(req bridgeReq) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.bridges(t)
		r := strings.NewReplacer("{token}", f.a.Token(), "{half}", f.a.Token()[:len(f.a.Token())/2], "{tokenB}", f.b.Token(), "{sessA}", f.sessA, "{sessB}", f.sessB, "{port}", f.portA)
		url := f.a.URL()
		switch req.to {
		case "b":
			url = f.b.URL()
		case "closed":
			url = f.closedURL
		}
		if req.path != "" {
			url = strings.TrimSuffix(url, mcpbridge.Path) + req.path
		}
		header := map[string]string{}
		for k, v := range req.header {
			header[k] = r.Replace(v)
		}
		before := f.dispatched()
		method := req.method
		if method == "" {
			method = http.MethodPost
		}
		resp, body, err := f.post(url, method, r.Replace(req.body), header)
		var class string
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			class = "dial ECONNREFUSED"
		case err != nil:
			t.Fatal(err)
		default:
			class = bridgeClass(resp, body)
		}
		return outcome{class: class, escaped: join(leaked(string(body)), f.callsSince(before))}
	}
}

// slowloris checks the half-sent requests opened with the fixture: each connection is
// closed, unanswered, within ReadHeaderTimeout of its opening (a full run has waited that
// long already), while a well-formed request is served meanwhile.
func slowloris(t *testing.T, s *suite) outcome {
	f := s.bridges(t)
	before := f.dispatched()
	resp, body, err := f.post(f.a.URL(), http.MethodPost, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`,
		map[string]string{"Authorization": "Bearer " + f.a.Token(), "Mcp-Session-Id": f.sessA})
	if err != nil || resp.StatusCode != http.StatusOK {
		return outcome{class: "a well-formed request was not served beside the slow ones", escaped: fmt.Sprint(err, body)}
	}
	class := "closed unanswered"
	var escaped string
	for _, c := range f.slow {
		// A deadline already past fails the read before it looks; a closed connection
		// answers at once, so a second is margin enough then.
		deadline := f.slowOpened.Add(slowlorisBudget)
		if soon := time.Now().Add(time.Second); deadline.Before(soon) {
			deadline = soon
		}
		c.SetReadDeadline(deadline)
		n, err := c.Read(make([]byte, 512))
		switch {
		case errors.Is(err, io.EOF) && n == 0, errors.Is(err, syscall.ECONNRESET):
		case isTimeout(err):
			escaped = join(escaped, fmt.Sprintf("a half-sent request held its connection over %s", slowlorisBudget))
		default:
			class = fmt.Sprintf("answered %d bytes (%v)", n, err)
		}
	}
	return outcome{class: class, escaped: join(escaped, f.callsSince(before))}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// toolCall is a tools/call of name (raw JSON) with arguments args (raw JSON) in session a.
func toolCall(name, args string) bridgeReq {
	return bridgeReq{body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":` + name + `,"arguments":` + args + `}}`,
		header: map[string]string{"Authorization": "Bearer {token}", "Mcp-Session-Id": "{sessA}"}}
}

// with returns r with header k set to v.
func (r bridgeReq) with(k, v string) bridgeReq {
	h := map[string]string{}
	for hk, hv := range r.header {
		h[hk] = hv
	}
	h[k] = v
	r.header = h
	return r
}

// on returns r sent to another bridge.
func (r bridgeReq) on(to string) bridgeReq { r.to = to; return r }

func mcpBridgeRows() []row {
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
	inSession := func(auth string) bridgeReq {
		return bridgeReq{body: list, header: map[string]string{"Authorization": auth, "Mcp-Session-Id": "{sessA}"}}
	}
	echo := toolCall(`"echo"`, `{"text":"hi"}`)
	cases := []struct {
		attack string
		req    bridgeReq
		want   string
	}{
		{"no token", bridgeReq{body: list, header: map[string]string{"Mcp-Session-Id": "{sessA}"}}, "HTTP 401"},
		{"a wrong token of the right length", inSession("Bearer AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "HTTP 401"},
		{"the token's first half", inSession("Bearer {half}"), "HTTP 401"},
		{"the token with a suffix", inSession("Bearer {token}x"), "HTTP 401"},
		{"the token in the query string", bridgeReq{path: mcpbridge.Path + "?access_token={token}&token={token}", body: list,
			header: map[string]string{"Mcp-Session-Id": "{sessA}"}}, "HTTP 401"},
		{"the token under the Basic scheme", inSession("Basic {token}"), "HTTP 401"},
		{"the token, and a second Authorization header", inSession("Bearer {token}").with("+Authorization", "Bearer wrong"), "HTTP 401"},
		{"another run's token, with this run's session", inSession("Bearer {tokenB}"), "HTTP 401"},
		{"this run's session, on another run's bridge with its token", inSession("Bearer {tokenB}").on("b"), "HTTP 404"},
		{"end this run's session on another run's bridge (DELETE)", bridgeReq{method: http.MethodDelete, to: "b",
			header: map[string]string{"Authorization": "Bearer {tokenB}", "Mcp-Session-Id": "{sessA}"}}, "HTTP 404"},
		{"open the event stream (GET) without the token", bridgeReq{method: http.MethodGet, header: map[string]string{"Mcp-Session-Id": "{sessA}"}}, "HTTP 401"},
		{"a forged session id", echo.with("Mcp-Session-Id", "ESCAPE0000000000000000000000000"), "HTTP 404"},
		{"a call outside any session (no initialize)", echo.with("Mcp-Session-Id", ""), "JSON-RPC 0"},
		{"a foreign Host (DNS rebinding)", echo.with("Host", "attacker.example:{port}"), "HTTP 403"},
		{"a Host with another port", echo.with("Host", "127.0.0.1:1"), "HTTP 403"},
		{"a foreign Origin", echo.with("Origin", "http://attacker.example"), "HTTP 403"},
		{"a null Origin", echo.with("Origin", "null"), "HTTP 403"},
		{"its own address as an https Origin", echo.with("Origin", "https://127.0.0.1:{port}"), "HTTP 403"},
		{"PUT", bridgeReq{method: http.MethodPut, body: echo.body, header: echo.header}, "HTTP 405"},
		{"another path, climbing from the endpoint", bridgeReq{path: mcpbridge.Path + "/../admin", body: echo.body, header: echo.header}, "HTTP 404"},
		{"a body over MaxBodyBytes", toolCall(`"echo"`, `{"text":"`+strings.Repeat("x", bridgeMaxBody)+`"}`), "HTTP 413"},
		{"a batch smuggling a call of an undeclared tool beside a declared one",
			bridgeReq{body: `[` + echo.body + `,{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"rm_rf","arguments":{}}}]`, header: echo.header}, "HTTP 400"},
		{"an undeclared tool", toolCall(`"rm_rf"`, `{}`), "JSON-RPC -32602"},
		{"a tool name climbing a path", toolCall(`"../echo"`, `{}`), "JSON-RPC -32602"},
		{"a tool name with a Cyrillic look-alike", toolCall(`"\u0435cho"`, `{}`), "JSON-RPC -32602"},
		{"a tool name with a NUL", toolCall(`"echo\u0000"`, `{}`), "JSON-RPC -32602"},
		{"a tool name in other case", toolCall(`"ECHO"`, `{}`), "JSON-RPC -32602"},
		{"a tool name with the server prefix", toolCall(`"capsule__echo"`, `{}`), "JSON-RPC -32602"},
		{"a tool name that is not a string", toolCall(`["echo"]`, `{}`), "JSON-RPC -32602"},
		{"a declared name followed by an undeclared one under the same key", bridgeReq{
			body:   `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","name":"rm_rf","arguments":{}}}`,
			header: echo.header}, "JSON-RPC -32602"},
		{"arguments that are an array", toolCall(`"echo"`, `["hi"]`), "tool error: arguments must be a JSON object"},
		{"arguments that are a string", toolCall(`"echo"`, `"hi"`), "tool error: arguments must be a JSON object"},
		{"a call after the bridge closed", echo.on("closed"), "dial ECONNREFUSED"},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("MB-%02d", i+1), surface: MCPBridge, attack: c.attack, want: c.want, run: bridgeAttack(c.req)})
	}
	rows = append(rows, dispatcherRows()...)
	// Last: the longer the suite ran before it, the less it waits.
	rows = append(rows, row{id: fmt.Sprintf("MB-%02d", len(cases)+1), surface: MCPBridge, want: "closed unanswered",
		attack: "requests whose headers never end (slowloris), opened before the rows", run: slowloris})
	return rows
}

// dispatcherRows attack the real dispatcher behind a run's bridge: from inside the
// harness fixture's sandbox, as its harness, with the bridge's own token, in a session
// of its own (mcpcall). The bridge offers the capsule's one tool, echo; every other
// call must be refused without reaching the session's tool dispatch (the harness
// fixture counts its tool_call events), and the tool list must name nothing else.
func dispatcherRows() []row {
	cases := []struct{ attack, method, params, want string }{
		{"list the tools, looking for more than the capsule grants", "tools/list", `{}`, "exit 0: tools: echo"},
		{"call a shell tool the capsule has none of", "tools/call", `{"name":"shell","arguments":{"command":"cat /etc/shadow"}}`, "exit 0: JSON-RPC -32602"},
		{"call the artifact manager's pull, not granted", "tools/call", `{"name":"artifact_pull","arguments":{"name":"evil","version":"1.0.0"}}`, "exit 0: JSON-RPC -32602"},
		{"call the echo tool by a path climbing to it", "tools/call", `{"name":"../echo","arguments":{"text":"hi"}}`, "exit 0: JSON-RPC -32602"},
		{"call the echo tool in another case", "tools/call", `{"name":"ECHO","arguments":{"text":"hi"}}`, "exit 0: JSON-RPC -32602"},
		{"call the echo tool with arguments that are not an object", "tools/call", `{"name":"echo","arguments":"hi"}`, "exit 0: tool error: arguments must be a JSON object"},
		{"call a tool named by the driver's own artifact", "tools/call", `{"name":"procdriver","arguments":{}}`, "exit 0: JSON-RPC -32602"},
	}
	var rows []row
	for i, c := range cases {
		cmd := "python3 {bin}/mcpcall " + c.method + " '" + c.params + "'"
		rows = append(rows, row{id: fmt.Sprintf("MD-%02d", i+1), surface: MCPBridge, attack: "through a run's bridge to the real dispatcher: " + c.attack + ": " + cmd,
			want: c.want, need: needHarness, run: harnessAttack(cmd, 0)})
	}
	return rows
}
