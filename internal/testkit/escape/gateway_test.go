package escape

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/go-jose/go-jose/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/jwttest"
	"github.com/capsulegate/capsulegate/internal/testkit/ports"
	"github.com/capsulegate/capsulegate/internal/testkit/syncbuf"
)

// Gateway rows send hostile A2A requests to the built gateway (./cmd/caddy, as `make
// caddy` builds it) on every binding and version: JSON-RPC 0.3 and 1.0, HTTP+JSON 0.3
// (v1/…) and 1.0, and gRPC, streaming and subscribe included. The capsule is the lister
// script capsule behind a `handle_path` route with two principals (bearer tokens), a
// body limit and push rules; the gRPC binding is its own h2c site. Sentinels: the task
// count of both principals (a refused request must create no task), a webhook listener
// on loopback (no push may reach it), principal A's task, whose text and file (the
// secret) principal B must never see, and a folder beside the gateway's work root that
// must stay as it was.

// gwBinding is one wire binding and version of A2A.
type gwBinding int

const (
	rpc03 gwBinding = iota
	rpc10
	rest03
	rest10
	grpcB
)

var gwBindings = []gwBinding{rpc03, rpc10, rest03, rest10, grpcB}

func (b gwBinding) String() string {
	return [...]string{"JSON-RPC 0.3", "JSON-RPC 1.0", "HTTP+JSON 0.3", "HTTP+JSON 1.0", "gRPC"}[b]
}

// gwMaxBody is the route's max_body; the capsule takes files, so the limit the gateway
// applies is this plus the base64 size of gwMaxMessage.
const (
	gwMaxBody    = 64 << 10
	gwMaxMessage = 4096
)

type gwFixture struct {
	base     string // the route's endpoint, ending in /
	grpcAddr string
	client   *http.Client
	conn     *grpc.ClientConn
	rpc      a2apb.A2AServiceClient
	hookURL  string
	hookHits atomic.Int64
	taskA    string
	ctxA     string
	dir      string // the gateway's folder: its config, state and work root
	outside  string // beside the work root; must keep secret.txt alone
	logs     *syncbuf.Buffer
}

// gatewayBin builds the gateway once per run, with the flags of `make caddy`.
func (s *suite) gatewayBin(t *testing.T) string {
	if s.gwBin != "" {
		return s.gwBin
	}
	out := filepath.Join(s.top.TempDir(), "caddy")
	build := exec.Command("go", "build", "-trimpath", "-tags", "nobadger,nomysql,nopgx", "-o", out, "../../../cmd/caddy")
	if msg, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the gateway: %v\n%s", err, msg)
	}
	s.gwBin = out
	return out
}

