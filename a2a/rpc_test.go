package a2a

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestSend03(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	if task.Kind != "task" || task.Status.State != "completed" {
		t.Fatalf("task %+v", task)
	}
	if !strings.HasPrefix(task.ID, "tsk_") || len(task.ID) != 36 || !strings.HasPrefix(task.ContextID, "ctx_") {
		t.Errorf("ids %q %q", task.ID, task.ContextID)
	}
	if len(task.Artifacts) != 1 || text(task.Artifacts[0].Parts) != "echo: hi" || task.Artifacts[0].Parts[0].Kind != "text" {
		t.Fatalf("artifacts %+v", task.Artifacts)
	}
	if len(task.History) != 1 || task.History[0].Role != "user" || task.History[0].Kind != "message" || text(task.History[0].Parts) != "hi" {
		t.Errorf("history %+v", task.History)
	}
	if task.Status.Timestamp == "" {
		t.Error("status without timestamp")
	}
}

func TestSend10(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	res := decode[tWrap](t, ok(t, call(t, srv, "1.0", "SendMessage", map[string]any{"message": msg10("hi", "contextId=my-ctx")})))
	task := res.Task
	if task == nil || task.Status.State != "TASK_STATE_COMPLETED" || task.ContextID != "my-ctx" {
		t.Fatalf("result %+v", res)
	}
	if task.Kind != "" || len(task.Artifacts) != 1 || task.Artifacts[0].Parts[0].Kind != "" || text(task.Artifacts[0].Parts) != "echo: hi" {
		t.Fatalf("1.0 shapes carry no kind: %+v", task)
	}
	if len(task.History) != 1 || task.History[0].Role != "ROLE_USER" {
		t.Errorf("history %+v", task.History)
	}
}

func TestFailedTask(t *testing.T) {
	_, srv := newServer(t, Config{Executor: failingExec{}})
	task := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	if task.Status.State != "failed" || task.Status.Message == nil || text(task.Status.Message.Parts) != "boom" || task.Status.Message.Role != "agent" {
		t.Fatalf("task %+v", task)
	}
	if len(task.Artifacts) != 0 {
		t.Errorf("a failed task has artifacts: %+v", task.Artifacts)
	}
}

func TestGetTask(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &inputExec{errs: make(chan error, 1)}})
	first := decode[tObj](t, ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("hi")})))
	ok(t, call(t, srv, "", "message/send", map[string]any{"message": msg03("Ann", "taskId="+first.ID)}))
	// history: hi (user), prompt (agent), Ann (user)
	for _, tc := range []struct {
		name    string
		version string
		length  any
		want    int
	}{
		{"all", "", nil, 3},
		{"none", "", 0, 0},
		{"last", "", 1, 1},
		{"more than there is", "", 10, 3},
		{"1.0", "1.0", 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := map[string]any{"id": first.ID}
			if tc.length != nil {
				params["historyLength"] = tc.length
			}
			method := "tasks/get"
			if tc.version == "1.0" {
				method = "GetTask"
			}
			task := decode[tObj](t, ok(t, call(t, srv, tc.version, method, params)))
			if len(task.History) != tc.want {
				t.Fatalf("history %d, want %d: %+v", len(task.History), tc.want, task.History)
			}
			if tc.want > 0 && text(task.History[len(task.History)-1].Parts) != "Ann" {
				t.Errorf("not the most recent messages: %+v", task.History)
			}
			if len(task.Artifacts) != 1 || text(task.Artifacts[0].Parts) != "hello, Ann" {
				t.Errorf("artifacts %+v", task.Artifacts)
			}
		})
	}
	fails(t, call(t, srv, "", "tasks/get", map[string]any{"id": "tsk_nope"}), codeTaskNotFound)
	fails(t, call(t, srv, "", "tasks/get", map[string]any{"id": first.ID, "historyLength": -1}), codeInvalidParams)
}

