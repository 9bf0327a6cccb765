package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeRequest feeds arbitrary bodies through the JSON-RPC decoding of both
// dialects: the envelope, the method lookup and every params parser. Nothing may panic;
// every refusal is a known code; every answer, error or not, encodes as JSON.
func FuzzDecodeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":"x","method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi","mediaType":"text/plain"}]},"configuration":{"returnImmediately":true,"historyLength":2}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"message/stream","params":{"message":{"messageId":"m","role":"user","parts":[{"kind":"file","file":{"uri":"x"}}]},"configuration":{"blocking":false,"pushNotificationConfig":{"url":"x"}}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"GetTask","params":{"id":"tsk_1","historyLength":-1}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ListTasks","params":{"pageSize":5,"status":"TASK_STATE_WORKING","pageToken":"abc","statusTimestampAfter":"2025-01-01T00:00:00Z"}}`,
		`{"jsonrpc":"2.0","method":"tasks/cancel","params":{"id":"t"}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tasks/get"}]`,
		`{"jsonrpc":"2.0","id":{},"method":""}`,
		`{"jsonrpc":"2.0","id":1e400,"method":"SendMessage","params":{"message":{"parts":[{"raw":"aGk=","url":"u"}]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"file","file":{"bytes":"aGk=","name":"a.txt","mimeType":"text/plain"}},{"kind":"data","data":{"k":[1,2]}}]}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk","filename":"a.bin","mediaType":"application/pdf"},{"url":"https://example.com/f.pdf"},{"data":[1,"x",null]}]}}}`,
		`"hello"`, ``, `{`, `null`,
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	known := map[int]bool{}
	for code := range reasons {
		known[code] = true
	}
	f.Fuzz(func(t *testing.T, body []byte, v1 bool) {
		d := v03
		if v1 {
			d = v10
		}
		req, notify, rerr := parseRequest(body)
		if notify && rerr != nil {
			t.Fatalf("a notification with an error: %v", rerr)
		}
		check := func(result any, rerr *rpcError) {
			if rerr != nil && !known[rerr.Code] {
				t.Fatalf("unknown code %d: %s", rerr.Code, rerr.Message)
			}
			b, err := json.Marshal(d.response(req.id, result, rerr))
			if err != nil || !json.Valid(b) {
				t.Fatalf("answer does not encode: %v: %s", err, b)
			}
		}
		if rerr != nil {
			check(nil, rerr)
			return
		}
		m, rerr := lookupMethod(d, req.method)
		if rerr != nil {
			check(nil, rerr)
			return
		}
		switch m {
		case mSend, mStream:
			in, rerr := d.parseSend(req.params)
			if rerr == nil && (in.messageID == "" || len(in.taskID) > maxIDLen || len(in.contextID) > maxIDLen) {
				t.Fatalf("accepted a send without messageId or with an overlong id: %+v", in)
			}
			check(nil, rerr)
		case mGet, mCancel, mSubscribe:
			p, rerr := parseTaskParams(req.params)
			if rerr == nil && p.ID == "" {
				t.Fatal("accepted task params without id")
			}
			check(nil, rerr)
		case mList:
			var p listParams
			if len(req.params) > 0 && string(req.params) != "null" {
				if err := strictUnmarshal(req.params, &p); err != nil {
					check(nil, errInvalidParams(err.Error()))
					return
				}
			}
			h := &Handler{store: newMemoryStore(keepFinished)}
			res, rerr := h.list(d, caller{}, p, newLinker("", time.Time{}))
			check(res, rerr)
		}
	})
}