func (s *suite) gwFix(t *testing.T) *gwFixture {
	if s.gw != nil {
		return s.gw
	}
	if s.gwFailed != "" {
		t.Fatal("the gateway fixture failed before: " + s.gwFailed)
	}
	s.gwFailed = "it did not finish" // until it does
	bin := s.gatewayBin(t)
	dir, err := filepath.EvalSymlinks(s.top.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &gwFixture{dir: dir, outside: filepath.Join(dir, "outside"), logs: &syncbuf.Buffer{}}
	capDir := filepath.Join(dir, "capsule")
	for _, d := range []string{f.outside, capDir, filepath.Join(dir, "registry"), filepath.Join(dir, "home")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(f.outside, "secret.txt"), []byte(secret), 0o644)
	os.WriteFile(filepath.Join(capDir, "murmur.yaml"), []byte(fmt.Sprintf(`name: escape-gw
version: 1.0.0
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
a2a: {input_modes: [text/plain], max_file_bytes: %d, max_message_bytes: %d}
`, gwMaxMessage, gwMaxMessage)), 0o644)
	os.WriteFile(filepath.Join(capDir, "capsule.wasm"), guestbuild.Wasm(t, "../testguests/lister"), 0o644)

	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { f.hookHits.Add(1) }))
	s.top.Cleanup(hook.Close)
	f.hookURL = hook.URL + "/hook"

	port, grpcPort, admin := freeLoopbackPort(t), freeLoopbackPort(t), freeLoopbackPort(t)
	// Bearer tokens and, for any other token, JWTs of the edge-auth rows' issuer: the
	// route of operators.md's worked example.
	j := s.jwtFix(t)
	capsule := `capsule ` + filepath.Join(capDir, "murmur.yaml") + ` {
			auth bearer {
				team-a ESCAPE_TEAM_A
				team-b ESCAPE_TEAM_B
			}
			auth jwt {
				issuer ` + j.issuer + `
				audience capsulegate
				jwks_url ` + j.issuer + `/jwks.json
			}
			max_body ` + strconv.Itoa(gwMaxBody) + `
		}`
	caddyfile := `{
	admin 127.0.0.1:` + admin + `
	servers {
		protocols h1 h2 h2c
	}
	capsule {
		registry ` + filepath.Join(dir, "registry") + `
		state_dir ` + filepath.Join(dir, "state") + `
		work_root ` + filepath.Join(dir, "work") + `
		cache_dir ` + guestbuild.WazeroCache() + `
		push {
			allow https://hooks.example.com
		}
	}
}

http://127.0.0.1:` + port + ` {
	handle_path /agents/escape/* {
		` + capsule + `
	}
}

http://127.0.0.1:` + grpcPort + ` {
	` + capsule + `
}
`
	cf := filepath.Join(dir, "Caddyfile")
	os.WriteFile(cf, []byte(caddyfile), 0o644)
	cmd := exec.Command(bin, "run", "--config", cf, "--adapter", "caddyfile")
	cmd.Dir = dir
	cmd.Env = []string{"HOME=" + filepath.Join(dir, "home"), "PATH=" + os.Getenv("PATH"),
		"XDG_DATA_HOME=" + filepath.Join(dir, "data"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
		"ESCAPE_TEAM_A=" + tokenA, "ESCAPE_TEAM_B=" + tokenB}
	cmd.Stdout, cmd.Stderr = f.logs, f.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.top.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	f.base = "http://127.0.0.1:" + port + "/agents/escape/"
	f.grpcAddr = "127.0.0.1:" + grpcPort
	tr := &http.Transport{}
	s.top.Cleanup(tr.CloseIdleConnections)
	f.client = &http.Client{Timeout: 60 * time.Second, Transport: tr}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := f.client.Get(f.base + ".well-known/agent-card.json")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the gateway exited: %v\n%s", err, f.logs)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway did not serve its card within 2 minutes\n%s", f.logs)
		}
	}
	f.conn, err = grpc.NewClient(f.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { f.conn.Close() })
	f.rpc = a2apb.NewA2AServiceClient(f.conn)

	// Principal A's task: its text and its file hold the secret, and the file lands in
	// A's context's workdir, where a task of B in that context would find it.
	msg := map[string]any{"messageId": "m-a", "role": "ROLE_USER", "parts": []map[string]any{
		{"text": "PAYLOAD principal A's " + secret},
		{"raw": base64.StdEncoding.EncodeToString([]byte("PAYLOAD-A " + secret + "\n")), "filename": "notes.txt", "mediaType": "text/plain"},
	}}
	status, body := f.post(t, "", tokenA, map[string]string{"A2A-Version": "1.0"}, rpcBody("SendMessage", map[string]any{"message": msg}))
	var r struct {
		Result struct {
			Task struct {
				ID, ContextID string
				Status        struct{ State string }
			}
		}
	}
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Result.Task.ID == "" || r.Result.Task.Status.State != "TASK_STATE_COMPLETED" ||
		!strings.Contains(string(body), "in/1-notes.txt PAYLOAD-A "+secret) {
		t.Fatalf("principal A's task: HTTP %d %s\n%s", status, body, f.logs)
	}
	f.taskA, f.ctxA = r.Result.Task.ID, r.Result.Task.ContextID
	s.gw, s.gwFailed = f, ""
	return f
}