func TestRPCErrors(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	valid := request("message/send", map[string]any{"message": msg03("hi")})
	for _, tc := range []struct {
		name    string
		version string
		body    string
		code    int
	}{
		{"malformed JSON", "", `{"jsonrpc": "2.0", "id": 1, "method": `, codeParse},
		{"empty body", "", ``, codeParse},
		{"batch", "", `[` + string(valid) + `]`, codeInvalidRequest},
		{"not an object", "", `"hello"`, codeInvalidRequest},
		{"no jsonrpc", "", `{"id": 1, "method": "tasks/get", "params": {"id": "x"}}`, codeInvalidRequest},
		{"wrong jsonrpc", "", `{"jsonrpc": "1.0", "id": 1, "method": "tasks/get", "params": {"id": "x"}}`, codeInvalidRequest},
		{"object id", "", `{"jsonrpc": "2.0", "id": {}, "method": "tasks/get", "params": {"id": "x"}}`, codeInvalidRequest},
		{"unknown method", "", string(request("tasks/frobnicate", map[string]any{})), codeMethodNotFound},
		{"1.0 method in 0.3", "", string(request("GetTask", map[string]any{"id": "x"})), codeMethodNotFound},
		{"0.3 method in 1.0", "1.0", string(request("tasks/get", map[string]any{"id": "x"})), codeMethodNotFound},
		{"wrong version", "2.0", string(valid), codeVersion},
		{"garbage version", "latest", string(valid), codeVersion},
		{"params not an object", "", string(request("message/send", []int{1})), codeInvalidParams},
		{"no message", "", string(request("message/send", map[string]any{})), codeInvalidParams},
		{"data part", "", string(request("message/send", map[string]any{"message": map[string]any{
			"messageId": "m1", "role": "user", "parts": []map[string]any{{"kind": "data", "data": map[string]any{}}}}})), codeContentType},
		{"no parts", "", string(request("message/send", map[string]any{"message": map[string]any{
			"messageId": "m1", "role": "user", "parts": []map[string]any{}}})), codeInvalidParams},
		{"no messageId", "", string(request("message/send", map[string]any{"message": map[string]any{
			"role": "user", "parts": []map[string]any{{"kind": "text", "text": "x"}}}})), codeInvalidParams},
		{"agent role", "", string(request("message/send", map[string]any{"message": map[string]any{
			"messageId": "m1", "role": "agent", "parts": []map[string]any{{"kind": "text", "text": "x"}}}})), codeInvalidParams},
		{"get without id", "", string(request("tasks/get", map[string]any{})), codeInvalidParams},
		{"push config in send", "", string(request("message/send", map[string]any{"message": msg03("hi"),
			"configuration": map[string]any{"pushNotificationConfig": map[string]any{"url": "https://x"}}})), codePushNotSupported},
		{"push methods", "", string(request("tasks/pushNotificationConfig/set", map[string]any{})), codePushNotSupported},
		{"1.0 push methods", "1.0", string(request("CreateTaskPushNotificationConfig", map[string]any{})), codePushNotSupported},
		{"extended card", "", string(request("agent/getAuthenticatedExtendedCard", map[string]any{})), codeNoExtendedCard},
		{"1.0 extended card", "1.0", string(request("GetExtendedAgentCard", map[string]any{})), codeNoExtendedCard},
		{"unknown task", "", string(request("message/send", map[string]any{"message": msg03("hi", "taskId=tsk_nope")})), codeTaskNotFound},
		{"cancel unknown", "1.0", string(request("CancelTask", map[string]any{"id": "tsk_nope"})), codeTaskNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{}
			if tc.version != "" {
				headers["A2A-Version"] = tc.version
			}
			resp, body := post(t, srv, headers, []byte(tc.body))
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("HTTP %d %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			r := decode[rpcResp](t, body)
			if r.Error == nil || r.Error.Code != tc.code {
				t.Fatalf("want error %d, got %s", tc.code, body)
			}
			if r.Error.Message == "" || r.Error.detail() == "" {
				t.Errorf("error without a message: %s", body)
			}
		})
	}
}

func TestVersions(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	for _, v := range []string{"", "0.3", "0.3.0", "0.3.7"} {
		task := decode[tObj](t, ok(t, call(t, srv, v, "message/send", map[string]any{"message": msg03("x")})))
		if task.Status.State != "completed" {
			t.Errorf("version %q: %+v", v, task)
		}
	}
	for _, v := range []string{"1.0", "1.0.2"} {
		res := decode[tWrap](t, ok(t, call(t, srv, v, "SendMessage", map[string]any{"message": msg10("x")})))
		if res.Task == nil || res.Task.Status.State != "TASK_STATE_COMPLETED" {
			t.Errorf("version %q: %+v", v, res)
		}
	}
}

func TestStreamingMethodErrorsAreSSE(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	for _, tc := range []struct {
		name, version, method string
		params                any
		code                  int
	}{
		{"unknown task", "", "tasks/resubscribe", map[string]any{"id": "tsk_nope"}, codeTaskNotFound},
		{"bad params", "1.0", "SendStreamingMessage", map[string]any{}, codeInvalidParams},
		{"wrong version", "9.9", "message/stream", map[string]any{"message": msg03("x")}, codeVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := drain(t, stream(t, srv, tc.version, tc.method, tc.params))
			if len(events) != 1 || events[0].Data.Error == nil || events[0].Data.Error.Code != tc.code {
				t.Fatalf("events %+v", events)
			}
		})
	}
}

