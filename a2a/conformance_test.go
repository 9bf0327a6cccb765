package a2a

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// rawPost sends body to the endpoint plus query with headers, returning status,
// content type and body.
func rawPost(t *testing.T, srv *httptest.Server, query string, headers map[string]string, body string) (int, string, []byte) {
	t.Helper()
	resp, b := postTo(t, srv, endpoint(srv)+query, headers, []byte(body))
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestConformanceErrors sends the exact requests the A2A conformance suite's error
// checks send and asserts the exact answer: code, and the error data in the shape of
// the dialect (0.3 object, 1.0 google.rpc.ErrorInfo list) with the field named.
func TestConformanceErrors(t *testing.T) {
	exec := &echoExec{}
	_, srv := newServer(t, Config{Executor: exec})
	v10 := map[string]string{"A2A-Version": "1.0"}
	for _, tc := range []struct {
		name    string
		query   string
		headers map[string]string
		body    string
		code    int
		reason  string            // 1.0: the ErrorInfo reason ("" = a 0.3 data object)
		meta    map[string]string // 1.0: ErrorInfo metadata besides detail
		names   string            // the detail names this
	}{
		{"1.0 task not found", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"tsk_nope"}}`,
			-32001, "TASK_NOT_FOUND", map[string]string{"taskId": "tsk_nope"}, "tsk_nope"},
		{"1.0 invalid params", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`,
			-32602, "INVALID_PARAMS", nil, "params.id"},
		{"1.0 method not found", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"Frobnicate","params":{}}`,
			-32601, "METHOD_NOT_FOUND", map[string]string{"method": "Frobnicate"}, "Frobnicate"},
		{"1.0 parse error", "", v10, `{"jsonrpc":`, -32700, "PARSE_ERROR", nil, "not valid JSON"},
		{"1.0 version not supported", "", map[string]string{"A2A-Version": "9.9"},
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`,
			-32009, "VERSION_NOT_SUPPORTED", map[string]string{"supportedVersions": `["0.3","1.0"]`}, "9.9"},
		{"1.0 url part", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"url":"https://x.example/a.png","mediaType":"image/png"}]}}}`,
			-32005, "CONTENT_TYPE_NOT_SUPPORTED", map[string]string{"mediaType": "image/png"}, "message.parts[0]"},
		{"1.0 raw part", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"},{"raw":"aGk="}]}}}`,
			-32005, "CONTENT_TYPE_NOT_SUPPORTED", map[string]string{"mediaType": "application/octet-stream"}, "message.parts[1]"},
		{"1.0 text of another media type", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"{}","mediaType":"application/json"}]}}}`,
			-32005, "CONTENT_TYPE_NOT_SUPPORTED", map[string]string{"mediaType": "application/json"}, "application/json"},
		{"1.0 part with nothing", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"metadata":{}}]}}}`,
			-32602, "INVALID_PARAMS", nil, "message.parts[0]"},
		{"1.0 no role", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","parts":[{"text":"hi"}]}}}`,
			-32602, "INVALID_PARAMS", nil, "message.role"},
		{"1.0 push config method", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t","pushNotificationConfig":{"url":"https://x.example/hook"}}}`,
			-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", nil, "push"},
		{"1.0 push config in send", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"taskPushNotificationConfig":{"url":"https://x.example/hook"}}}}`,
			-32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", nil, "taskPushNotificationConfig"},
		{"1.0 extended card", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard","params":{}}`,
			-32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", nil, "extended card"},
		{"version from the query", "?A2A-Version=1.0", nil,
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"tsk_q"}}`,
			-32001, "TASK_NOT_FOUND", map[string]string{"taskId": "tsk_q"}, "tsk_q"},
		{"0.3 message without role", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","parts":[{"kind":"text","text":"hi"}]}}}`,
			-32602, "", nil, "message.role"},
		{"0.3 part without kind", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"text":"hi"}]}}}`,
			-32602, "", nil, "message.parts[0].kind"},
		{"0.3 part of an unknown kind", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"video","text":"hi"}]}}}`,
			-32602, "", nil, `message.parts[0].kind "video"`},
		{"0.3 file part", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"file","file":{"uri":"https://x.example/a.pdf","mimeType":"application/pdf"}}]}}}`,
			-32005, "", nil, "is a file of type application/pdf"},
		{"0.3 push config method", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"tasks/pushNotificationConfig/get","params":{"id":"t"}}`,
			-32003, "", nil, "push"},
		{"1.0 body that is not JSON", "", map[string]string{"A2A-Version": "1.0", "Content-Type": "text/plain"},
			`{'jsonrpc': '2.0', 'id': 1, 'method': 'SendMessage'}`,
			-32005, "CONTENT_TYPE_NOT_SUPPORTED", map[string]string{"mediaType": "text/plain"}, `Content-Type "text/plain"`},
		{"0.3 body that is not JSON", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			`a=b`, -32005, "", nil, "application/json"},
		{"JSON with a charset is JSON", "", map[string]string{"A2A-Version": "1.0", "Content-Type": "application/json; charset=utf-8"},
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"tsk_cs"}}`,
			-32001, "TASK_NOT_FOUND", map[string]string{"taskId": "tsk_cs"}, "tsk_cs"},
		{"0.3 messageId too long", "", nil,
			`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"` + strings.Repeat("m", 300) + `","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
			-32602, "", nil, "message.messageId"},
		{"1.0 contextId with a control character", "", v10,
			`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m1","contextId":"a\u0007b","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
			-32602, "INVALID_PARAMS", nil, "message.contextId"},
		{"version query ignored when the header says 0.3", "?A2A-Version=1.0", map[string]string{"A2A-Version": "0.3"},
			`{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`,
			-32601, "", nil, "GetTask"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ct, body := rawPost(t, srv, tc.query, tc.headers, tc.body)
			if status != http.StatusOK || ct != "application/json" {
				t.Fatalf("HTTP %d %q: %s", status, ct, body)
			}
			var r struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int             `json:"code"`
					Message string          `json:"message"`
					Data    json.RawMessage `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &r); err != nil || r.Error == nil || r.JSONRPC != "2.0" {
				t.Fatalf("not a JSON-RPC error: %s", body)
			}
			if r.Error.Code != tc.code {
				t.Fatalf("code %d, want %d: %s", r.Error.Code, tc.code, body)
			}
			var detail string
			if tc.reason == "" {
				var data map[string]any
				if err := json.Unmarshal(r.Error.Data, &data); err != nil {
					t.Fatalf("0.3 data is not an object: %s", body)
				}
				detail, _ = data["error"].(string)
			} else {
				var infos []errInfo
				if err := json.Unmarshal(r.Error.Data, &infos); err != nil || len(infos) != 1 {
					t.Fatalf("1.0 data is not a list of one ErrorInfo: %s", body)
				}
				info := infos[0]
				if info.Type != "type.googleapis.com/google.rpc.ErrorInfo" || info.Reason != tc.reason || info.Domain != "a2a-protocol.org" {
					t.Fatalf("ErrorInfo %+v, want reason %s", info, tc.reason)
				}
				detail = info.Metadata["detail"]
				for k, v := range tc.meta {
					if info.Metadata[k] != v {
						t.Errorf("metadata %s = %q, want %q", k, info.Metadata[k], v)
					}
				}
				if len(info.Metadata) != len(tc.meta)+1 {
					t.Errorf("metadata %v, want detail and %v", info.Metadata, tc.meta)
				}
			}
			if !strings.Contains(detail, tc.names) || !strings.Contains(r.Error.Message, tc.names) {
				t.Errorf("detail %q / message %q do not name %q", detail, r.Error.Message, tc.names)
			}
		})
	}
	if len(exec.jobs) != 0 {
		t.Errorf("refused requests ran %d tasks", len(exec.jobs))
	}
}