// freeLoopbackPort is a loopback port below the kernel's ephemeral range, free now: no
// other test's outgoing connection takes it before the gateway binds it.
func freeLoopbackPort(t *testing.T) string {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// rpcBody is a JSON-RPC request of method with params.
func rpcBody(method string, params any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	if err != nil {
		panic(err)
	}
	return b
}

// post sends body to path under the route as the holder of token.
func (f *gwFixture) post(t *testing.T, path, token string, header map[string]string, body []byte) (int, []byte) {
	return sendA2A(t, f.client, http.MethodPost, f.base+path, token, bytes.NewReader(body), header)
}

// tasks counts both principals' tasks (1.0 ListTasks), the job sentinel.
func (f *gwFixture) tasks(t *testing.T) int { return f.tasksOf(t, tokenA, tokenB) }

// tasksOf counts the tasks of the principals tokens authenticate.
func (f *gwFixture) tasksOf(t *testing.T, tokens ...string) int {
	n := 0
	for _, tok := range tokens {
		status, body := f.post(t, "", tok, map[string]string{"A2A-Version": "1.0"}, rpcBody("ListTasks", map[string]any{"pageSize": 100}))
		var r struct {
			Result *struct {
				TotalSize int `json:"totalSize"`
			}
		}
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Result == nil {
			t.Fatalf("counting tasks: HTTP %d %s", status, body)
		}
		n += r.Result.TotalSize
	}
	return n
}

// gwOp is what a row asks of the gateway, spelled per binding.
type gwOp int

const (
	opSend      gwOp = iota // a new task
	opHuge                  // a new task whose body is over the route's limit
	opGet                   // principal A's task
	opCancel                // cancel A's task
	opContinue              // send a message naming A's task
	opStream                // stream a message naming A's task
	opSubscribe             // subscribe to A's task
	opPushSet               // set a webhook on A's task (an allowed URL)
	opPushList              // list A's task's webhooks
	opList                  // list tasks filtered by A's context
	opIntoCtx               // a new task in A's context
	opPushOwn               // A sets a webhook to the URL of the row on its own task
	opFile                  // a new task with a file part named by the row
	opFileURL               // a new task with a file part at the URL of the row
)

// filePayload is the content of a row's file part: the lister answers with where it
// found it.
const filePayload = "PAYLOAD-GW-FILE"

// request is the HTTP request of op on binding b: its method, path under the route,
// headers and body.
func (f *gwFixture) request(b gwBinding, op gwOp, arg string) (method, path string, header map[string]string, body []byte) {
	v10 := map[string]string{"A2A-Version": "1.0"}
	text := "hijack PAYLOAD-B"
	if op == opHuge {
		text = strings.Repeat("x", gwMaxBody+gwMaxMessage*2)
	}
	p03, p10 := map[string]any{"kind": "text", "text": text}, map[string]any{"text": text}
	raw := base64.StdEncoding.EncodeToString([]byte(filePayload + "\n"))
	switch op {
	case opFile:
		p03 = map[string]any{"kind": "file", "file": map[string]any{"bytes": raw, "name": arg, "mimeType": "text/plain"}}
		p10 = map[string]any{"raw": raw, "filename": arg, "mediaType": "text/plain"}
	case opFileURL:
		p03 = map[string]any{"kind": "file", "file": map[string]any{"uri": arg, "name": "fetched.txt", "mimeType": "text/plain"}}
		p10 = map[string]any{"url": arg, "filename": "fetched.txt", "mediaType": "text/plain"}
	}
	m03 := map[string]any{"kind": "message", "messageId": "m-gw", "role": "user", "parts": []map[string]any{p03}}
	m10 := map[string]any{"messageId": "m-gw", "role": "ROLE_USER", "parts": []map[string]any{p10}}
	switch op {
	case opContinue, opStream:
		m03["taskId"], m10["taskId"] = f.taskA, f.taskA
	case opIntoCtx:
		m03["contextId"], m10["contextId"] = f.ctxA, f.ctxA
	}
	task := f.taskA
	url := "https://hooks.example.com/b"
	if op == opPushOwn {
		url = arg
	}
	js := func(v any) []byte { b, _ := json.Marshal(v); return b }
	switch b {
	case rpc03:
		name, params := map[gwOp]string{opSend: "message/send", opHuge: "message/send", opFile: "message/send", opFileURL: "message/send", opGet: "tasks/get", opCancel: "tasks/cancel",
			opContinue: "message/send", opStream: "message/stream", opSubscribe: "tasks/resubscribe", opPushSet: "tasks/pushNotificationConfig/set",
			opPushList: "tasks/pushNotificationConfig/list", opIntoCtx: "message/send", opPushOwn: "tasks/pushNotificationConfig/set"}[op], any(map[string]any{"id": task})
		switch op {
		case opSend, opHuge, opFile, opFileURL, opContinue, opStream, opIntoCtx:
			params = map[string]any{"message": m03}
		case opPushSet, opPushOwn:
			params = map[string]any{"taskId": task, "pushNotificationConfig": map[string]any{"url": url}}
		}
		return http.MethodPost, "", nil, rpcBody(name, params)
	case rpc10:
		name, params := map[gwOp]string{opSend: "SendMessage", opHuge: "SendMessage", opFile: "SendMessage", opFileURL: "SendMessage", opGet: "GetTask", opCancel: "CancelTask",
			opContinue: "SendMessage", opStream: "SendStreamingMessage", opSubscribe: "SubscribeToTask", opPushSet: "CreateTaskPushNotificationConfig",
			opPushList: "ListTaskPushNotificationConfigs", opList: "ListTasks", opIntoCtx: "SendMessage", opPushOwn: "CreateTaskPushNotificationConfig"}[op], any(map[string]any{"id": task})
		switch op {
		case opSend, opHuge, opFile, opFileURL, opContinue, opStream, opIntoCtx:
			params = map[string]any{"message": m10}
		case opPushSet, opPushOwn:
			params = map[string]any{"taskId": task, "url": url}
		case opPushList:
			params = map[string]any{"taskId": task}
		case opList:
			params = map[string]any{"contextId": f.ctxA}
		}
		return http.MethodPost, "", v10, rpcBody(name, params)
	}
	prefix, msg, header := "v1/", any(m03), map[string]string(nil)
	if b == rest10 {
		prefix, msg, header = "", m10, v10
	}
	push := any(map[string]any{"url": url})
	if b == rest03 {
		push = map[string]any{"pushNotificationConfig": map[string]any{"url": url}}
	}
	switch op {
	case opSend, opHuge, opFile, opFileURL, opContinue, opIntoCtx:
		return http.MethodPost, prefix + "message:send", header, js(map[string]any{"message": msg})
	case opStream:
		return http.MethodPost, prefix + "message:stream", header, js(map[string]any{"message": msg})
	case opGet:
		return http.MethodGet, prefix + "tasks/" + task, header, nil
	case opCancel:
		return http.MethodPost, prefix + "tasks/" + task + ":cancel", header, []byte("{}")
	case opSubscribe:
		return http.MethodPost, prefix + "tasks/" + task + ":subscribe", header, []byte("{}")
	case opPushSet, opPushOwn:
		return http.MethodPost, prefix + "tasks/" + task + "/pushNotificationConfigs", header, js(push)
	case opPushList:
		return http.MethodGet, prefix + "tasks/" + task + "/pushNotificationConfigs", header, nil
	case opList:
		return http.MethodGet, prefix + "tasks?contextId=" + f.ctxA, header, nil
	}
	panic("no request for op " + strconv.Itoa(int(op)))
}

// call makes op on binding b as the holder of token, and classifies the answer.
func (f *gwFixture) call(t *testing.T, b gwBinding, op gwOp, token, arg string) (string, []byte) {
	if b == grpcB {
		return f.callGRPC(t, op, token, arg)
	}
	return f.callHTTP(t, b, op, token, arg)
}

// callHTTP sends op on an HTTP binding and classifies the answer as "HTTP <status>",
// "JSON-RPC <code>" (a stream's first event included) or "answered".
func (f *gwFixture) callHTTP(t *testing.T, b gwBinding, op gwOp, token, arg string) (string, []byte) {
	method, path, header, body := f.request(b, op, arg)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	status, answer := sendA2A(t, f.client, method, f.base+path, token, rd, header)
	return classifyA2A(status, answer), answer
}

// callGRPC makes op's call of A2AService and classifies its end as "gRPC <code>"
// ("gRPC OK" for an answer, a stream's first message included).
func (f *gwFixture) callGRPC(t *testing.T, op gwOp, token, arg string) (string, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	msg := &a2apb.Message{MessageId: "m-gw", Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hijack PAYLOAD-B"}}}}
	switch op {
	case opFile:
		msg.Parts = []*a2apb.Part{{Content: &a2apb.Part_Raw{Raw: []byte(filePayload + "\n")}, Filename: arg, MediaType: "text/plain"}}
	case opFileURL:
		msg.Parts = []*a2apb.Part{{Content: &a2apb.Part_Url{Url: arg}, Filename: "fetched.txt", MediaType: "text/plain"}}
	case opContinue, opStream:
		msg.TaskId = f.taskA
	case opIntoCtx:
		msg.ContextId = f.ctxA
	}
	var (
		answer any
		err    error
	)
	recv := func(s grpc.ServerStreamingClient[a2apb.StreamResponse], err error) (any, error) {
		if err != nil {
			return nil, err
		}
		return s.Recv()
	}
	switch op {
	case opSend, opFile, opFileURL, opContinue, opIntoCtx:
		answer, err = f.rpc.SendMessage(ctx, &a2apb.SendMessageRequest{Message: msg})
	case opStream:
		answer, err = recv(f.rpc.SendStreamingMessage(ctx, &a2apb.SendMessageRequest{Message: msg}))
	case opGet:
		answer, err = f.rpc.GetTask(ctx, &a2apb.GetTaskRequest{Id: f.taskA})
	case opCancel:
		answer, err = f.rpc.CancelTask(ctx, &a2apb.CancelTaskRequest{Id: f.taskA})
	case opSubscribe:
		answer, err = recv(f.rpc.SubscribeToTask(ctx, &a2apb.SubscribeToTaskRequest{Id: f.taskA}))
	case opPushSet:
		answer, err = f.rpc.CreateTaskPushNotificationConfig(ctx, &a2apb.TaskPushNotificationConfig{TaskId: f.taskA, Url: "https://hooks.example.com/b"})
	case opPushOwn:
		answer, err = f.rpc.CreateTaskPushNotificationConfig(ctx, &a2apb.TaskPushNotificationConfig{TaskId: f.taskA, Url: arg})
	case opPushList:
		answer, err = f.rpc.ListTaskPushNotificationConfigs(ctx, &a2apb.ListTaskPushNotificationConfigsRequest{TaskId: f.taskA})
	case opList:
		answer, err = f.rpc.ListTasks(ctx, &a2apb.ListTasksRequest{ContextId: f.ctxA})
	default:
		t.Fatalf("no gRPC call for op %d", op)
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return "gRPC stream ended", nil
		}
		st, _ := grpcstatus.FromError(err)
		return "gRPC " + st.Code().String(), []byte(st.Message())
	}
	b, _ := json.Marshal(answer)
	return "gRPC OK", b
}

// gwAttack is one row: op on binding b as the holder of token, arg its file name, URL
// or webhook ({hook}: the loopback webhook; {sentinel}: the network sentinel's port;
// {outside}: the folder beside the work root). A refused request must run no task
// (allowed says how many B may make in its own name), no webhook may be called, nothing
// of principal A's may come back to anyone else, the folder beside the work root keeps
// only its secret, and a file of the row lands in its task's in/ folder or nowhere.
func gwAttack(b gwBinding, op gwOp, token, arg string, listing bool, allowed int) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.gwFix(t)
		n := s.netFix(t)
		arg := strings.NewReplacer("{hook}", f.hookURL, "{sentinel}", n.sentinelPort, "{outside}", f.outside).Replace(arg)
		before, hooks, sentinel := f.tasks(t), f.hookHits.Load(), n.sentinelHits.Load()
		class, answer := f.call(t, b, op, token, arg)
		var escaped []string
		if token != tokenA && strings.Contains(string(answer), secret) {
			escaped = append(escaped, "principal A's text or file came back")
		}
		if token != tokenA && listing && (strings.Contains(string(answer), f.taskA) || strings.Contains(string(answer), f.ctxA)) {
			escaped = append(escaped, "principal A's task or context was listed")
		}
		if n := f.tasks(t) - before; n > allowed {
			escaped = append(escaped, fmt.Sprintf("the request made %d tasks", n))
		}
		if n := f.hookHits.Load() - hooks; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the loopback webhook was called %d times", n))
		}
		if got := n.sentinelHits.Load(); got != sentinel {
			escaped = append(escaped, fmt.Sprintf("the network sentinel was reached %d times", got-sentinel))
		}
		if ents, _ := os.ReadDir(f.outside); len(ents) != 1 {
			escaped = append(escaped, "the folder beside the work root changed")
		}
		if op == opFileURL {
			switch {
			case strings.Contains(string(answer), "not in capabilities.network.allow"):
				class += ": not allowed"
			case strings.Contains(string(answer), "want an absolute http or https URL"):
				class += ": not an http(s) URL"
			}
		}
		if op == opFile {
			var where []string
			class, where = foundAt(class, answer)
			for _, p := range where {
				if !strings.HasPrefix(p, "in/") || strings.Contains(p[3:], "/") {
					escaped = append(escaped, "the guest found the file at /"+p)
				}
			}
			escaped = append(escaped, f.landed()...)
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// foundAt reads where the lister found the row's file from a task's answer: the class
// is those paths ("in/0-x.txt"), or the answer's own class when the task did not run.
func foundAt(class string, answer []byte) (string, []string) {
	var where []string
	for _, m := range payloadAt.FindAllSubmatch(answer, -1) {
		where = append(where, string(m[1]))
	}
	if len(where) == 0 {
		return class + ", not found", nil
	}
	return strings.Join(where, " "), where
}

// payloadAt finds "<path> PAYLOAD-GW-FILE" in a JSON answer, a line of the lister's.
var payloadAt = regexp.MustCompile(`(?:^|"|\\n)([^"\\\s]+) ` + filePayload)

// landed lists every copy of a row's file on disk that is not in a task's work/in/
// folder under the work root.
func (f *gwFixture) landed() []string {
	var out []string
	filepath.WalkDir(f.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if rel, _ := filepath.Rel(f.dir, p); strings.HasPrefix(rel, "state"+string(filepath.Separator)) {
			return nil // the task store holds every message, files included
		}
		b, _ := os.ReadFile(p)
		if !strings.HasPrefix(string(b), filePayload) {
			return nil
		}
		rel, _ := filepath.Rel(filepath.Join(f.dir, "work"), p)
		if parts := strings.Split(rel, string(filepath.Separator)); len(parts) != 5 || parts[2] != "work" || parts[3] != "in" {
			out = append(out, "the file landed on disk at "+p)
		}
		return nil
	})
	return out
}

