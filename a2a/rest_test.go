package a2a

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// restDo sends an HTTP+JSON request to path under the capsule's prefix; a non-empty
// body goes as application/json.
func restDo(t *testing.T, srv *httptest.Server, method, path string, headers map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+prefix+"/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return roundTrip(t, srv, req, headers)
}

var v1 = map[string]string{"A2A-Version": "1.0"}

// restOK checks a 200 JSON answer and decodes it.
func restOK[T any](t *testing.T, resp *http.Response, body []byte) T {
	t.Helper()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HTTP %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	return decode[T](t, body)
}

// restCall is restDo answered 200 with JSON, decoded.
func restCall[T any](t *testing.T, srv *httptest.Server, method, path string, headers map[string]string, body string) T {
	t.Helper()
	resp, b := restDo(t, srv, method, path, headers, body)
	return restOK[T](t, resp, b)
}

// restErr10 checks a 1.0 HTTP+JSON error: google.rpc.Status whose code is the HTTP
// status, with an ErrorInfo of reason.
func restErr10(t *testing.T, resp *http.Response, body []byte, status int, reason string) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HTTP %d (want %d), Content-Type %q: %s", resp.StatusCode, status, resp.Header.Get("Content-Type"), body)
	}
	var b struct {
		Error struct {
			Code    int       `json:"code"`
			Status  string    `json:"status"`
			Message string    `json:"message"`
			Details []errInfo `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	e := b.Error
	if e.Code != status || e.Status == "" || e.Message == "" || len(e.Details) != 1 ||
		e.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" || e.Details[0].Reason != reason || e.Details[0].Domain != "a2a-protocol.org" {
		t.Fatalf("error body %s, want code %d reason %s", body, status, reason)
	}
}

// restErr03 checks a 0.3 HTTP+JSON error: the flat {code, message, data} the A2A JS
// SDK's REST transport reads.
func restErr03(t *testing.T, resp *http.Response, body []byte, status, code int) {
	t.Helper()
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("HTTP %d (want %d): %s", resp.StatusCode, status, body)
	}
	e := decode[rpcErr](t, body)
	if e.Code != code || e.Message == "" || e.detail() == "" {
		t.Fatalf("error body %s, want code %d", body, code)
	}
}

const (
	send10     = `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}`
	sendBody03 = `{"message":{"messageId":"m1","role":"ROLE_USER","content":[{"text":"hi"}]}}`
)

// TestREST10 drives every 1.0 route and its errors, under the prefix and under a
// tenant segment.
func TestREST10(t *testing.T) {
	for _, base := range []string{"", "tenant-a/"} {
		t.Run("base="+base, func(t *testing.T) {
			_, srv := newServer(t, Config{Executor: &echoExec{}})
			sent := restCall[tWrap](t, srv, "POST", base+"message:send", v1, send10)
			task := sent.Task
			if task == nil || task.Kind != "" || task.Status.State != "TASK_STATE_COMPLETED" || len(task.Artifacts) != 1 || text(task.Artifacts[0].Parts) != "echo: hi" {
				t.Fatalf("send %+v", sent)
			}
			id := task.ID
			got := restCall[tObj](t, srv, "GET", base+"tasks/"+id+"?historyLength=1", v1, "")
			if got.ID != id || got.Status.State != "TASK_STATE_COMPLETED" || len(got.History) != 1 {
				t.Errorf("get %+v", got)
			}
			list := restCall[struct {
				Tasks         []tObj  `json:"tasks"`
				NextPageToken *string `json:"nextPageToken"`
				PageSize      int     `json:"pageSize"`
				TotalSize     int     `json:"totalSize"`
			}](t, srv, "GET", base+"tasks?pageSize=10&status=TASK_STATE_COMPLETED&includeArtifacts=true&contextId="+url.QueryEscape(task.ContextID), v1, "")
			if len(list.Tasks) != 1 || list.Tasks[0].ID != id || len(list.Tasks[0].Artifacts) != 1 || list.PageSize != 10 || list.TotalSize != 1 || list.NextPageToken == nil {
				t.Errorf("list %+v", list)
			}

			for _, tc := range []struct {
				name, method, path string
				headers            map[string]string
				body               string
				status             int
				reason             string
			}{
				{"get unknown", "GET", "tasks/nope", v1, "", 404, "TASK_NOT_FOUND"},
				{"cancel finished", "POST", "tasks/" + id + ":cancel", v1, "", 409, "TASK_NOT_CANCELABLE"},
				{"cancel unknown", "POST", "tasks/nope:cancel", v1, "", 404, "TASK_NOT_FOUND"},
				{"subscribe finished", "POST", "tasks/" + id + ":subscribe", v1, "", 400, "UNSUPPORTED_OPERATION"},
				{"subscribe unknown", "GET", "tasks/nope:subscribe", v1, "", 404, "TASK_NOT_FOUND"},
				{"bad history", "GET", "tasks/" + id + "?historyLength=x", v1, "", 400, "INVALID_PARAMS"},
				{"bad page size", "GET", "tasks?pageSize=0", v1, "", 400, "INVALID_PARAMS"},
				{"bad bool", "GET", "tasks?includeArtifacts=yes", v1, "", 400, "INVALID_PARAMS"},
				{"empty object", "POST", "message:send", v1, "{}", 400, "INVALID_PARAMS"},
				{"no body", "POST", "message:send", v1, "", 400, "INVALID_PARAMS"},
				{"not JSON", "POST", "message:send", v1, "{", 400, "PARSE_ERROR"},
				{"not an object", "POST", "message:stream", v1, "[]", 400, "INVALID_PARAMS"},
				{"0.3 message", "POST", "message:send", v1, sendBody03, 400, "INVALID_PARAMS"},
				{"content type", "POST", "message:send", map[string]string{"A2A-Version": "1.0", "Content-Type": "text/plain"}, send10, 415, "CONTENT_TYPE_NOT_SUPPORTED"},
				{"version", "POST", "message:send", map[string]string{"A2A-Version": "99.0"}, send10, 400, "VERSION_NOT_SUPPORTED"},
				{"unknown verb", "POST", "message:frobnicate", v1, send10, 404, "METHOD_NOT_FOUND"},
				{"unknown task path", "GET", "tasks/" + id + "/artifacts", v1, "", 404, "METHOD_NOT_FOUND"},
				{"wrong method", "PUT", "message:send", v1, send10, 405, "INVALID_REQUEST"},
				{"push create", "POST", "tasks/" + id + "/pushNotificationConfigs", v1, `{"id":"p1","url":"https://example.com/hook"}`, 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
				{"push list", "GET", "tasks/" + id + "/pushNotificationConfigs?pageSize=5", v1, "", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
				{"push get", "GET", "tasks/" + id + "/pushNotificationConfigs/p1", v1, "", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
				{"push delete", "DELETE", "tasks/" + id + "/pushNotificationConfigs/p1", v1, "", 400, "PUSH_NOTIFICATION_NOT_SUPPORTED"},
				{"anonymous extended card", "GET", "extendedAgentCard", v1, "", 400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					resp, body := restDo(t, srv, tc.method, base+tc.path, tc.headers, tc.body)
					restErr10(t, resp, body, tc.status, tc.reason)
				})
			}
			for _, tc := range []struct{ method, path, allow string }{
				{"PUT", "message:send", "POST"},
				{"GET", "message:stream", "POST"},
				{"DELETE", "tasks/x", "GET"},
				{"POST", "tasks", "GET"},
				{"PUT", "tasks/x:subscribe", "GET, POST"},
				{"PUT", "tasks/x/pushNotificationConfigs", "GET, POST"},
				{"POST", "tasks/x/pushNotificationConfigs/p", "GET, DELETE"},
			} {
				resp, _ := restDo(t, srv, tc.method, base+tc.path, v1, "")
				if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow {
					t.Errorf("%s %s: HTTP %d, Allow %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"))
				}
			}
		})
	}
}

// TestREST03 drives the 0.3 routes (/v1/...) with the proto-JSON shapes the A2A JS SDK
// 0.3's REST transport sends and reads.
func TestREST03(t *testing.T) {
	b := newBlocking()
	_, srv := newServer(t, Config{Executor: b})
	// A non-blocking send in snake_case, as the 0.3 TCK writes it.
	resp, body := restDo(t, srv, "POST", "v1/message:send", nil,
		`{"message":{"message_id":"m1","role":"ROLE_USER","content":[{"text":"hi"}]},"configuration":{"blocking":false,"history_length":5}}`)
	sent := restOK[map[string]map[string]any](t, resp, body)
	task := sent["task"]
	if task == nil || task["kind"] != nil || task["id"] == "" {
		t.Fatalf("send %s", body)
	}
	id := task["id"].(string)
	recv(t, b.started)
	resp, body = restDo(t, srv, "GET", "v1/tasks/"+id+"?history_length=1", nil, "")
	got := restOK[map[string]any](t, resp, body)
	hist := got["history"].([]any)
	if got["status"].(map[string]any)["state"] != "TASK_STATE_WORKING" || len(hist) != 1 ||
		mustJSON(hist[0].(map[string]any)["content"]) != `[{"text":"hi"}]` || hist[0].(map[string]any)["role"] != "ROLE_USER" {
		t.Errorf("get %s", body)
	}
	resp, body = restDo(t, srv, "POST", "v1/tasks/"+id+":cancel", map[string]string{"Content-Type": "application/json"}, "")
	canceled := restOK[map[string]any](t, resp, body)
	if canceled["status"].(map[string]any)["state"] != "TASK_STATE_CANCELLED" {
		t.Errorf("cancel %s", body)
	}
	resp, body = restDo(t, srv, "GET", "v1/tasks", nil, "")
	if l := restOK[map[string]any](t, resp, body); len(l["tasks"].([]any)) != 1 {
		t.Errorf("list %s", body)
	}

	for _, tc := range []struct {
		name, method, path, body string
		status, code             int
	}{
		{"get unknown", "GET", "v1/tasks/nope", "", 404, codeTaskNotFound},
		{"cancel finished", "POST", "v1/tasks/" + id + ":cancel", "", 409, codeNotCancelable},
		{"file part", "POST", "v1/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","content":[{"file":{"fileWithUri":"https://example.com/x"}}]}}`, 415, codeContentType},
		{"empty part", "POST", "v1/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","content":[{}]}}`, 400, codeInvalidParams},
		{"agent role", "POST", "v1/message:send", `{"message":{"messageId":"m","role":"ROLE_AGENT","content":[{"text":"x"}]}}`, 400, codeInvalidParams},
		{"push config inline", "POST", "v1/message:send", `{"message":{"messageId":"m","role":"ROLE_USER","content":[{"text":"x"}]},"configuration":{"push_notification":{"url":"https://example.com"}}}`, 400, codePushNotSupported},
		{"push set", "POST", "v1/tasks/" + id + "/pushNotificationConfigs", `{"name":"tasks/` + id + `/pushNotificationConfigs/p1","pushNotificationConfig":{"url":"https://example.com/hook"}}`, 400, codePushNotSupported},
		{"push get", "GET", "v1/tasks/" + id + "/pushNotificationConfigs/p1", "", 400, codePushNotSupported},
		{"extended card", "GET", "v1/card", "", 400, codeNoExtendedCard},
		{"unknown route", "GET", "v1/tasks/" + id + "/x", "", 404, codeMethodNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := restDo(t, srv, tc.method, tc.path, nil, tc.body)
			restErr03(t, resp, body, tc.status, tc.code)
		})
	}
}

// TestRESTAuth: the routes take the same bearer token as JSON-RPC, and an
// authenticated caller gets the extended card.
func TestRESTAuth(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Bearer: "tok"})
	for _, path := range []string{"message:send", "v1/message:send", "tasks/x", "extendedAgentCard"} {
		method := "GET"
		if strings.HasSuffix(path, ":send") {
			method = "POST"
		}
		resp, body := restDo(t, srv, method, path, v1, "")
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" || !json.Valid(body) {
			t.Errorf("%s without a token: HTTP %d: %s", path, resp.StatusCode, body)
		}
	}
	auth := map[string]string{"A2A-Version": "1.0", "Authorization": "Bearer tok"}
	card := restCall[map[string]any](t, srv, "GET", "extendedAgentCard", auth, "")
	if card["name"] != "hello" || card["url"] != nil {
		t.Errorf("extended card %v", card)
	}
	ifaces := mustJSON(card["supportedInterfaces"])
	if !strings.Contains(ifaces, `"url":"`+endpoint(srv)+`"`) || !strings.Contains(ifaces, `"HTTP+JSON"`) {
		t.Errorf("the extended card names the endpoint %s: %s", endpoint(srv), ifaces)
	}
	resp, body := restDo(t, srv, "POST", "message:send", auth, send10)
	if restOK[tWrap](t, resp, body).Task == nil {
		t.Errorf("send with the token: %s", body)
	}
}

// TestRESTJobURL: a task sent over HTTP+JSON names the same endpoint URL as one sent
// over JSON-RPC, whatever route, tenant or /v1 it came by.
func TestRESTJobURL(t *testing.T) {
	e := &echoExec{}
	_, srv := newServer(t, Config{Executor: e})
	restCall[tWrap](t, srv, "POST", "message:send", v1, send10)
	restCall[map[string]any](t, srv, "POST", "v1/message:send", nil, sendBody03)
	for _, j := range e.recorded() {
		if j.URL != endpoint(srv) {
			t.Errorf("job URL %q, want %q", j.URL, endpoint(srv))
		}
	}
}

type restEvent struct {
	id   uint64
	data json.RawMessage
}

// restStream opens an HTTP+JSON stream and delivers its events until the server ends it.
func restStream(t *testing.T, srv *httptest.Server, method, path string, headers map[string]string, body string) <-chan restEvent {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+prefix+"/"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("%s: HTTP %d, Content-Type %q: %s", path, resp.StatusCode, ct, b)
	}
	out := make(chan restEvent, 1024)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var cur restEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "" && cur.data != nil:
				out <- cur
				cur = restEvent{}
			case strings.HasPrefix(line, "id: "):
				cur.id, _ = strconv.ParseUint(line[4:], 10, 64)
			case strings.HasPrefix(line, "data: "):
				cur.data = json.RawMessage(line[6:])
			}
		}
	}()
	return out
}

// streamMember names the StreamResponse member an event holds, and decodes it.
func streamMember(t *testing.T, e restEvent) (string, map[string]any) {
	t.Helper()
	var m map[string]map[string]any
	if err := json.Unmarshal(e.data, &m); err != nil || len(m) != 1 {
		t.Fatalf("not a StreamResponse: %s", e.data)
	}
	for k, v := range m {
		return k, v
	}
	panic("unreachable")
}

// TestRESTStream streams a message and resubscribes (with Last-Event-ID) over
// HTTP+JSON, in both versions: bare StreamResponse events with ids.
func TestRESTStream(t *testing.T) {
	for _, v := range []struct {
		name, send, body string
		headers          map[string]string
		working, done    string
	}{
		{"1.0", "message:stream", send10, v1, "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"},
		{"0.3", "v1/message:stream", sendBody03, nil, "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"},
	} {
		t.Run(v.name, func(t *testing.T) {
			b := newBlocking()
			_, srv := newServer(t, Config{Executor: b})
			first := restStream(t, srv, "POST", v.send, v.headers, v.body)
			created := recvOpen(t, first)
			kind, task := streamMember(t, created)
			if kind != "task" || task["kind"] != nil {
				t.Fatalf("first event %s", created.data)
			}
			id := task["id"].(string)
			job := recv(t, b.started)
			job.Chunk("partial")
			var seen restEvent
			for {
				e := recvOpen(t, first)
				if strings.Contains(string(e.data), `"partial"`) {
					seen = e
					break
				}
			}
			sub := "tasks/" + id + ":subscribe"
			if v.name == "0.3" {
				sub = "v1/" + sub
			}
			// A client reconnecting after the chunk: the events after it, by GET (the
			// 1.0 proto's verb) in 1.0 and POST (the JS SDK's) in 0.3.
			verb := "GET"
			if v.name == "0.3" {
				verb = "POST"
			}
			headers := map[string]string{"Last-Event-ID": strconv.FormatUint(seen.id, 10)}
			for k, val := range v.headers {
				headers[k] = val
			}
			resumed := restStream(t, srv, verb, sub, headers, "")
			b.release <- "done"
			after := drain(t, resumed)
			firstRest := drain(t, first)
			if len(after) != 2 || len(firstRest) != 2 || after[0].id != firstRest[0].id || after[1].id != firstRest[1].id || after[0].id <= seen.id {
				t.Fatalf("resumed %v, first %v", after, firstRest)
			}
			if k, a := streamMember(t, after[0]); k != "artifactUpdate" || !strings.Contains(mustJSON(a["artifact"]), `"parts":[{"text":"done"}]`) {
				t.Errorf("artifact event %s", after[0].data)
			}
			k, su := streamMember(t, after[1])
			if k != "statusUpdate" || su["status"].(map[string]any)["state"] != v.done || su["taskId"] != id {
				t.Errorf("final event %s", after[1].data)
			}
			if v.name == "0.3" && su["final"] != true {
				t.Errorf("0.3 final event without final: %s", after[1].data)
			}
			if k, a := streamMember(t, seen); k != "artifactUpdate" || !strings.Contains(mustJSON(a["artifact"]), `"parts":[{"text":"partial"}]`) {
				t.Errorf("chunk event %s", seen.data)
			}
		})
	}
}

// TestRESTParams pins the params each route hands to the JSON-RPC operation, push
// configs included (push.go reads them), in both dialects.
func TestRESTParams(t *testing.T) {
	for _, tc := range []struct {
		d                   dialect
		method, path, query string
		body, want          string
	}{
		{v10, "POST", "/a/tasks/t1/pushNotificationConfigs", "", `{"id":"p","url":"u","tenant":"x"}`, `{"id":"p","taskId":"t1","tenant":"x","url":"u"}`},
		{v10, "GET", "/a/tasks/t1/pushNotificationConfigs/p", "", "", `{"id":"p","taskId":"t1"}`},
		{v10, "DELETE", "/a/tasks/t1/pushNotificationConfigs/p", "", "", `{"id":"p","taskId":"t1"}`},
		{v10, "GET", "/a/tasks/t1/pushNotificationConfigs", "pageSize=2&pageToken=n", "", `{"pageSize":2,"pageToken":"n","taskId":"t1"}`},
		{v03, "POST", "/a/v1/tasks/t1/pushNotificationConfigs", "", `{"name":"tasks/t1/pushNotificationConfigs/p","pushNotificationConfig":{"url":"u","token":"k","authentication":{"schemes":["Bearer"]}}}`,
			`{"pushNotificationConfig":{"authentication":{"schemes":["Bearer"]},"id":"p","token":"k","url":"u"},"taskId":"t1"}`},
		{v03, "POST", "/a/v1/tasks/t1/pushNotificationConfigs", "", `{"parent":"tasks/t1","config_id":"q","config":{"push_notification_config":{"url":"u"}}}`,
			`{"pushNotificationConfig":{"id":"q","url":"u"},"taskId":"t1"}`},
		{v03, "POST", "/a/v1/tasks/t1/pushNotificationConfigs", "", `{"config":{"pushNotificationConfig":{"id":"r","url":"u"}}}`,
			`{"pushNotificationConfig":{"id":"r","url":"u"},"taskId":"t1"}`},
		{v03, "GET", "/a/v1/tasks/t1/pushNotificationConfigs/p", "", "", `{"id":"t1","pushNotificationConfigId":"p"}`},
		{v03, "DELETE", "/a/v1/tasks/t1/pushNotificationConfigs/p", "", "", `{"id":"t1","pushNotificationConfigId":"p"}`},
		{v03, "GET", "/a/v1/tasks/t1/pushNotificationConfigs", "", "", `{"id":"t1"}`},
		{v03, "GET", "/a/v1/tasks/t%2F1", "history_length=3", "", `{"historyLength":3,"id":"t/1"}`},
		{v03, "POST", "/a/v1/message:send", "", `{"message":{"message_id":"m","context_id":"c","role":"ROLE_USER","content":[{"text":"a"},{"data":{"data":{}}}]},"configuration":{"accepted_output_modes":["text/plain"],"blocking":true,"pushNotification":{"url":"u"}},"metadata":{"k":1}}`,
			`{"configuration":{"acceptedOutputModes":["text/plain"],"blocking":true,"pushNotificationConfig":{"url":"u"}},"message":{"contextId":"c","kind":"message","messageId":"m","parts":[{"kind":"text","text":"a"},{"data":{},"kind":"data"}],"role":"user"},"metadata":{"k":1}}`},
		// A proto FilePart (fileWithUri / fileWithBytes, mime_type, name) becomes the JSON-RPC one.
		{v03, "POST", "/a/v1/message:send", "", `{"message":{"message_id":"m","role":"ROLE_USER","content":[{"file":{"file_with_uri":"https://e.com/a","mime_type":"application/pdf","name":"a.pdf"}},{"file":{"fileWithBytes":"aGk="}}]}}`,
			`{"message":{"kind":"message","messageId":"m","parts":[{"file":{"mimeType":"application/pdf","name":"a.pdf","uri":"https://e.com/a"},"kind":"file"},{"file":{"bytes":"aGk="},"kind":"file"}],"role":"user"}}`},
		{v03, "POST", "/a/v1/message:send", "", `{"message":{"messageId":"m","role":"ROLE_USER","content":[{"text":"a"}]},"configuration":{"historyLength":2}}`,
			`{"configuration":{"blocking":false,"historyLength":2},"message":{"kind":"message","messageId":"m","parts":[{"kind":"text","text":"a"}],"role":"user"}}`},
		{v10, "GET", "/tasks", "contextId=c&status=TASK_STATE_WORKING&pageSize=3&pageToken=t&historyLength=0&statusTimestampAfter=2025-01-01T00:00:00Z&includeArtifacts=true&A2A-Version=1.0", "",
			`{"contextId":"c","historyLength":0,"includeArtifacts":true,"pageSize":3,"pageToken":"t","status":"TASK_STATE_WORKING","statusTimestampAfter":"2025-01-01T00:00:00Z"}`},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			rt, looks := matchREST(tc.path)
			if !looks || !rt.found {
				t.Fatalf("no route")
			}
			q, _ := url.ParseQuery(tc.query)
			params, rerr := restParams(tc.d, rt.op(tc.method), rt, q, []byte(tc.body))
			if rerr != nil {
				t.Fatalf("error %s", rerr.Message)
			}
			var v any
			_ = json.Unmarshal(params, &v)
			if got := mustJSON(v); got != tc.want {
				t.Errorf("params %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRESTPushShapes03 pins the 0.3 proto-JSON shapes of push-config results: named by
// resource, listed under configs, deleted as {}.
func TestRESTPushShapes03(t *testing.T) {
	cfg := map[string]any{"taskId": "t1", "pushNotificationConfig": map[string]any{"id": "p", "url": "u"}}
	for _, tc := range []struct {
		m    method
		in   any
		want string
	}{
		{mPushSet, cfg, `{"name":"tasks/t1/pushNotificationConfigs/p","pushNotificationConfig":{"id":"p","url":"u"}}`},
		{mPushGet, cfg, `{"name":"tasks/t1/pushNotificationConfigs/p","pushNotificationConfig":{"id":"p","url":"u"}}`},
		{mPushList, []any{cfg}, `{"configs":[{"name":"tasks/t1/pushNotificationConfigs/p","pushNotificationConfig":{"id":"p","url":"u"}}]}`},
		{mPushList, []any{}, `{"configs":[]}`},
		{mPushDelete, nil, `{}`},
	} {
		if got := mustJSON(restShape(v03, tc.m)(tc.in)); got != tc.want {
			t.Errorf("method %d: %s, want %s", tc.m, got, tc.want)
		}
	}
	if got := mustJSON(restShape(v10, mPushDelete)(nil)); got != `{}` {
		t.Errorf("1.0 delete: %s", got)
	}
}

// TestRESTNotRoutes: paths that are no route stay JSON-RPC (a POST to the endpoint,
// whatever its prefix) or the old 405 (anything else).
func TestRESTNotRoutes(t *testing.T) {
	for _, p := range []string{"/agents/hello/", "/tasks/", "/a/v1/", "/agents/hello", "/x/message"} {
		if _, looks := matchREST(p); looks {
			t.Errorf("%s looks like an HTTP+JSON route", p)
		}
	}
	for _, p := range []string{"/a/message:x", "/a/tasks/t/x", "/a/tasks/t/pushNotificationConfigs/p/x", "/a/%zz"} {
		if rt, looks := matchREST(p); !looks || rt.found {
			t.Errorf("%s: looks %v, found %v", p, looks, rt.found)
		}
	}
}

// TestRESTBody: application/a2a+json is accepted like application/json, and a body over
// the limit is refused with 413 and a JSON error before it runs.
func TestRESTBody(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, MaxBody: 512})
	h := map[string]string{"A2A-Version": "1.0", "Content-Type": "application/a2a+json; charset=utf-8"}
	if sent := restCall[tWrap](t, srv, "POST", "message:send", h, send10); sent.Task == nil {
		t.Errorf("a2a+json send: %+v", sent)
	}
	big := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 600) + `"}]}}`
	resp, body := restDo(t, srv, "POST", "message:send", v1, big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !json.Valid(body) || !strings.Contains(string(body), `"code":413`) {
		t.Errorf("over the limit: HTTP %d: %s", resp.StatusCode, body)
	}
}