// TestNotification: a request without id is a JSON-RPC notification, answered with no
// body and never run.
func TestNotification(t *testing.T) {
	exec := &echoExec{}
	_, srv := newServer(t, Config{Executor: exec})
	for _, tc := range []struct{ name, version, body string }{
		{"0.3 send", "", `{"jsonrpc":"2.0","method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`},
		{"1.0 send", "1.0", `{"jsonrpc":"2.0","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`},
		{"unknown method", "1.0", `{"jsonrpc":"2.0","method":"Nope"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{}
			if tc.version != "" {
				headers["A2A-Version"] = tc.version
			}
			status, _, body := rawPost(t, srv, "", headers, tc.body)
			if status != http.StatusNoContent || len(body) != 0 {
				t.Fatalf("HTTP %d with %q, want 204 and no body", status, body)
			}
		})
	}
	// A request that is not a valid Request object is answered, with id null.
	status, _, body := rawPost(t, srv, "", nil, `{"jsonrpc":"1.0","method":"message/send"}`)
	if status != http.StatusOK || !bytes.Contains(body, []byte(`"id":null`)) || !bytes.Contains(body, []byte(`-32600`)) {
		t.Errorf("invalid request without id: HTTP %d %s", status, body)
	}
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if len(exec.jobs) != 0 {
		t.Errorf("notifications ran %d tasks", len(exec.jobs))
	}
}

// TestSubscribeTerminal: SubscribeToTask on a finished task is refused with
// UnsupportedOperationError as a plain JSON-RPC response (no stream); 0.3's
// tasks/resubscribe answers the final state as a one-event stream.
func TestSubscribeTerminal(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	done := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	status, ct, body := rawPost(t, srv, "", map[string]string{"A2A-Version": "1.0", "Accept": "text/event-stream"},
		`{"jsonrpc":"2.0","id":"s1","method":"SubscribeToTask","params":{"id":"`+done.ID+`"}}`)
	want := `{"jsonrpc":"2.0","id":"s1","error":{"code":-32004,"message":"Unsupported operation: task ` + done.ID + ` is already completed and sends no more events; read it with GetTask",` +
		`"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNSUPPORTED_OPERATION","domain":"a2a-protocol.org","metadata":{"detail":"task ` + done.ID + ` is already completed and sends no more events; read it with GetTask"}}]}}` + "\n"
	if status != http.StatusOK || ct != "application/json" || string(body) != want {
		t.Errorf("HTTP %d %q:\n%s\nwant\n%s", status, ct, body, want)
	}
	status, ct, body = rawPost(t, srv, "", nil, `{"jsonrpc":"2.0","id":"s2","method":"tasks/resubscribe","params":{"id":"`+done.ID+`"}}`)
	if status != http.StatusOK || ct != "text/event-stream" || !bytes.Contains(body, []byte(`"state":"completed"`)) {
		t.Errorf("0.3 resubscribe: HTTP %d %q: %s", status, ct, body)
	}
}

// TestCardVersions: the strict 1.0 card by default and whenever the client asks for 1.0
// (header or query), the mixed card when it asks for 0.3, or under CardV03 when it does
// not ask for 1.0; Last-Modified beside the ETag.
func TestCardVersions(t *testing.T) {
	fields03 := []string{"url", "protocolVersion", "preferredTransport", "additionalInterfaces"}
	for _, tc := range []struct {
		name        string
		cardVersion string
		path        string
		headers     map[string]string
		strict      bool
	}{
		{"default", "", "", nil, true},
		{"0.3 header", "", "", map[string]string{"A2A-Version": "0.3"}, false},
		{"0.3 query", "", "?A2A-Version=0.3.0", nil, false},
		{"1.0 header", "", "", map[string]string{"A2A-Version": "1.0"}, true},
		{"1.0 query", "", "?A2A-Version=1.0", nil, true},
		{"unknown version", "", "", map[string]string{"A2A-Version": "2.0"}, true},
		{"operator card 1.0", CardV10, "", nil, true},
		{"operator card 1.0, 0.3 asked", CardV10, "", map[string]string{"A2A-Version": "0.3"}, true},
		{"operator card 0.3", CardV03, "", nil, false},
		{"operator card 0.3, 1.0 asked", CardV03, "", map[string]string{"A2A-Version": "1.0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := newServer(t, Config{Executor: &echoExec{}, Bearer: "tok", CardVersion: tc.cardVersion})
			resp, card := getCard(t, srv, prefix+"/.well-known/agent-card.json"+tc.path, tc.headers)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d", resp.StatusCode)
			}
			for _, f := range append(fields03, "security") {
				if _, has := card[f]; has == tc.strict {
					t.Errorf("field %s present = %v on a strict=%v card", f, has, tc.strict)
				}
			}
			scheme := card["securitySchemes"].(map[string]any)["bearer"].(map[string]any)
			if _, has := scheme["type"]; has == tc.strict {
				t.Errorf("0.3 security scheme fields on a strict=%v card: %v", tc.strict, scheme)
			}
			if len(card["supportedInterfaces"].([]any)) != 4 { // JSONRPC and HTTP+JSON, 1.0 and 0.3
				t.Errorf("supportedInterfaces %v", card["supportedInterfaces"])
			}
			lm, err := http.ParseTime(resp.Header.Get("Last-Modified"))
			if err != nil || time.Since(lm) > time.Minute {
				t.Fatalf("Last-Modified %q", resp.Header.Get("Last-Modified"))
			}
			again, _ := getCard(t, srv, prefix+"/.well-known/agent-card.json"+tc.path, map[string]string{"If-Modified-Since": resp.Header.Get("Last-Modified")})
			if again.StatusCode != http.StatusNotModified {
				t.Errorf("If-Modified-Since: HTTP %d", again.StatusCode)
			}
		})
	}
	if _, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard(), CardVersion: "0.2"}); err == nil {
		t.Error("card version 0.2 accepted")
	}
}

// TestCardLastModified: Last-Modified moves only when what the card says changes.
func TestCardLastModified(t *testing.T) {
	h, srv := newServer(t, Config{Executor: &echoExec{}})
	h.mu.Lock()
	h.cardTime = h.cardTime.Add(-time.Hour) // as if started an hour ago
	first := h.cardTime
	h.mu.Unlock()
	lm := func() time.Time {
		resp, _ := getCard(t, srv, prefix+"/.well-known/agent-card.json", nil)
		v, err := http.ParseTime(resp.Header.Get("Last-Modified"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if got := lm(); !got.Equal(first.Truncate(time.Second)) {
		t.Fatalf("Last-Modified %v, want %v", got, first)
	}
	if err := h.Update(Config{Executor: &echoExec{}, Card: testCard(), MaxBody: 99}); err != nil {
		t.Fatal(err)
	}
	if got := lm(); !got.Equal(first.Truncate(time.Second)) {
		t.Errorf("a change the card does not show moved Last-Modified to %v", got)
	}
	card := testCard()
	card.Version = "2.0.0"
	if err := h.Update(Config{Executor: &echoExec{}, Card: card}); err != nil {
		t.Fatal(err)
	}
	if got := lm(); !got.After(first) {
		t.Errorf("a new card version kept Last-Modified %v", got)
	}
}