func TestBearer(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Bearer: "s3cret"})
	body := request("message/send", map[string]any{"message": msg03("hi")})
	for _, tc := range []struct {
		name, auth string
		want       int
		challenge  string // RFC 6750: no error for a request without a token, invalid_token for a wrong one
	}{
		{"missing", "", http.StatusUnauthorized, `Bearer realm="capsule"`},
		{"wrong", "Bearer nope", http.StatusUnauthorized, `Bearer realm="capsule", error="invalid_token", error_description="the bearer token is none of this route's tokens"`},
		{"prefix of the token", "Bearer s3cre", http.StatusUnauthorized, `Bearer realm="capsule", error="invalid_token", error_description="the bearer token is none of this route's tokens"`},
		{"other scheme", "Basic czNjcmV0", http.StatusUnauthorized, `Bearer realm="capsule"`},
		{"right", "Bearer s3cret", http.StatusOK, ""},
		{"scheme in lower case", "bearer s3cret", http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			headers := map[string]string{}
			if tc.auth != "" {
				headers["Authorization"] = tc.auth
			}
			resp, got := post(t, srv, headers, body)
			if resp.StatusCode != tc.want {
				t.Fatalf("HTTP %d, want %d: %s", resp.StatusCode, tc.want, got)
			}
			if tc.want == http.StatusUnauthorized && resp.Header.Get("WWW-Authenticate") != tc.challenge {
				t.Errorf("WWW-Authenticate %q", resp.Header.Get("WWW-Authenticate"))
			}
			if tc.want == http.StatusOK && decode[rpcResp](t, got).Error != nil {
				t.Errorf("error: %s", got)
			}
		})
	}
}

func TestBodyLimit(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	huge := request("message/send", map[string]any{"message": msg03(strings.Repeat("x", 2<<20))})
	for _, tc := range []struct {
		name    string
		chunked bool
	}{{"declared length", false}, {"chunked", true}} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader = bytes.NewReader(huge)
			if tc.chunked {
				body = io.MultiReader(body) // hides the length: sent chunked
			}
			req, err := http.NewRequest(http.MethodPost, endpoint(srv), body)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.chunked && req.ContentLength != int64(len(huge)) {
				t.Fatal("length not declared")
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Fatalf("HTTP %d", resp.StatusCode)
			}
		})
	}
	// A configured limit applies as well.
	_, small := newServer(t, Config{Executor: &echoExec{}, MaxBody: 64})
	if resp, _ := post(t, small, nil, request("message/send", map[string]any{"message": msg03("hello there")})); resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("MaxBody 64: HTTP %d", resp.StatusCode)
	}
}

func TestNotPost(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	resp, err := srv.Client().Get(endpoint(srv))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" {
		t.Fatalf("HTTP %d, Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestConfigRefusals(t *testing.T) {
	base := Config{Card: testCard(), Executor: &echoExec{}}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		code   string
	}{
		{"no executor", func(c *Config) { c.Executor = nil }, CodeNoExecutor},
		{"bad acceptance", func(c *Config) { c.Lifecycle.Acceptance = "many" }, CodeAcceptance},
		{"negative depth", func(c *Config) { c.Lifecycle.Acceptance, c.Lifecycle.QueueDepth = "queue", -1 }, CodeRange},
		{"negative timeout", func(c *Config) { c.Lifecycle.InputTimeout = -1 }, CodeRange},
		{"negative body", func(c *Config) { c.MaxBody = -1 }, CodeRange},
		{"no name", func(c *Config) { c.Card.Name = "" }, CodeCard},
		{"skill without id", func(c *Config) { c.Card.Skills = []Skill{{Name: "x"}} }, CodeCard},
		{"bearer with space", func(c *Config) { c.Bearer = "a b" }, CodeBearerToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			tc.change(&cfg)
			_, err := NewHandler(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("NewHandler: %v, want %s", err, tc.code)
			}
			h, err := NewHandler(base)
			if err != nil {
				t.Fatal(err)
			}
			if err := h.Update(cfg); err == nil || !strings.Contains(err.Error(), tc.code) {
				t.Fatalf("Update: %v, want %s", err, tc.code)
			}
			_ = h.Shutdown(context.Background())
		})
	}
}

func TestIDsEchoed(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	for _, id := range []string{`"abc"`, `42`, `-1.5`, `null`} {
		body := `{"jsonrpc":"2.0","id":` + id + `,"method":"tasks/get","params":{"id":"tsk_nope"}}`
		_, got := post(t, srv, nil, []byte(body))
		var r struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(got, &r); err != nil || string(r.ID) != id {
			t.Errorf("id %s came back as %s", id, got)
		}
	}
}

