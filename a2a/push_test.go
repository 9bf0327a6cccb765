package a2a

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/taskdb"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/netpolicy"
)

// hook is one POST a webhook received.
type hook struct {
	header http.Header
	body   []byte
}

// receiver is a webhook on 127.0.0.1: answer decides each request's status (nil: 200),
// from the request and how many came before it.
type receiver struct {
	srv    *httptest.Server
	got    chan hook
	mu     sync.Mutex
	n      int
	answer func(n int, body []byte) int
	// location is where a 3xx answer points.
	location string
}

func newReceiver(t *testing.T, answer func(n int, body []byte) int) *receiver {
	t.Helper()
	rc := &receiver{got: make(chan hook, 256), answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n, answer := rc.n, rc.answer
		rc.n++
		rc.mu.Unlock()
		status := http.StatusOK
		if answer != nil {
			status = answer(n, body)
		}
		if status >= 300 && status < 400 {
			rc.mu.Lock()
			w.Header().Set("Location", rc.location)
			rc.mu.Unlock()
		}
		w.WriteHeader(status)
		rc.got <- hook{header: r.Header.Clone(), body: body}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// setAnswer changes how the receiver answers from the next request on.
func (rc *receiver) setAnswer(f func(n int, body []byte) int) {
	rc.mu.Lock()
	rc.answer = f
	rc.mu.Unlock()
}

// rules parses push.allow entries.
func rules(t *testing.T, entries ...string) netpolicy.Rules {
	t.Helper()
	rs, err := netpolicy.ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// hookState is what a notification reports: the task state (or the artifact), read from
// either dialect's body.
func hookState(t *testing.T, d string, h hook) string {
	t.Helper()
	if d == "1.0" {
		w := decode[tWrap](t, h.body)
		switch {
		case w.Task != nil:
			return "task:" + parseState(w.Task.Status.State)
		case w.StatusUpdate != nil:
			return parseState(w.StatusUpdate.Status.State)
		case w.ArtifactUpdate != nil:
			return "artifact:" + text(w.ArtifactUpdate.Artifact.Parts)
		}
		t.Fatalf("notification is no StreamResponse: %s", h.body)
	}
	task := decode[tObj](t, h.body)
	if task.Kind != "task" {
		t.Fatalf("0.3 notification is not a Task: %s", h.body)
	}
	s := task.Status.State
	if len(task.Artifacts) > 0 {
		s += "+" + text(task.Artifacts[0].Parts)
	}
	return s
}

// sendWithPush sends text in dialect d with an inline push config to url.
func sendWithPush(t *testing.T, srv *httptest.Server, d, text, url string, extra ...string) tObj {
	t.Helper()
	if d == "1.0" {
		params := map[string]any{"message": msg10(text, extra...), "configuration": map[string]any{"taskPushNotificationConfig": map[string]any{
			"id": "hook-1", "url": url, "token": "tok-1", "authentication": map[string]any{"scheme": "Bearer", "credentials": "cred-1"}}}}
		return *decode[tWrap](t, ok(t, call(t, srv, d, "SendMessage", params))).Task
	}
	params := map[string]any{"message": msg03(text, extra...), "configuration": map[string]any{"pushNotificationConfig": map[string]any{
		"id": "hook-1", "url": url, "token": "tok-1"}}}
	return decode[tObj](t, ok(t, call(t, srv, d, "message/send", params)))
}

// TestPushDelivery: a webhook allowed by a rule gets every update of a task, in order,
// past input-required to completion, shaped for the dialect its config was set in, with
// the token and (1.0) the Authorization header.
func TestPushDelivery(t *testing.T) {
	for _, tc := range []struct {
		d    string
		want []string
	}{
		{"0.3", []string{"submitted", "working", "input-required", "working", "working+hello, ada", "completed+hello, ada"}},
		{"1.0", []string{"task:submitted", "working", "input-required", "working", "artifact:hello, ada", "completed"}},
	} {
		t.Run(tc.d, func(t *testing.T) {
			rc := newReceiver(t, nil)
			_, srv := newServer(t, Config{Executor: &inputExec{errs: make(chan error, 1)}, Push: &PushPolicy{Allow: rules(t, rc.srv.URL)}})
			task := sendWithPush(t, srv, tc.d, "hi", rc.srv.URL+"/hook")
			if task.Status.State != inDialect(tc.d, "input-required") {
				t.Fatalf("state %s", task.Status.State)
			}
			msg := msg03("ada", "taskId="+task.ID)
			method := "message/send"
			if tc.d == "1.0" {
				msg, method = msg10("ada", "taskId="+task.ID), "SendMessage"
			}
			ok(t, call(t, srv, tc.d, method, map[string]any{"message": msg}))
			for i, want := range tc.want {
				h := recv(t, rc.got)
				if got := hookState(t, tc.d, h); got != want {
					t.Fatalf("notification %d: %s, want %s", i, got, want)
				}
				if got := h.header.Get("X-A2A-Notification-Token"); got != "tok-1" {
					t.Fatalf("notification %d: token %q", i, got)
				}
				wantAuth := ""
				if tc.d == "1.0" {
					wantAuth = "Bearer cred-1"
				}
				if got := h.header.Get("Authorization"); got != wantAuth {
					t.Fatalf("notification %d: Authorization %q, want %q", i, got, wantAuth)
				}
				if !strings.HasPrefix(h.header.Get("Content-Type"), "application/json") {
					t.Fatalf("Content-Type %q", h.header.Get("Content-Type"))
				}
			}
		})
	}
}

// inDialect spells a state in dialect d.
func inDialect(d, s string) string {
	if d == "1.0" {
		return v10.wireState(s)
	}
	return s
}

// TestPushConfigMethods: set (client id kept, or generated), get, list, delete (twice),
// set on a finished task, the bound per task; without Config.Push every method is
// PushNotificationNotSupported and the card says so.
func TestPushConfigMethods(t *testing.T) {
	type names struct{ set, get, list, del, send string }
	for _, tc := range []struct {
		d string
		n names
		// params
		set        func(task, id, url string) map[string]any
		one        func(task, id string) map[string]any
		list       func(task string) map[string]any
		msg        func(string) map[string]any
		listConfig func(t *testing.T, raw json.RawMessage) []string // urls
		getURL     func(t *testing.T, raw json.RawMessage) (id, url string)
	}{
		{
			d: "0.3", n: names{"tasks/pushNotificationConfig/set", "tasks/pushNotificationConfig/get", "tasks/pushNotificationConfig/list", "tasks/pushNotificationConfig/delete", "message/send"},
			set: func(task, id, url string) map[string]any {
				return map[string]any{"taskId": task, "pushNotificationConfig": map[string]any{"id": id, "url": url}}
			},
			one: func(task, id string) map[string]any {
				return map[string]any{"id": task, "pushNotificationConfigId": id}
			},
			list: func(task string) map[string]any { return map[string]any{"id": task} },
			msg:  func(s string) map[string]any { return msg03(s) },
			listConfig: func(t *testing.T, raw json.RawMessage) []string {
				var out []string
				for _, c := range decode[[]wireTaskPush03](t, raw) {
					out = append(out, c.PushNotificationConfig.URL)
				}
				return out
			},
			getURL: func(t *testing.T, raw json.RawMessage) (string, string) {
				c := decode[wireTaskPush03](t, raw)
				return c.PushNotificationConfig.ID, c.PushNotificationConfig.URL
			},
		},
		{
			d: "1.0", n: names{"CreateTaskPushNotificationConfig", "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs", "DeleteTaskPushNotificationConfig", "SendMessage"},
			set: func(task, id, url string) map[string]any {
				return map[string]any{"taskId": task, "id": id, "url": url}
			},
			one:  func(task, id string) map[string]any { return map[string]any{"taskId": task, "id": id} },
			list: func(task string) map[string]any { return map[string]any{"taskId": task} },
			msg:  func(s string) map[string]any { return msg10(s) },
			listConfig: func(t *testing.T, raw json.RawMessage) []string {
				var out []string
				for _, c := range decode[struct{ Configs []wirePush10 }](t, raw).Configs {
					out = append(out, c.URL)
				}
				return out
			},
			getURL: func(t *testing.T, raw json.RawMessage) (string, string) {
				c := decode[wirePush10](t, raw)
				return c.ID, c.URL
			},
		},
	} {
		t.Run(tc.d, func(t *testing.T) {
			_, srv := newServer(t, Config{Executor: &echoExec{}, Push: &PushPolicy{Allow: rules(t, "https://example.com")}})
			card := decode[cardJSON](t, func() []byte {
				resp, err := srv.Client().Get(endpoint(srv) + ".well-known/agent-card.json")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return b
			}())
			if !card.Capabilities.PushNotifications {
				t.Fatal("card says no push notifications")
			}
			res := ok(t, call(t, srv, tc.d, tc.n.send, map[string]any{"message": tc.msg("hi")}))
			taskID := decode[tObj](t, res).ID
			if tc.d == "1.0" {
				taskID = decode[tWrap](t, res).Task.ID
			}
			// Set on a completed task is accepted; the client's id is kept.
			ok(t, call(t, srv, tc.d, tc.n.set, tc.set(taskID, "mine", "https://example.com/a")))
			id, url := tc.getURL(t, ok(t, call(t, srv, tc.d, tc.n.get, tc.one(taskID, "mine"))))
			if id != "mine" || url != "https://example.com/a" {
				t.Fatalf("get: %s %s", id, url)
			}
			// No id: one is generated.
			genID, _ := tc.getURL(t, ok(t, call(t, srv, tc.d, tc.n.set, tc.set(taskID, "", "https://example.com/b"))))
			if genID == "" {
				t.Fatal("no id generated")
			}
			// The same id again replaces.
			ok(t, call(t, srv, tc.d, tc.n.set, tc.set(taskID, "mine", "https://example.com/c")))
			if got := tc.listConfig(t, ok(t, call(t, srv, tc.d, tc.n.list, tc.list(taskID)))); strings.Join(got, " ") != "https://example.com/c https://example.com/b" {
				t.Fatalf("list: %v", got)
			}
			ok(t, call(t, srv, tc.d, tc.n.del, tc.one(taskID, "mine")))
			ok(t, call(t, srv, tc.d, tc.n.del, tc.one(taskID, "mine"))) // idempotent
			fails(t, call(t, srv, tc.d, tc.n.get, tc.one(taskID, "mine")), codeTaskNotFound)
			fails(t, call(t, srv, tc.d, tc.n.get, tc.one("tsk_nope", "mine")), codeTaskNotFound)
			// Bounded per task.
			for i := 1; i < maxPushConfigs; i++ {
				ok(t, call(t, srv, tc.d, tc.n.set, tc.set(taskID, "", "https://example.com/n")))
			}
			r := call(t, srv, tc.d, tc.n.set, tc.set(taskID, "", "https://example.com/n"))
			fails(t, r, codeInvalidParams)
			if !strings.Contains(r.Error.Message, "delete one first") {
				t.Fatalf("bound message: %s", r.Error.Message)
			}

			// Without Config.Push: refused, and the card says false.
			_, off := newServer(t, Config{Executor: &echoExec{}})
			fails(t, call(t, off, tc.d, tc.n.set, tc.set(taskID, "x", "https://example.com/a")), codePushNotSupported)
			fails(t, call(t, off, tc.d, tc.n.list, tc.list(taskID)), codePushNotSupported)
		})
	}
}

// TestPushRefusedURL: a webhook URL no rule allows, or a name resolving to a restricted
// address its rule does not name, is refused at set time with InvalidParams naming the
// URL and the fix.
func TestPushRefusedURL(t *testing.T) {
	res := fakeRes{"rebind.example.com": {netip.MustParseAddr("127.0.0.1")}, "ok.example.com": {netip.MustParseAddr("93.184.216.34")}}
	_, srv := newServer(t, Config{Executor: &echoExec{}, Push: &PushPolicy{Allow: rules(t, "https://example.com", "*.example.com"), Resolver: res}})
	taskID := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")}))).ID
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/hook", `add "http://127.0.0.1:8080" to push.allow`},
		{"http://localhost:9999/", `add "http://localhost:9999" to push.allow`},
		{"http://169.254.169.254/latest/meta-data", `add "http://169.254.169.254" to push.allow`},
		{"https://rebind.example.com/hook", "loopback"},
		{"ftp://example.com/x", "not an absolute http or https URL"},
		{"/relative", "not an absolute http or https URL"},
		{"https://user:pw@example.com/", "user name or password"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			r := call(t, srv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": taskID, "pushNotificationConfig": map[string]any{"url": tc.url}})
			fails(t, r, codeInvalidParams)
			if !strings.Contains(r.Error.Message, tc.url) || !strings.Contains(r.Error.Message, tc.want) {
				t.Fatalf("message %q lacks the URL or %q", r.Error.Message, tc.want)
			}
			// Inline on a send: the same refusal.
			r = call(t, srv, "", "message/send", map[string]any{"message": msg03("hi"), "configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": tc.url}}})
			fails(t, r, codeInvalidParams)
		})
	}
	ok(t, call(t, srv, "", "tasks/pushNotificationConfig/set", map[string]any{"taskId": taskID, "pushNotificationConfig": map[string]any{"url": "https://ok.example.com/hook"}}))
}

