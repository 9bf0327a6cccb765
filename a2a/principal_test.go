package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// callAs is call with a bearer token.
func callAs(t *testing.T, srv *httptest.Server, version, token, method string, params any) rpcResp {
	t.Helper()
	return callWith(t, srv, version, method, params, map[string]string{"Authorization": "Bearer " + token})
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
	if len(long) > 32 {
		t.Errorf("a long principal's key is %d bytes", len(long))
	}
}

// TestPrincipalName: names an authentication in front gives are kept as they are, unless
// too long or unprintable to be stored; then as a stable digest.
func TestPrincipalName(t *testing.T) {
	long := strings.Repeat("u", maxPrincipalLen+1)
	for _, tc := range []struct{ in, want string }{
		{"alice", "alice"},
		{"alice@example.com", "alice@example.com"},
		{long, principalName(long)},
		{"a\nb", principalName("a\nb")},
	} {
		got := principalName(tc.in)
		if got != tc.want || len(got) > maxPrincipalLen || !validID(got) {
			t.Errorf("principalName(%.20q) = %q", tc.in, got)
		}
	}
	if principalName(long) == principalName(long+"x") || !strings.HasPrefix(principalName(long), "sha256:") {
		t.Error("long names must map to distinct digests")
	}
}

// TestDurableOwners: owners are stored with their tasks: after a restart, and for tasks
// only the store's index still lists, B sees none of A's tasks and A sees all of them.
func TestDurableOwners(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	cfg := Config{Executor: newDurableExec(), Tokens: []Token{{Name: "team-a", Secret: "tok-a"}, {Name: "team-b", Secret: "tok-b"}}}
	g := openGenWith(t, path, cfg)
	var ids []string
	for range 2 {
		ids = append(ids, decode[tObj](t, ok(t, callAs(t, g.srv, "", "tok-a", "message/send", map[string]any{"message": msg03("hi")}))).ID)
	}
	g.stop()
	g = openGenWith(t, path, cfg)
	check := func(stage string) {
		t.Helper()
		for _, id := range ids {
			fails(t, callAs(t, g.srv, "1.0", "tok-b", "GetTask", map[string]any{"id": id}), codeTaskNotFound)
			ok(t, callAs(t, g.srv, "1.0", "tok-a", "GetTask", map[string]any{"id": id}))
		}
		for _, who := range []struct {
			token string
			want  int
		}{{"tok-b", 0}, {"tok-a", 2}} {
			res := decode[listResultT](t, ok(t, callAs(t, g.srv, "1.0", who.token, "ListTasks", map[string]any{})))
			if res.TotalSize != who.want {
				t.Errorf("%s: ListTasks as %s: %d tasks, want %d", stage, who.token, res.TotalSize, who.want)
			}
		}
	}
	check("after a restart")
	g.h.mu.Lock()
	g.h.store.(*durableStore).mem = newMemoryStore(keepFinished) // only the store knows them now
	g.h.mu.Unlock()
	res := decode[listResultT](t, ok(t, callAs(t, g.srv, "1.0", "tok-b", "ListTasks", map[string]any{})))
	if res.TotalSize != 0 {
		t.Errorf("from the index: ListTasks as team-b lists %d tasks", res.TotalSize)
	}
	res = decode[listResultT](t, ok(t, callAs(t, g.srv, "1.0", "tok-a", "ListTasks", map[string]any{})))
	if res.TotalSize != 2 {
		t.Errorf("from the index: ListTasks as team-a lists %d tasks, want 2", res.TotalSize)
	}
	check("from the store")
}

