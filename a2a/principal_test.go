package a2a

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// callAs is call with a bearer token.
func callAs(t *testing.T, srv *httptest.Server, version, token, method string, params any) rpcResp {
	t.Helper()
	headers := map[string]string{"Authorization": "Bearer " + token}
	if version != "" {
		headers["A2A-Version"] = version
	}
	resp, body := post(t, srv, headers, request(method, params))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", method, resp.StatusCode, body)
	}
	var r rpcResp
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("%s: %v: %s", method, err, body)
	}
	return r
}

// dialectMethods names each operation in one JSON-RPC dialect.
type dialectMethods struct {
	version                            string
	send, get, cancel, subscribe, list string
	msg                                func(string, ...string) map[string]any
	returnNow                          map[string]any // the send configuration that does not wait
	taskOf                             func(*testing.T, json.RawMessage) tObj
	wantState                          func(string) string
}

var bothDialects = []dialectMethods{
	{version: "", send: "message/send", get: "tasks/get", cancel: "tasks/cancel", subscribe: "tasks/resubscribe",
		msg: msg03, returnNow: map[string]any{"blocking": false},
		taskOf:    func(t *testing.T, raw json.RawMessage) tObj { return decode[tObj](t, raw) },
		wantState: func(s string) string { return s }},
	{version: "1.0", send: "SendMessage", get: "GetTask", cancel: "CancelTask", subscribe: "SubscribeToTask", list: "ListTasks",
		msg: msg10, returnNow: map[string]any{"returnImmediately": true},
		taskOf:    func(t *testing.T, raw json.RawMessage) tObj { return *decode[tWrap](t, raw).Task },
		wantState: v10.wireState},
}

// TestPrincipalsSeeOnlyTheirTasks: with a token per principal, B cannot see, cancel,
// subscribe to, list, or answer A's task, in either dialect; B's use of A's context id is
// B's own context (it runs beside A's task instead of being refused as busy).
func TestPrincipalsSeeOnlyTheirTasks(t *testing.T) {
	for _, dm := range bothDialects {
		t.Run("A2A "+dm.version, func(t *testing.T) {
			exec := newBlocking()
			_, srv := newServer(t, Config{Executor: exec, Tokens: []Token{{Name: "team-a", Secret: "tok-a"}, {Name: "team-b", Secret: "tok-b"}}})
			sendA := callAs(t, srv, dm.version, "tok-a", dm.send, map[string]any{"message": dm.msg("hi", "contextId=shared"), "configuration": dm.returnNow})
			a := dm.taskOf(t, ok(t, sendA))
			if job := recv(t, exec.started); job.Principal != "team-a" || job.ContextID != "shared" {
				t.Fatalf("A's job runs as %q in %q", job.Principal, job.ContextID)
			}

			id := map[string]any{"id": a.ID}
			fails(t, callAs(t, srv, dm.version, "tok-b", dm.get, id), codeTaskNotFound)
			fails(t, callAs(t, srv, dm.version, "tok-b", dm.cancel, id), codeTaskNotFound)
			fails(t, callAs(t, srv, dm.version, "tok-b", dm.send, map[string]any{"message": dm.msg("me too", "taskId="+a.ID)}), codeTaskNotFound)
			ev := next(t, streamWith(t, srv, dm.version, dm.subscribe, id, map[string]string{"Authorization": "Bearer tok-b"}))
			if ev.Data.Error == nil || ev.Data.Error.Code != codeTaskNotFound {
				t.Fatalf("B's subscribe to A's task: %+v", ev.Data)
			}
			if dm.list != "" {
				for _, tc := range []struct {
					token string
					want  int
				}{{"tok-b", 0}, {"tok-a", 1}} {
					res := decode[listResultT](t, ok(t, callAs(t, srv, dm.version, tc.token, dm.list, map[string]any{})))
					if len(res.Tasks) != tc.want || res.TotalSize != tc.want {
						t.Errorf("ListTasks as %s: %d tasks (total %d), want %d", tc.token, len(res.Tasks), res.TotalSize, tc.want)
					}
				}
			}
			// B in the same context id: its own context, so single acceptance does not
			// refuse it as busy, and its job runs as B.
			sendB := callAs(t, srv, dm.version, "tok-b", dm.send, map[string]any{"message": dm.msg("hello", "contextId=shared"), "configuration": dm.returnNow})
			b := dm.taskOf(t, ok(t, sendB))
			if b.Status.State == dm.wantState(stateRejected) {
				t.Fatalf("B's task in A's context id was rejected: %+v", b.Status)
			}
			if job := recv(t, exec.started); job.Principal != "team-b" || job.ContextID != "shared" {
				t.Fatalf("B's job runs as %q in %q", job.Principal, job.ContextID)
			}
			// A still sees and cancels its own task.
			ok(t, callAs(t, srv, dm.version, "tok-a", dm.get, id))
			ok(t, callAs(t, srv, dm.version, "tok-a", dm.cancel, id))
			exec.release <- "done"
		})
	}
}