type fakeRes map[string][]netip.Addr

func (f fakeRes) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f[host], nil
}

// TestPushRetry: a webhook failing twice, then answering, gets the event (after the
// backoff); every event arrives, none twice after its acknowledgement.
func TestPushRetry(t *testing.T) {
	rc := newReceiver(t, func(n int, _ []byte) int {
		if n < 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	_, srv := newServer(t, Config{Executor: newBlocking(), Push: &PushPolicy{Allow: rules(t, rc.srv.URL), Backoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}})
	params := map[string]any{"message": msg03("hi"), "configuration": map[string]any{"blocking": false, "pushNotificationConfig": map[string]any{"url": rc.srv.URL}}}
	ok(t, call(t, srv, "", "message/send", params))
	for i, want := range []string{"submitted", "submitted", "submitted", "working"} {
		if got := hookState(t, "0.3", recv(t, rc.got)); got != want {
			t.Fatalf("request %d: %s, want %s", i, got, want)
		}
	}
}

// TestPushDropped: an event whose every attempt fails is dropped and counted in
// capsule_push_failures_total; delivery moves on to the next event.
func TestPushDropped(t *testing.T) {
	rc := newReceiver(t, func(_ int, body []byte) int {
		if strings.Contains(string(body), `"completed"`) {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newServer(t, Config{Executor: &echoExec{}, Metrics: m, Push: &PushPolicy{Allow: rules(t, rc.srv.URL), Backoff: time.Millisecond, Attempts: 2}})
	if got := testutil.ToFloat64(m.PushFailures.WithLabelValues("hello")); got != 0 {
		t.Fatalf("counter starts at %v", got)
	}
	ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi"), "configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": rc.srv.URL}}}))
	failed := 0
	for {
		h := recv(t, rc.got)
		if hookState(t, "0.3", h) == "completed+echo: hi" {
			break
		}
		failed++
	}
	if failed == 0 || failed%2 != 0 {
		t.Fatalf("%d failed requests, want 2 per event", failed)
	}
	if got := testutil.ToFloat64(m.PushFailures.WithLabelValues("hello")); got != float64(failed/2) {
		t.Fatalf("capsule_push_failures_total %v, want %d", got, failed/2)
	}
}

// TestPushRedirectNotFollowed: a webhook answering 302 is a failed delivery, and the
// place it points to gets nothing.
func TestPushRedirectNotFollowed(t *testing.T) {
	target := newReceiver(t, nil)
	rc := newReceiver(t, func(int, []byte) int { return http.StatusFound })
	m, _ := NewMetrics(nil)
	_, srv := newServer(t, Config{Executor: &echoExec{}, Metrics: m, Push: &PushPolicy{Allow: rules(t, rc.srv.URL, target.srv.URL), Attempts: 1}})
	rc.mu.Lock()
	rc.location = target.srv.URL + "/stolen"
	rc.mu.Unlock()
	ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi"), "configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": rc.srv.URL}}}))
	for {
		if hookState(t, "0.3", recv(t, rc.got)) == "completed+echo: hi" {
			break
		}
	}
	select {
	case h := <-target.got:
		t.Fatalf("redirect followed: %s", h.body)
	default:
	}
}

// TestPushOtherPrincipal: only the task's owner sets, reads, lists and deletes its
// configs; to anyone else the task is not found.
func TestPushOtherPrincipal(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Tokens: []Token{{"alice", "sa"}, {"bob", "sb"}},
		Push: &PushPolicy{Allow: rules(t, "https://example.com")}})
	task := decode[tObj](t, ok(t, callAs(t, srv, "0.3", "sa", "message/send", map[string]any{"message": msg03("hi")})))
	ok(t, callAs(t, srv, "0.3", "sa", "tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "c", "url": "https://example.com/"}}))
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"tasks/pushNotificationConfig/set", map[string]any{"taskId": task.ID, "pushNotificationConfig": map[string]any{"id": "c", "url": "https://example.com/x"}}},
		{"tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": "c"}},
		{"tasks/pushNotificationConfig/list", map[string]any{"id": task.ID}},
		{"tasks/pushNotificationConfig/delete", map[string]any{"id": task.ID, "pushNotificationConfigId": "c"}},
	} {
		fails(t, callAs(t, srv, "0.3", "sb", c.method, c.params), codeTaskNotFound)
	}
	// The same in 1.0's names and params.
	for _, c := range []struct {
		method string
		params map[string]any
	}{
		{"CreateTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "c", "url": "https://example.com/x"}},
		{"GetTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "c"}},
		{"ListTaskPushNotificationConfigs", map[string]any{"taskId": task.ID}},
		{"DeleteTaskPushNotificationConfig", map[string]any{"taskId": task.ID, "id": "c"}},
	} {
		fails(t, callAs(t, srv, "1.0", "sb", c.method, c.params), codeTaskNotFound)
	}
	got := decode[wireTaskPush03](t, ok(t, callAs(t, srv, "0.3", "sa", "tasks/pushNotificationConfig/get", map[string]any{"id": task.ID, "pushNotificationConfigId": "c"})))
	if got.PushNotificationConfig.URL != "https://example.com/" {
		t.Fatalf("bob changed alice's config: %+v", got)
	}
}

// TestPushDurableRestart: a config set on a task that waits for input survives a
// restart: the events the webhook did not acknowledge before the shutdown (the
// input-required it refused, the cancelation by the shutdown) reach it after the
// restart, in order, and those it acknowledged are not sent again.
func TestPushDurableRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tasks.db")
	// Until the restart the webhook acknowledges the first two notifications only.
	rc := newReceiver(t, func(n int, _ []byte) int {
		if n < 2 {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	policy := &PushPolicy{Allow: rules(t, rc.srv.URL), Backoff: time.Hour, Attempts: 3}
	g := openGenWith(t, path, Config{Executor: &inputExec{errs: make(chan error, 1)}, Push: policy})
	task := sendWithPush(t, g.srv, "0.3", "hi", rc.srv.URL+"/hook")
	if task.Status.State != stateInputRequired {
		t.Fatalf("state %s", task.Status.State)
	}
	// The refused third one is posted only after the second's cursor was written; its
	// retry is an hour away, so the handler stops before it.
	for i, want := range []string{"submitted", "working", "input-required"} {
		if got := hookState(t, "0.3", recv(t, rc.got)); got != want {
			t.Fatalf("before restart, notification %d: %s, want %s", i, got, want)
		}
	}
	g.stop() // cancels the waiting task: one more event, not delivered either
	rc.setAnswer(nil)

	g2 := openGenWith(t, path, Config{Executor: &inputExec{errs: make(chan error, 1)}, Push: &PushPolicy{Allow: rules(t, rc.srv.URL)}})
	for i, want := range []string{"input-required", "canceled"} {
		h := recv(t, rc.got)
		if got := hookState(t, "0.3", h); got != want {
			t.Fatalf("after restart, notification %d: %s, want %s", i, got, want)
		}
		if h.header.Get("X-A2A-Notification-Token") != "tok-1" {
			t.Fatal("the token did not survive the restart")
		}
	}
	// The worker ends after the terminal event's cursor is stored (stopping the handler
	// first could cut that last acknowledgement off: it would then be sent again).
	g2.h.pushers.Wait()
	g2.stop()
	select {
	case h := <-rc.got:
		t.Fatalf("sent again after the restart: %s", h.body)
	default:
	}
	// The finished delivery's cursor says so: a third start skips the config unread.
	db, err := taskdb.Open(path, taskdb.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Pushes(testCard().Name, task.ID)
	if err != nil || len(rows) != 1 || rows[0].Delivered != deliveredAll {
		t.Errorf("stored configs after the delivery ended: %+v %v", rows, err)
	}
}

// TestPushSetOnLiveTask: a config set on a running task gets the events after it, not
// the ones before; 1.0 notifications are StreamResponses with the Authorization header.
func TestPushSetOnLiveTask(t *testing.T) {
	rc := newReceiver(t, nil)
	exec := newBlocking()
	_, srv := newServer(t, Config{Executor: exec, Push: &PushPolicy{Allow: rules(t, rc.srv.URL)}})
	res := ok(t, call(t, srv, "1.0", "SendMessage", map[string]any{"message": msg10("hi"), "configuration": map[string]any{"returnImmediately": true}}))
	taskID := decode[tWrap](t, res).Task.ID
	recv(t, exec.started) // working: published before the config exists
	ok(t, call(t, srv, "1.0", "CreateTaskPushNotificationConfig", map[string]any{"taskId": taskID, "url": rc.srv.URL + "/late",
		"authentication": map[string]any{"scheme": "Bearer", "credentials": "c"}}))
	exec.release <- "done"
	for i, want := range []string{"artifact:done", "completed"} {
		h := recv(t, rc.got)
		if got := hookState(t, "1.0", h); got != want {
			t.Fatalf("notification %d: %s, want %s", i, got, want)
		}
		if h.header.Get("Authorization") != "Bearer c" || h.header.Get("X-A2A-Notification-Token") != "" {
			t.Fatalf("headers %v", h.header)
		}
	}
}

// rebinder answers a name with a public address once (the set-time check), then with
// loopback (DNS rebinding), reporting every lookup after the first.
type rebinder struct {
	mu      sync.Mutex
	n       int
	lookups chan string
}

func (r *rebinder) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.n == 1 {
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	r.lookups <- host
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// TestPushRebinding: a name that passed the set-time check but resolves to loopback when
// the delivery connects is refused at connect time: the webhook on loopback gets nothing,
// and each event is dropped and counted.
func TestPushRebinding(t *testing.T) {
	rc := newReceiver(t, nil)
	port := rc.srv.URL[strings.LastIndex(rc.srv.URL, ":")+1:]
	res := &rebinder{lookups: make(chan string, 64)}
	m, _ := NewMetrics(nil)
	_, srv := newServer(t, Config{Executor: &echoExec{}, Metrics: m,
		Push: &PushPolicy{Allow: rules(t, "http://hook.example.com:"+port), Resolver: res, Attempts: 1}})
	task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi"),
		"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": "http://hook.example.com:" + port + "/"}}})))
	if task.Status.State != stateCompleted {
		t.Fatalf("state %s", task.Status.State)
	}
	// submitted, working, three chunks, the artifact, completed: one connect each. The
	// seventh connect comes after the sixth event was dropped.
	for range 7 {
		recv(t, res.lookups)
	}
	if got := testutil.ToFloat64(m.PushFailures.WithLabelValues("hello")); got < 6 {
		t.Fatalf("capsule_push_failures_total %v, want at least 6", got)
	}
	select {
	case h := <-rc.got:
		t.Fatalf("delivered to loopback through a rebound name: %s", h.body)
	default:
	}
}