func TestListTasks(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	var ids []string
	ctx := ""
	for i := range 5 {
		extra := []string{}
		if ctx != "" && i%2 == 0 {
			extra = append(extra, "contextId="+ctx)
		}
		task := *decode[tWrap](t, ok(t, call(t, srv, "1.0", "SendMessage", map[string]any{"message": msg10(fmt.Sprint("m", i), extra...)}))).Task
		if i == 0 {
			ctx = task.ContextID
		}
		ids = append(ids, task.ID)
	}
	type page struct {
		Tasks         []tObj `json:"tasks"`
		NextPageToken string `json:"nextPageToken"`
		PageSize      int    `json:"pageSize"`
		TotalSize     int    `json:"totalSize"`
	}
	list := func(params map[string]any) page {
		return decode[page](t, ok(t, call(t, srv, "1.0", "ListTasks", params)))
	}
	all := list(map[string]any{})
	if all.TotalSize != 5 || len(all.Tasks) != 5 || all.NextPageToken != "" || all.PageSize != 50 {
		t.Fatalf("all: %+v", all)
	}
	if all.Tasks[0].ID != ids[4] || all.Tasks[4].ID != ids[0] {
		t.Errorf("not newest first: %v vs %v", all.Tasks, ids)
	}
	if all.Tasks[0].Artifacts != nil {
		t.Error("artifacts without includeArtifacts")
	}
	if with := list(map[string]any{"includeArtifacts": true, "historyLength": 0}); with.Tasks[0].Artifacts == nil || with.Tasks[0].History != nil {
		t.Errorf("includeArtifacts/historyLength: %+v", with.Tasks[0])
	}
	if inCtx := list(map[string]any{"contextId": ctx}); inCtx.TotalSize != 3 {
		t.Errorf("context filter: %d", inCtx.TotalSize)
	}
	if done := list(map[string]any{"status": "TASK_STATE_COMPLETED"}); done.TotalSize != 5 {
		t.Errorf("status filter: %d", done.TotalSize)
	}
	if none := list(map[string]any{"status": "TASK_STATE_WORKING"}); none.TotalSize != 0 || none.Tasks == nil {
		t.Errorf("status filter: %+v", none)
	}
	var paged []string
	token := ""
	for range 5 {
		p := list(map[string]any{"pageSize": 2, "pageToken": token})
		for _, task := range p.Tasks {
			paged = append(paged, task.ID)
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	var want []string
	for _, task := range all.Tasks {
		want = append(want, task.ID)
	}
	if strings.Join(paged, ",") != strings.Join(want, ",") {
		t.Errorf("pages %v, want %v", paged, want)
	}
	for _, bad := range []map[string]any{{"pageSize": 0}, {"pageToken": "nope!"}, {"status": "sleeping"}, {"statusTimestampAfter": "yesterday"}} {
		fails(t, call(t, srv, "1.0", "ListTasks", bad), codeInvalidParams)
	}
}

// TestProtoFieldNames: A2A 1.0 params are ProtoJSON, whose readers accept the proto field
// names (snake_case) beside the JSON names; the gateway does too, at any depth.
func TestProtoFieldNames(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	sent := decode[tWrap](t, ok(t, call(t, srv, "1.0", "SendMessage", map[string]any{
		"message": map[string]any{"message_id": "m-snake", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "hi"}}, "context_id": "ctx-snake"},
	}))).Task
	if sent.ContextID != "ctx-snake" {
		t.Errorf("context_id ignored: %+v", sent)
	}
	got := decode[tObj](t, ok(t, call(t, srv, "1.0", "GetTask", map[string]any{"id": sent.ID, "history_length": 0})))
	if len(got.History) != 0 {
		t.Errorf("history_length ignored: %d messages", len(got.History))
	}
	// The JSON name wins when both are given.
	got = decode[tObj](t, ok(t, call(t, srv, "1.0", "GetTask", map[string]any{"id": sent.ID, "historyLength": 1, "history_length": 0})))
	if len(got.History) != 1 {
		t.Errorf("historyLength beside history_length: %d messages", len(got.History))
	}
	for _, tc := range []struct{ in, want string }{
		{"task_id", "taskId"}, {"history_length", "historyLength"}, {"a_b_c", "aBC"}, {"push_notification_config", "pushNotificationConfig"},
	} {
		if got := lowerCamel(tc.in); got != tc.want {
			t.Errorf("lowerCamel(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestNullResult: a success whose result is null still carries "result" (JSON-RPC 2.0
// §5: exactly one of result and error).
func TestNullResult(t *testing.T) {
	b, err := json.Marshal(v03.response(json.RawMessage(`7`), nil, nil))
	if err != nil || string(b) != `{"jsonrpc":"2.0","id":7,"result":null}` {
		t.Errorf("%s %v", b, err)
	}
	b, _ = json.Marshal(v03.response(json.RawMessage(`7`), nil, errInvalidParams("x")))
	if strings.Contains(string(b), `"result"`) {
		t.Errorf("an error response carries result: %s", b)
	}
}