type listResultT struct {
	Tasks     []tObj `json:"tasks"`
	TotalSize int    `json:"totalSize"`
}

// TestPrincipalFromProxy: without tokens, Config.Principal (Caddy's http.auth.user.id)
// names the caller; callers it names nothing for are the anonymous principal.
func TestPrincipalFromProxy(t *testing.T) {
	exec := &echoExec{}
	_, srv := newServer(t, Config{Executor: exec, Principal: func(r *http.Request) string { return r.Header.Get("X-Test-User") }})
	as := func(user, method string, params any) rpcResp {
		resp, body := post(t, srv, map[string]string{"A2A-Version": "1.0", "X-Test-User": user}, request(method, params))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("HTTP %d", resp.StatusCode)
		}
		return decode[rpcResp](t, body)
	}
	task := decode[tWrap](t, ok(t, as("alice", "SendMessage", map[string]any{"message": msg10("hi")}))).Task
	fails(t, as("bob", "GetTask", map[string]any{"id": task.ID}), codeTaskNotFound)
	fails(t, as("", "GetTask", map[string]any{"id": task.ID}), codeTaskNotFound)
	ok(t, as("alice", "GetTask", map[string]any{"id": task.ID}))
	if got := exec.recorded()[0].Principal; got != "alice" {
		t.Errorf("job principal %q, want alice", got)
	}
	// The extended card: alice is authenticated, the anonymous caller is not.
	ok(t, as("alice", "GetExtendedAgentCard", map[string]any{}))
	fails(t, as("", "GetExtendedAgentCard", map[string]any{}), codeNoExtendedCard)
}

// TestTokens covers token checks: a request without a known token is refused 401, each
// known token works, and bad token configurations are refused with their reason.
func TestTokens(t *testing.T) {
	exec := &echoExec{}
	_, srv := newServer(t, Config{Executor: exec, Bearer: "shared", Tokens: []Token{{Name: "team-a", Secret: "tok-a"}}})
	for _, tc := range []struct {
		auth string
		want int
	}{
		{"", http.StatusUnauthorized},
		{"Bearer nope", http.StatusUnauthorized},
		{"Basic dG9rLWE=", http.StatusUnauthorized},
		{"Bearer tok-a", http.StatusOK},
		{"Bearer shared", http.StatusOK},
		{"bearer  tok-a ", http.StatusOK},
	} {
		resp, _ := post(t, srv, map[string]string{"Authorization": tc.auth}, request("tasks/get", map[string]any{"id": "x"}))
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: HTTP %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	// The shared token is the anonymous principal, authenticated: the extended card is
	// served; the 0.3 name works too.
	card := ok(t, callAs(t, srv, "", "shared", "agent/getAuthenticatedExtendedCard", map[string]any{}))
	if !strings.Contains(string(card), `"name":"hello"`) {
		t.Errorf("extended card: %s", card)
	}

	for _, tc := range []struct {
		name   string
		tokens []Token
		bearer string
		want   string
	}{
		{"empty name", []Token{{Name: "", Secret: "x"}}, "", "principal name"},
		{"duplicate name", []Token{{Name: "a", Secret: "x"}, {Name: "a", Secret: "y"}}, "", "used twice"},
		{"empty secret", []Token{{Name: "a"}}, "", "is empty"},
		{"space in secret", []Token{{Name: "a", Secret: "x y"}}, "", "whitespace"},
		{"shared secret", []Token{{Name: "a", Secret: "x"}, {Name: "b", Secret: "x"}}, "", "same secret"},
		{"secret of the shared token", []Token{{Name: "a", Secret: "s"}}, "s", "same secret"},
		{"control character in name", []Token{{Name: "a\x01", Secret: "x"}}, "", "control characters"},
	} {
		_, err := NewHandler(Config{Card: testCard(), Executor: exec, Bearer: tc.bearer, Tokens: tc.tokens})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), CodeBearerToken) {
			t.Errorf("%s: %v, want %s saying %q", tc.name, err, CodeBearerToken, tc.want)
		}
	}
}

// TestContextKey: the anonymous principal keeps the context id itself; named principals
// get keys no client id can spell, and distinct ones.
func TestContextKey(t *testing.T) {
	if k := contextKey("", "ctx-1"); k != "ctx-1" {
		t.Errorf("anonymous key %q", k)
	}
	a, b := contextKey("team-a", "ctx-1"), contextKey("team-b", "ctx-1")
	if a == b || validID(a) || validID(b) {
		t.Errorf("keys %q and %q: must differ and be invalid as client ids", a, b)
	}
	long := contextKey(strings.Repeat("p", 10000), strings.Repeat("c", maxIDLen))
	if len(long) > maxIDLen+20 {
		t.Errorf("a long principal's key is %d bytes", len(long))
	}
}