// FuzzDecodeJournal feeds arbitrary bytes to the decoders of what the durable store
// reads back — journal events and task records: nothing may panic, and an event that
// decodes renders in both dialects.
func FuzzDecodeJournal(f *testing.F) {
	now := time.Now()
	snap := snapshot{ID: "tsk_1", ContextID: "ctx_1", Status: status{State: stateWorking, Time: now}, Updated: now,
		History: []message{{ID: "m1", Role: "user", Text: "hi"}}}
	for _, e := range []event{
		{seq: 1, kind: evTask, task: &snap},
		{seq: 2, kind: evStatus, status: status{State: stateCompleted, Time: now}, final: true},
		{seq: 3, kind: evArtifact, art: artifact{ID: "answer", Name: "answer", Text: "42"}, last: true},
	} {
		f.Add(encodeEvent(e))
	}
	rec, _ := json.Marshal(taskRecord{snapshot: snap, Created: now, Seq: 3})
	f.Add(rec)
	f.Add([]byte(`{"Kind":"task"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if e, err := decodeEvent(7, data); err == nil {
			for _, d := range []dialect{v03, v10} {
				if _, err := json.Marshal(d.event(e, "tsk_1", "ctx_1")); err != nil {
					t.Fatalf("a decoded event does not render: %v", err)
				}
			}
		}
		var r taskRecord
		_ = json.Unmarshal(data, &r)
	})
}

// FuzzREST feeds arbitrary HTTP+JSON requests — method, path, query, body, version —
// through the handler: nothing may panic, every status is a real one, and every answer
// on a path shaped like an HTTP+JSON route is JSON, or SSE whose events are JSON
// (docs/reference/a2a.md "HTTP+JSON (REST)").
func FuzzREST(f *testing.F) {
	send10 := `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}]},"configuration":{"historyLength":1}}`
	send03 := `{"message":{"messageId":"m","role":"ROLE_USER","content":[{"text":"hi"}]},"configuration":{"blocking":true}}`
	for _, s := range []struct{ method, path, query, body, version string }{
		{"POST", "message:send", "", send10, "1.0"},
		{"POST", "v1/message:send", "", send03, ""},
		{"POST", "v1/message:send", "", `{"message":{"message_id":"m","role":"ROLE_USER","content":[{"file":{"fileWithUri":"x"}}]}}`, ""},
		{"POST", "v1/message:send", "", `{"message":{"message_id":"m","role":"ROLE_USER","content":[{"file":{"file_with_bytes":"aGk=","mime_type":"text/plain","name":"a"}},{"data":{"data":{"k":1}}}]}}`, ""},
		{"POST", "message:send", "", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"raw":"aGk=","filename":"a"},{"data":{"k":1}}]}}`, "1.0"},
		{"POST", "message:stream", "", send10, "1.0"},
		{"POST", "v1/message:stream", "", send03, "0.3"},
		{"GET", "tasks/tsk_1", "historyLength=2", "", "1.0"},
		{"GET", "v1/tasks/tsk_1", "history_length=x", "", ""},
		{"GET", "tasks", "contextId=c&status=TASK_STATE_WORKING&pageSize=5&pageToken=abc&includeArtifacts=true&statusTimestampAfter=2025-01-01T00:00:00Z", "", "1.0"},
		{"POST", "tasks/tsk_1:cancel", "", "", "1.0"},
		{"POST", "v1/tasks/tsk_1:cancel", "", "{}", ""},
		{"GET", "tasks/tsk_1:subscribe", "", "", "1.0"},
		{"POST", "v1/tasks/tsk_1:subscribe", "", "", ""},
		{"POST", "tasks/tsk_1/pushNotificationConfigs", "", `{"id":"p","url":"https://example.com/hook"}`, "1.0"},
		{"POST", "v1/tasks/tsk_1/pushNotificationConfigs", "", `{"name":"tasks/tsk_1/pushNotificationConfigs/p","pushNotificationConfig":{"url":"https://example.com/hook"}}`, ""},
		{"POST", "v1/tasks/tsk_1/pushNotificationConfigs", "", `{"parent":"tasks/tsk_1","config_id":"p","config":{"push_notification_config":{"url":"u"}}}`, ""},
		{"GET", "tasks/tsk_1/pushNotificationConfigs", "pageSize=1", "", "1.0"},
		{"GET", "tasks/tsk_1/pushNotificationConfigs/p", "", "", "1.0"},
		{"DELETE", "v1/tasks/tsk_1/pushNotificationConfigs/p", "", "", ""},
		{"GET", "extendedAgentCard", "", "", "1.0"},
		{"GET", "v1/card", "", "", ""},
		{"GET", "tenant-a/tasks/x", "", "", "1.0"},
		{"PUT", "message:send", "", "", "9.9"},
		{"POST", "message:frobnicate", "", "[", "1.0"},
		{"GET", "tasks/%zz", "", "", ""},
	} {
		f.Add(s.method, s.path, s.query, []byte(s.body), s.version)
	}
	h, err := NewHandler(Config{Card: testCard(), Executor: &echoExec{}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		stopNow(h)
	})
	f.Fuzz(func(t *testing.T, method, path, query string, body []byte, version string) {
		u, err := url.Parse("http://127.0.0.1" + prefix + "/" + path)
		if err != nil || !validHeader(version) {
			return
		}
		u.RawQuery = query
		r := &http.Request{Method: method, URL: u, Host: u.Host, Header: http.Header{}, Body: io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		r.Header.Set("Content-Type", "application/json")
		if version != "" {
			r.Header.Set("A2A-Version", version)
		}
		ctx, cancel := context.WithTimeout(context.Background(), watchdog)
		defer cancel()
		r = r.WithContext(ctx)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code < 100 || w.Code > 599 {
			t.Fatalf("HTTP status %d", w.Code)
		}
		if _, rest := matchREST(u.EscapedPath()); !rest {
			return
		}
		switch ct := w.Header().Get("Content-Type"); ct {
		case "application/json":
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("HTTP %d: not JSON: %q", w.Code, w.Body.Bytes())
			}
		case "text/event-stream":
			for _, line := range strings.Split(w.Body.String(), "\n") {
				if data, ok := strings.CutPrefix(line, "data: "); ok && !json.Valid([]byte(data)) {
					t.Fatalf("an SSE event is not JSON: %q", data)
				}
			}
		default:
			t.Fatalf("HTTP %d with Content-Type %q: %q", w.Code, ct, w.Body.Bytes())
		}
	})
}