// TestPrincipalsOverREST: over HTTP+JSON, in both versions, B is answered 404 for every
// route naming A's task (read, cancel, subscribe, push configs) and lists none of A's
// tasks, while A reads, sets, lists, reads back and deletes its push config.
func TestPrincipalsOverREST(t *testing.T) {
	exec := newBlocking()
	_, srv := newServer(t, Config{Executor: exec, Tokens: []Token{{Name: "team-a", Secret: "tok-a"}, {Name: "team-b", Secret: "tok-b"}},
		Push: &PushPolicy{Allow: rules(t, "https://hooks.example.com")}})
	asA10 := map[string]string{"Authorization": "Bearer tok-a", "A2A-Version": "1.0"}
	asB10 := map[string]string{"Authorization": "Bearer tok-b", "A2A-Version": "1.0"}
	asA03 := map[string]string{"Authorization": "Bearer tok-a"}
	asB03 := map[string]string{"Authorization": "Bearer tok-b"}
	sent := restCall[tWrap](t, srv, http.MethodPost, "message:send", asA10,
		`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"returnImmediately":true}}`)
	id := sent.Task.ID
	recv(t, exec.started)
	cfg10 := `{"id":"hook-1","url":"https://hooks.example.com/a","token":"t"}`
	cfg03 := `{"name":"tasks/` + id + `/pushNotificationConfigs/hook-2","pushNotificationConfig":{"id":"hook-2","url":"https://hooks.example.com/b"}}`
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodGet, "tasks/" + id, ""},
		{http.MethodPost, "tasks/" + id + ":cancel", ""},
		{http.MethodPost, "tasks/" + id + ":subscribe", ""},
		{http.MethodGet, "tasks/" + id + ":subscribe", ""},
		{http.MethodPost, "tasks/" + id + "/pushNotificationConfigs", cfg10},
		{http.MethodGet, "tasks/" + id + "/pushNotificationConfigs", ""},
		{http.MethodGet, "tasks/" + id + "/pushNotificationConfigs/hook-1", ""},
		{http.MethodDelete, "tasks/" + id + "/pushNotificationConfigs/hook-1", ""},
	} {
		for _, v := range []struct {
			prefix  string
			headers map[string]string
			body    string
		}{{"", asB10, tc.body}, {"v1/", asB03, strings.ReplaceAll(tc.body, cfg10, cfg03)}} {
			resp, body := restDo(t, srv, tc.method, v.prefix+tc.path, v.headers, v.body)
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), id) {
				t.Errorf("B: %s %s%s: HTTP %d %s", tc.method, v.prefix, tc.path, resp.StatusCode, body)
			}
		}
	}
	for _, who := range []struct {
		headers map[string]string
		want    int
	}{{asB10, 0}, {asA10, 1}} {
		if res := restCall[listResultT](t, srv, http.MethodGet, "tasks", who.headers, ""); res.TotalSize != who.want {
			t.Errorf("GET tasks as %s: %d tasks, want %d", who.headers["Authorization"], res.TotalSize, who.want)
		}
	}
	// A's own push configs, set and read in both versions.
	restCall[map[string]any](t, srv, http.MethodPost, "tasks/"+id+"/pushNotificationConfigs", asA10, cfg10)
	restCall[map[string]any](t, srv, http.MethodPost, "v1/tasks/"+id+"/pushNotificationConfigs", asA03, cfg03)
	if got := restCall[map[string]any](t, srv, http.MethodGet, "tasks/"+id+"/pushNotificationConfigs/hook-1", asA10, ""); got["url"] != "https://hooks.example.com/a" {
		t.Errorf("A's config over 1.0: %v", got)
	}
	list := restCall[struct{ Configs []map[string]any }](t, srv, http.MethodGet, "v1/tasks/"+id+"/pushNotificationConfigs", asA03, "")
	if len(list.Configs) != 2 || !strings.HasPrefix(fmt.Sprint(list.Configs[0]["name"]), "tasks/"+id+"/pushNotificationConfigs/") {
		t.Errorf("A's configs over 0.3: %v", list.Configs)
	}
	if resp, body := restDo(t, srv, http.MethodDelete, "tasks/"+id+"/pushNotificationConfigs/hook-1", asA10, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("A deletes its config: HTTP %d %s", resp.StatusCode, body)
	}
	// A hook aimed at loopback without a rule is refused at set time over REST too.
	resp, body := restDo(t, srv, http.MethodPost, "tasks/"+id+"/pushNotificationConfigs", asA10, `{"url":"http://127.0.0.1:9/x"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "push.allow") {
		t.Errorf("a loopback hook over REST: HTTP %d %s", resp.StatusCode, body)
	}
	restCall[tObj](t, srv, http.MethodPost, "tasks/"+id+":cancel", asA10, "")
}

// TestRoutes: one handler served on two routes, each with its own Route: the closed
// route's tokens are asked for there and only there, each route's card says its own
// auth and URL, and the open route's anonymous caller sees none of team-a's tasks.
func TestRoutes(t *testing.T) {
	h, err := NewHandler(Config{Card: testCard(), Executor: &echoExec{}})
	if err != nil {
		t.Fatal(err)
	}
	closed, err := CheckRoute(Route{Tokens: []Token{{Name: "team-a", Secret: "tok-a"}}, PublicURL: "https://agents.example.com/closed/"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/open/", h)
	mux.Handle("/closed/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(WithRoute(r.Context(), &closed)))
	}))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	defer h.Shutdown(context.Background())

	send := func(path, token string) (int, rpcResp) {
		headers := map[string]string{"A2A-Version": "1.0"}
		if token != "" {
			headers["Authorization"] = "Bearer " + token
		}
		resp, body := postTo(t, srv, srv.URL+path, headers, request("SendMessage", map[string]any{"message": msg10("hi")}))
		var r rpcResp
		_ = json.Unmarshal(body, &r)
		return resp.StatusCode, r
	}
	if code, _ := send("/closed/", ""); code != http.StatusUnauthorized {
		t.Errorf("closed route without a token: HTTP %d", code)
	}
	code, r := send("/closed/", "tok-a")
	if code != http.StatusOK || r.Error != nil {
		t.Fatalf("closed route with team-a's token: HTTP %d %+v", code, r.Error)
	}
	taskA := decode[tWrap](t, r.Result).Task.ID
	if code, r := send("/open/", ""); code != http.StatusOK || r.Error != nil {
		t.Errorf("open route, anonymous: HTTP %d %+v", code, r.Error)
	}
	resp, body := postTo(t, srv, srv.URL+"/open/", map[string]string{"A2A-Version": "1.0"}, request("GetTask", map[string]any{"id": taskA}))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"code":-32001`) {
		t.Errorf("the open route's anonymous caller reads team-a's task: %s", body)
	}
	for _, tc := range []struct{ path, url, bearer string }{
		{"/closed/", "https://agents.example.com/closed/", `"bearer"`},
		{"/open/", srv.URL + "/open/", ""},
	} {
		resp, err := srv.Client().Get(srv.URL + tc.path + ".well-known/agent-card.json")
		if err != nil {
			t.Fatal(err)
		}
		card, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(card), `"url":"`+tc.url+`"`) || strings.Contains(string(card), `"securitySchemes"`) != (tc.bearer != "") {
			t.Errorf("%s card: %s", tc.path, card)
		}
	}
	if _, err := CheckRoute(Route{Tokens: []Token{{Name: "a", Secret: "x y"}}}); err == nil || !strings.Contains(err.Error(), CodeBearerToken) {
		t.Errorf("a bad route token: %v", err)
	}
}