// forgedSubjects are the subjects the forged tokens claim: a task made under any of
// them is the escape.
var forgedSubjects = []string{"mallory", "alice", "admin"}

// gwJWTAttack sends a new task on binding b with the token forge makes, to the route
// that takes the issuer's JWTs beside its bearer tokens. It is classified as the other
// rows are, with the E-AUTH code the refusal names. No task may be made under any
// subject a forgery claims (counted with real tokens of those subjects), and the
// attacker's JWKS server must never be asked.
func gwJWTAttack(b gwBinding, forge func(*testing.T, *jwtFixture) string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f, j := s.gwFix(t), s.jwtFix(t)
		var real []string
		for _, sub := range forgedSubjects {
			real = append(real, jwttest.Sign(t, j.ecKey, jose.ES256, "ec", j.claims(sub, nil), nil))
		}
		before, hits := f.tasksOf(t, real...), j.attackerHits.Load()
		class, answer := f.call(t, b, opSend, forge(t, j), "")
		if c := authCode.FindString(string(answer)); c != "" {
			class += " " + c
		}
		var escaped []string
		if n := f.tasksOf(t, real...) - before; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the forged token made %d tasks", n))
		}
		if n := j.attackerHits.Load() - hits; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the attacker's JWKS server was asked %d times", n))
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// gatewayRows are the A2A attacks through the built gateway, each on every binding and
// version that has the operation (JSON-RPC 0.3 has no task list).
func gatewayRows() []row {
	notFound := map[gwBinding]string{rpc03: "JSON-RPC -32001", rpc10: "JSON-RPC -32001", rest03: "HTTP 404", rest10: "HTTP 404", grpcB: "gRPC NotFound"}
	unauth := map[gwBinding]string{rpc03: "HTTP 401", rpc10: "HTTP 401", rest03: "HTTP 401", rest10: "HTTP 401", grpcB: "gRPC Unauthenticated"}
	badURL := map[gwBinding]string{rpc03: "JSON-RPC -32602", rpc10: "JSON-RPC -32602", rest03: "HTTP 400", rest10: "HTTP 400", grpcB: "gRPC InvalidArgument"}
	listed := map[gwBinding]string{rpc10: "answered", rest03: "answered", rest10: "answered", grpcB: "gRPC OK"}
	ownTask := map[gwBinding]string{rpc03: "answered", rpc10: "answered", rest03: "answered", rest10: "answered", grpcB: "gRPC OK"}
	all := func(class string) map[gwBinding]string {
		return map[gwBinding]string{rpc03: class, rpc10: class, rest03: class, rest10: class, grpcB: class}
	}
	with := func(m map[gwBinding]string, suffix string) map[gwBinding]string {
		out := map[gwBinding]string{}
		for b, c := range m {
			out[b] = c + suffix
		}
		return out
	}
	tooBig := map[gwBinding]string{rpc03: "HTTP 413", rpc10: "HTTP 413", rest03: "HTTP 413", rest10: "HTTP 413"}
	cases := []struct {
		attack, token, arg string
		op                 gwOp
		want               map[gwBinding]string
		listing            bool
		allowed            int
	}{
		{attack: "a send without credentials", op: opSend, want: unauth},
		{attack: "a send with a prefix of a real token", token: tokenA[:len(tokenA)-1], op: opSend, want: unauth},
		{attack: "a body over the route's limit", token: tokenA, op: opHuge, want: tooBig},
		{attack: "principal B reads principal A's task", token: tokenB, op: opGet, want: notFound},
		{attack: "principal B cancels principal A's task", token: tokenB, op: opCancel, want: notFound},
		{attack: "principal B continues principal A's task", token: tokenB, op: opContinue, want: notFound},
		{attack: "principal B streams a message naming principal A's task", token: tokenB, op: opStream, want: notFound},
		{attack: "principal B subscribes to principal A's task", token: tokenB, op: opSubscribe, want: notFound},
		{attack: "principal B sets a webhook on principal A's task", token: tokenB, op: opPushSet, want: notFound},
		{attack: "principal B lists principal A's task's webhooks", token: tokenB, op: opPushList, want: notFound},
		{attack: "principal B lists tasks filtered by principal A's context", token: tokenB, op: opList, want: listed, listing: true},
		// B may send in a context id A's task carries: it is B's own context, with a
		// workdir of its own, so the lister finds nothing of A's file.
		{attack: "principal B sends a task into principal A's context (the lister would find A's file)", token: tokenB, op: opIntoCtx, want: ownTask, allowed: 1},
		{attack: "a file named to climb into the folder beside the work root", token: tokenB, op: opFile, arg: "../../../../../outside/planted.txt", want: all("in/0-planted.txt"), allowed: 1},
		{attack: "a file named by the absolute path of the folder beside the work root", token: tokenB, op: opFile, arg: "{outside}/planted.txt", want: all("in/0-planted.txt"), allowed: 1},
		{attack: "a file named with Windows separators and a NUL byte", token: tokenB, op: opFile, arg: "..\\..\\outside\\x.txt\x00/../../planted", want: all("in/0-planted"), allowed: 1},
		{attack: "a file part at a loopback URL the capsule is not granted (the network sentinel)", token: tokenB, op: opFileURL, arg: "http://127.0.0.1:{sentinel}/secret", want: with(badURL, ": not allowed")},
		{attack: "a file part at the cloud metadata address", token: tokenB, op: opFileURL, arg: "http://169.254.169.254/latest/meta-data/", want: with(badURL, ": not allowed")},
		{attack: "a file part at a file:// URL", token: tokenB, op: opFileURL, arg: "file:///etc/passwd", want: with(badURL, ": not an http(s) URL")},
		{attack: "principal A sets a webhook on loopback", token: tokenA, arg: "{hook}", op: opPushOwn, want: badURL},
		{attack: "principal A sets a webhook at the metadata address", token: tokenA, arg: "http://169.254.169.254/latest/meta-data/", op: opPushOwn, want: badURL},
	}
	var rows []row
	for _, c := range cases {
		for _, b := range gwBindings {
			want, ok := c.want[b]
			if !ok {
				continue
			}
			rows = append(rows, row{id: fmt.Sprintf("GW-%02d", len(rows)+1), surface: A2AGateway, attack: c.attack + " (" + b.String() + ")",
				want: want, run: gwAttack(b, c.op, c.token, c.arg, c.listing, c.allowed)})
		}
	}
	// The edge-auth rows' forgeries, through the binary on every binding.
	for _, c := range jwtForgeries() {
		code := strings.TrimPrefix(c.want, "HTTP 401 ")
		for _, b := range gwBindings {
			want := c.want
			if b == grpcB {
				want = "gRPC Unauthenticated " + code
			}
			rows = append(rows, row{id: fmt.Sprintf("GW-%02d", len(rows)+1), surface: A2AGateway, attack: "a JWT: " + c.attack + " (" + b.String() + ")",
				want: want, run: gwJWTAttack(b, c.token)})
		}
	}
	return rows
}