// validHeader reports whether v may be sent as a header value.
func validHeader(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// FuzzInboundParts feeds arbitrary message parts through the decoding and admission of
// every binding that brings them — JSON-RPC 0.3 and 1.0 (HTTP+JSON 1.0 hands its body to
// the same parser), HTTP+JSON 0.3's protobuf JSON — against a capsule taking PDFs, JSON
// and images within small limits, files by URL fetched from a fake. Nothing may panic; a
// refusal is invalid params or content type not supported; an accepted message keeps its
// limits and its text, and its parts, rendered back in the binding's dialect and decoded
// again, are the same parts.
func FuzzInboundParts(f *testing.F) {
	for _, seed := range []string{
		`[{"kind":"text","text":"hi"},{"kind":"file","file":{"bytes":"aGk=","name":"a.pdf","mimeType":"application/pdf"}},{"kind":"data","data":{"k":[1,2]}}]`,
		`[{"text":"hi"},{"raw":"aGk","filename":"../../etc/passwd","mediaType":"image/png"},{"url":"https://files.example/a.pdf"},{"data":[1,"x",null]}]`,
		`[{"text":"hi"},{"file":{"fileWithBytes":"aGk=","mimeType":"application/pdf","name":"a"}},{"file":{"fileWithUri":"https://files.example/a.pdf"}},{"data":{"data":{"k":1}}}]`,
		`[{"raw":"` + strings.Repeat("QUFB", 400) + `","mediaType":"image/png"}]`,
		`[{"kind":"file","file":{"uri":"https://files.example/big.pdf"}}]`,
		`[{"kind":"file","file":{"bytes":"aGk=","uri":"x"}}]`,
		`[{"text":"x","mediaType":"text/html"}]`, `[]`, `[{}]`, `null`, `[1]`,
	} {
		for b := range uint8(3) {
			f.Add([]byte(seed), b)
		}
	}
	inputs, _ := Inputs{Modes: []string{"application/pdf", "application/json", "image/*"}, MaxFileBytes: 1000, MaxMessageBytes: 1500,
		Fetch: func(_ context.Context, u string, limit int64) ([]byte, string, error) {
			body := map[string]string{"https://files.example/a.pdf": "%PDF", "https://files.example/big.pdf": strings.Repeat("x", 1200)}[u]
			if body == "" {
				return nil, "", io.ErrUnexpectedEOF
			}
			if int64(len(body)) > limit {
				return nil, "", ErrFileTooLarge
			}
			return []byte(body), "application/pdf", nil
		}}.normalize()
	f.Fuzz(func(t *testing.T, parts []byte, binding uint8) {
		if !json.Valid(parts) {
			return
		}
		d := v10
		var params json.RawMessage
		switch binding % 3 {
		case 0: // JSON-RPC 0.3
			d = v03
			params = json.RawMessage(`{"message":{"kind":"message","messageId":"m","role":"user","parts":` + string(parts) + `}}`)
		case 1: // JSON-RPC and HTTP+JSON 1.0
			params = json.RawMessage(`{"message":{"messageId":"m","role":"ROLE_USER","parts":` + string(parts) + `}}`)
		case 2: // HTTP+JSON 0.3
			d = v03
			var body map[string]json.RawMessage
			if json.Unmarshal([]byte(`{"message":{"messageId":"m","role":"ROLE_USER","content":`+string(parts)+`}}`), &body) != nil {
				return
			}
			var rerr *rpcError
			if params, rerr = send03(body); rerr != nil {
				if rerr.Code != codeInvalidParams && rerr.Code != codeInvalidRequest {
					t.Fatalf("HTTP+JSON 0.3 refused with %d: %s", rerr.Code, rerr.Message)
				}
				return
			}
		}
		in, rerr := d.parseSend(params)
		if rerr == nil {
			rerr = in.admit(context.Background(), inputs)
		}
		if rerr != nil {
			if rerr.Code != codeInvalidParams && rerr.Code != codeContentType {
				t.Fatalf("refused with %d: %s", rerr.Code, rerr.Message)
			}
			return
		}
		var total int
		var texts []string
		for _, p := range in.payload {
			switch p.Kind {
			case KindText:
				texts = append(texts, p.Text)
			case KindFile:
				if len(p.Bytes) > int(inputs.MaxFileBytes) || !inputs.accepts(p.MediaType) {
					t.Fatalf("a file of %d bytes, type %q, was accepted", len(p.Bytes), p.MediaType)
				}
				total += len(p.Bytes)
			case KindData:
				total += len(p.Data)
			default:
				t.Fatalf("a part of kind %q", p.Kind)
			}
		}
		if total > int(inputs.MaxMessageBytes) || in.payload != nil && strings.Join(texts, "\n") != in.text {
			t.Fatalf("accepted %d bytes; text %q from parts %q", total, in.text, texts)
		}
		// Rendered back as history and decoded again: the same parts.
		w, err := json.Marshal(d.message(message{ID: "m", Role: "user", Text: in.text, Parts: in.payload}))
		if err != nil {
			t.Fatal(err)
		}
		var back inMessage
		if err := json.Unmarshal(w, &back); err != nil {
			t.Fatalf("history does not decode: %v: %s", err, w)
		}
		for i, wp := range back.Parts {
			p, rerr := d.parsePart(i, wp)
			if rerr != nil {
				t.Fatalf("rendered part %d does not decode: %s: %s", i, rerr.Message, w)
			}
			if in.payload == nil {
				continue
			}
			orig := in.payload[i]
			if p.kind.String() != orig.Kind || p.text != orig.Text || p.url != orig.URL || p.url == "" && !bytes.Equal(p.bytes, orig.Bytes) ||
				!sameJSON(p.data, orig.Data) || p.name != orig.Name {
				t.Fatalf("part %d rendered as %s, decoded as %+v, was %+v", i, w, p, orig)
			}
		}
	})
}

// sameJSON reports whether a and b are the same JSON value, numbers compared by their
// digits: a data part comes back as the same value, though encoding/json may escape
// characters of it differently (& as \u0026) when it renders history (the
// FuzzInboundParts corpus keeps the input that showed it).
func sameJSON(a, b []byte) bool {
	if bytes.Equal(a, b) {
		return true
	}
	decode := func(b []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		return v, d.Decode(&v) == nil && !d.More()
	}
	x, okx := decode(a)
	y, oky := decode(b)
	return okx && oky && reflect.DeepEqual(x, y)
}
