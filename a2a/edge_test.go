package a2a

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	a2apb "github.com/a2aproject/a2a-go/v2/a2apb/v1"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

// The edge's decisions, as a client of any binding sees them.
const (
	vOK       = "ok"
	vNotFound = "not-found"
	vDenied   = "denied"
	vRate     = "rate"
	vBudget   = "budget"
	vOverload = "overload"
	vUnauth   = "unauthenticated"
)

// bindings are the three bindings every decision is asserted on.
var bindings = []string{"jsonrpc", "http+json", "grpc"}

// edgeClient talks to one handler over each binding, as one principal or another.
type edgeClient struct {
	t   *testing.T
	srv *httptest.Server
	gc  a2apb.A2AServiceClient
}

func newEdgeClient(t *testing.T, srv *httptest.Server) *edgeClient {
	conn, err := grpc.NewClient(strings.TrimPrefix(srv.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &edgeClient{t: t, srv: srv, gc: a2apb.NewA2AServiceClient(conn)}
}

// outcome is one answer: the decision, the Retry-After it came with, and the task a
// send created.
type outcome struct {
	verdict, retryAfter, task string
}

// do makes op ("send" with skill as arg, "get" of task arg, "list") over binding as the
// holder of token.
func (c *edgeClient) do(binding, token, op, arg string) outcome {
	c.t.Helper()
	switch binding {
	case "jsonrpc":
		method, params := map[string]string{"send": "SendMessage", "get": "GetTask", "list": "ListTasks"}[op], c.params(op, arg)
		resp, body := post(c.t, c.srv, map[string]string{"Authorization": "Bearer " + token, "A2A-Version": "1.0"}, request(method, params))
		o := outcome{retryAfter: resp.Header.Get("Retry-After")}
		if resp.StatusCode == http.StatusUnauthorized {
			o.verdict = vUnauth
			return o
		}
		var r struct {
			Result struct {
				Task struct{ ID string } `json:"task"`
			} `json:"result"`
			Error *struct{ Code int } `json:"error"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			c.t.Fatalf("%s over JSON-RPC: HTTP %d %s", op, resp.StatusCode, body)
		}
		if r.Error == nil {
			o.verdict, o.task = vOK, r.Result.Task.ID
			return o
		}
		o.verdict = map[int]string{codeTaskNotFound: vNotFound, codePermissionDenied: vDenied, codeRateLimited: vRate, codeTokenBudget: vBudget,
			codeOverloaded: vOverload, codeUnauthenticated: vUnauth}[r.Error.Code]
		if o.verdict == vOverload && resp.StatusCode != http.StatusServiceUnavailable {
			c.t.Errorf("an overload over JSON-RPC answered HTTP %d, want 503", resp.StatusCode)
		}
		if o.verdict == "" {
			c.t.Fatalf("%s over JSON-RPC: unexpected %s", op, body)
		}
		return o
	case "http+json":
		h := map[string]string{"Authorization": "Bearer " + token, "A2A-Version": "1.0"}
		var resp *http.Response
		var body []byte
		switch op {
		case "send":
			b, _ := json.Marshal(c.params(op, arg))
			resp, body = restDo(c.t, c.srv, http.MethodPost, "message:send", h, string(b))
		case "get":
			resp, body = restDo(c.t, c.srv, http.MethodGet, "tasks/"+arg, h, "")
		case "list":
			resp, body = restDo(c.t, c.srv, http.MethodGet, "tasks", h, "")
		}
		o := outcome{retryAfter: resp.Header.Get("Retry-After")}
		var r struct {
			Task  struct{ ID string } `json:"task"`
			Error struct {
				Details []struct{ Reason string } `json:"details"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &r)
		o.verdict = map[int]string{http.StatusOK: vOK, http.StatusNotFound: vNotFound, http.StatusForbidden: vDenied,
			http.StatusUnauthorized: vUnauth, http.StatusServiceUnavailable: vOverload, http.StatusTooManyRequests: vRate}[resp.StatusCode]
		switch {
		case o.verdict == vOK:
			o.task = r.Task.ID
		case o.verdict == vRate && len(r.Error.Details) > 0 && r.Error.Details[0].Reason == "TOKEN_BUDGET_EXHAUSTED":
			o.verdict = vBudget
		case o.verdict == "":
			c.t.Fatalf("%s over HTTP+JSON: HTTP %d %s", op, resp.StatusCode, body)
		}
		return o
	}
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token), watchdog)
	defer cancel()
	var err error
	var o outcome
	switch op {
	case "send":
		msg := &a2apb.Message{MessageId: fmt.Sprintf("m-%d", seq.Add(1)), Role: a2apb.Role_ROLE_USER, Parts: []*a2apb.Part{{Content: &a2apb.Part_Text{Text: "hi"}}}}
		if arg != "" {
			msg.Metadata, _ = structpb.NewStruct(map[string]any{"skill": arg})
		}
		var res *a2apb.SendMessageResponse
		res, err = c.gc.SendMessage(ctx, &a2apb.SendMessageRequest{Message: msg})
		if err == nil {
			o.task = res.GetTask().GetId()
		}
	case "get":
		_, err = c.gc.GetTask(ctx, &a2apb.GetTaskRequest{Id: arg})
	case "list":
		_, err = c.gc.ListTasks(ctx, &a2apb.ListTasksRequest{})
	}
	if err == nil {
		o.verdict = vOK
		return o
	}
	st, _ := grpcstatus.FromError(err)
	var reason string
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			reason = i.Reason
			o.retryAfter = i.Metadata["retryAfterSeconds"]
		}
	}
	o.verdict = map[codes.Code]string{codes.NotFound: vNotFound, codes.PermissionDenied: vDenied, codes.Unauthenticated: vUnauth,
		codes.Unavailable: vOverload}[st.Code()]
	if st.Code() == codes.ResourceExhausted {
		o.verdict = map[string]string{"RATE_LIMITED": vRate, "TOKEN_BUDGET_EXHAUSTED": vBudget}[reason]
	}
	if o.verdict == "" {
		c.t.Fatalf("%s over gRPC: %v", op, err)
	}
	return o
}

var seq atomic.Int64

// params are op's 1.0 params (JSON-RPC's, and HTTP+JSON's body of a send).
func (c *edgeClient) params(op, arg string) map[string]any {
	switch op {
	case "send":
		m := msg10("hi")
		if arg != "" {
			m["metadata"] = map[string]any{"skill": arg}
		}
		return map[string]any{"message": m}
	case "get":
		return map[string]any{"id": arg}
	}
	return map[string]any{}
}

func mustPolicy(t *testing.T, allow, egress string) *edgepolicy.Policy {
	t.Helper()
	p, err := edgepolicy.Compile(edgepolicy.Config{Allow: allow, Egress: egress})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var edgeTokens = []Token{{Name: "alice", Secret: "tok-alice"}, {Name: "bob", Secret: "tok-bob"}}

// TestPolicyDecisions: a table of CEL policies × principals × methods × skills, each
// decision asserted on every binding. A request the policy refuses that names a task
// answers as an unknown task; any other is refused as permission denied.
func TestPolicyDecisions(t *testing.T) {
	for _, tc := range []struct {
		name, allow string
		want        func(principal, method, skill, binding string) bool
	}{
		{"principal", `principal == "alice"`, func(p, _, _, _ string) bool { return p == "alice" }},
		{"readers may read", `principal == "alice" || method in ["GetTask", "ListTasks"]`,
			func(p, m, _, _ string) bool { return p == "alice" || m == "GetTask" || m == "ListTasks" }},
		{"skills", `method != "SendMessage" || skill == "summarize" || (principal == "alice" && skill == "")`,
			func(p, m, s, _ string) bool { return m != "SendMessage" || s == "summarize" || p == "alice" && s == "" }},
		{"not even its own task", `!(principal == "bob" && method == "GetTask")`, func(p, m, _, _ string) bool { return !(p == "bob" && m == "GetTask") }},
		{"deny on error", `metadata.priority == "high" || method != "SendMessage"`, func(_, m, _, _ string) bool { return m != "SendMessage" }},
		{"binding and version", `(binding != "grpc" && version == "1.0") || principal == "alice"`, func(p, _, _, b string) bool { return b != "grpc" || p == "alice" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, srv := grpcServer(t, Config{Executor: &echoExec{}, Tokens: edgeTokens})
			c := newEdgeClient(t, srv)
			// Each principal's own task, sent before the policy applies.
			own := map[string]string{}
			for _, p := range []string{"alice", "bob"} {
				own[p] = c.do("jsonrpc", "tok-"+p, "send", "").task
			}
			cfg := h.config()
			cfg.Policy = mustPolicy(t, tc.allow, "")
			if err := h.Update(cfg); err != nil {
				t.Fatal(err)
			}
			for _, b := range bindings {
				for _, p := range []string{"alice", "bob"} {
					for _, op := range []struct{ op, method, arg string }{
						{"send", "SendMessage", ""}, {"send", "SendMessage", "summarize"}, {"get", "GetTask", own[p]}, {"list", "ListTasks", ""},
					} {
						skill := ""
						if op.op == "send" {
							skill = op.arg
						}
						want := vOK
						switch {
						case tc.want(p, op.method, skill, b):
						case op.op == "get":
							want = vNotFound // a task the caller may not touch is one it cannot know of
						default:
							want = vDenied
						}
						if got := c.do(b, "tok-"+p, op.op, op.arg); got.verdict != want {
							t.Errorf("%s as %s over %s (skill %q): %s, want %s", op.method, p, b, skill, got.verdict, want)
						}
					}
				}
			}
		})
	}
}

// TestRateLimitEachBinding: a principal over its rate is refused with the rate error
// and a Retry-After on each binding; another principal is not.
func TestRateLimitEachBinding(t *testing.T) {
	for _, b := range bindings {
		t.Run(b, func(t *testing.T) {
			// A bucket of 2 that refills once in 1000 s: the third call is over, however
			// slowly the machine runs the test.
			_, srv := grpcServer(t, Config{Executor: &echoExec{}, Tokens: edgeTokens, Limits: Limits{Rate: 0.001, Burst: 2}})
			c := newEdgeClient(t, srv)
			for i := range 2 {
				if got := c.do(b, "tok-alice", "list", ""); got.verdict != vOK {
					t.Fatalf("alice's call %d: %s", i+1, got.verdict)
				}
			}
			got := c.do(b, "tok-alice", "list", "")
			if got.verdict != vRate || got.retryAfter == "" || got.retryAfter == "0" {
				t.Fatalf("alice's third call: %+v, want the rate error with a Retry-After", got)
			}
			for i := range 2 {
				if got := c.do(b, "tok-bob", "send", ""); got.verdict != vOK {
					t.Errorf("bob's call %d while alice is limited: %s", i+1, got.verdict)
				}
			}
		})
	}
}

// spendingExec spends tokens per turn through the job's budget, as the runtime's budget
// sink does: a turn spends, and another turn follows only while the count is under the
// budget.
type spendingExec struct {
	perTurn int64
	turns   int
}

func (e spendingExec) Execute(ctx context.Context, job *Job) Outcome {
	for turn := 1; turn <= e.turns; turn++ {
		if job.Budget == nil {
			break
		}
		spent, budget, err := job.Budget.Spend(ctx, e.perTurn)
		if err != nil {
			return Outcome{State: "failed", Text: err.Error()}
		}
		if spent >= budget && turn < e.turns {
			return Outcome{State: "failed", Text: fmt.Sprintf("token budget spent: %d of %d", spent, budget)}
		}
	}
	return Outcome{State: "completed", Text: "done"}
}

// TestTokenBudget: a principal's tasks spend its budget; once spent, its next message is
// refused with the budget error (a Retry-After to the window's end) on every binding,
// while another principal's tasks run; the concurrency limit refuses a second unfinished
// task.
func TestTokenBudget(t *testing.T) {
	_, srv := grpcServer(t, Config{Executor: spendingExec{perTurn: 400, turns: 2}, Tokens: edgeTokens, Limits: Limits{Tokens: 1000, Window: time.Hour}})
	c := newEdgeClient(t, srv)
	if got := c.do("jsonrpc", "tok-alice", "send", ""); got.verdict != vOK {
		t.Fatalf("alice's first task: %s", got.verdict)
	}
	// 800 of 1000 spent: the second task is admitted, spends 400 on its first turn and
	// stops there (the budget sink's rule): 1200.
	second := c.do("jsonrpc", "tok-alice", "send", "")
	if second.verdict != vOK {
		t.Fatalf("alice's second task: %s", second.verdict)
	}
	if st := waitStateWith(t, srv, map[string]string{"Authorization": "Bearer tok-alice"}, second.task, "failed"); !strings.Contains(mustJSON(st), "token budget spent") {
		t.Errorf("the task that crossed the budget: %s", mustJSON(st))
	}
	for _, b := range bindings {
		got := c.do(b, "tok-alice", "send", "")
		if got.verdict != vBudget || got.retryAfter == "" {
			t.Errorf("alice's next task over %s: %+v, want the budget error with a Retry-After", b, got)
		}
	}
	// Bob's own budget is untouched by alice's: his task runs.
	if got := c.do("grpc", "tok-bob", "send", ""); got.verdict != vOK {
		t.Errorf("bob's task while alice's budget is spent: %s", got.verdict)
	}
}

// TestConcurrentLimit: a principal at its number of unfinished tasks is refused until
// one ends; another principal is not.
func TestConcurrentLimit(t *testing.T) {
	exec := newBlocking()
	_, srv := grpcServer(t, Config{Executor: exec, Tokens: edgeTokens, Limits: Limits{Concurrent: 1},
		Lifecycle: Lifecycle{Concurrency: 4}})
	c := newEdgeClient(t, srv)
	send := func(b, token string) outcome {
		resp, body := post(t, srv, map[string]string{"Authorization": "Bearer " + token, "A2A-Version": "1.0"},
			request("SendMessage", map[string]any{"message": msg10("hi"), "configuration": map[string]any{"returnImmediately": true}}))
		_ = resp
		var r struct {
			Result struct{ Task struct{ ID string } } `json:"result"`
			Error  *struct{ Code int }                `json:"error"`
		}
		_ = json.Unmarshal(body, &r)
		if r.Error != nil {
			return outcome{verdict: fmt.Sprint(r.Error.Code)}
		}
		return outcome{verdict: vOK, task: r.Result.Task.ID}
	}
	first := send("jsonrpc", "tok-alice")
	recv(t, exec.started)
	for _, b := range bindings {
		if got := c.do(b, "tok-alice", "send", ""); got.verdict != vRate {
			t.Errorf("alice's second unfinished task over %s: %s, want the rate error", b, got.verdict)
		}
	}
	if got := send("jsonrpc", "tok-bob"); got.verdict != vOK {
		t.Errorf("bob's task: %s", got.verdict)
	}
	recv(t, exec.started)
	exec.release <- "one"
	exec.release <- "two"
	waitStateWith(t, srv, map[string]string{"Authorization": "Bearer tok-alice"}, first.task, "completed")
	go func() { exec.release <- "three" }()
	if got := send("jsonrpc", "tok-alice"); got.verdict != vOK {
		t.Errorf("alice's task once the first ended: %s", got.verdict)
	}
	recv(t, exec.started)
}

// TestShedding: past the gateway's queue bound, new tasks get 503 with Retry-After on
// every binding, nothing more waits, and the admitted tasks complete once the slot frees.
func TestShedding(t *testing.T) {
	exec := newBlocking()
	shed := new(Shedder)
	shed.Set(ShedBounds{MaxQueued: 3, RetryAfter: 7 * time.Second})
	_, srv := grpcServer(t, Config{Executor: exec, Shed: shed, Lifecycle: Lifecycle{Concurrency: 1}})
	c := newEdgeClient(t, srv)
	admit := func() string {
		_, body := post(t, srv, map[string]string{"A2A-Version": "1.0"},
			request("SendMessage", map[string]any{"message": msg10("hi"), "configuration": map[string]any{"returnImmediately": true}}))
		var r struct {
			Result struct{ Task struct{ ID string } } `json:"result"`
		}
		_ = json.Unmarshal(body, &r)
		if r.Result.Task.ID == "" {
			t.Fatalf("a task within the bound was refused: %s", body)
		}
		return r.Result.Task.ID
	}
	var admitted []string
	admitted = append(admitted, admit()) // runs
	recv(t, exec.started)
	for range 3 { // wait, each in a context of its own
		admitted = append(admitted, admit())
	}
	if shed.Queued() != 3 {
		t.Fatalf("the shedder counts %d waiting tasks, want 3", shed.Queued())
	}
	// A flood past the bound: every one refused, none queued.
	var wg sync.WaitGroup
	var refused atomic.Int64
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := c.do(bindings[i%3], "", "send", "")
			if got.verdict == vOverload && got.retryAfter == "7" {
				refused.Add(1)
			} else {
				t.Errorf("a task past the bound over %s: %+v, want 503 with Retry-After 7", bindings[i%3], got)
			}
		}()
	}
	wg.Wait()
	if refused.Load() != 30 || shed.Queued() != 3 {
		t.Errorf("%d of 30 refused, %d waiting; want 30 and 3", refused.Load(), shed.Queued())
	}
	// The admitted ones complete.
	for i := range admitted {
		exec.release <- fmt.Sprint("answer ", i)
		if i+1 < len(admitted) {
			recv(t, exec.started)
		}
	}
	for _, id := range admitted {
		waitState(t, srv, id, "completed")
	}
	if shed.Queued() != 0 {
		t.Errorf("the shedder counts %d waiting tasks after all ran", shed.Queued())
	}
}

// TestFleetBudgetOvershoot: three replicas on one database share a principal's budget;
// each runs one task at a time, and the budget is overshot by at most one in-flight task
// per replica, however the tasks interleave.
func TestFleetBudgetOvershoot(t *testing.T) {
	pgtest.Need(t)
	const budget, perTurn, turns = 5000, 300, 3
	fl := newFleet(t, 3, Config{Tokens: edgeTokens, Limits: Limits{Tokens: budget, Window: time.Hour}, Lifecycle: Lifecycle{Concurrency: 1}},
		func(string) Executor { return spendingExec{perTurn: perTurn, turns: turns} })
	var wg sync.WaitGroup
	var admitted, refusedBudget atomic.Int64
	for _, r := range fl {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newEdgeClient(t, r.srv)
			// Blocking sends, one at a time: each client has one unfinished task, and
			// each replica runs one at a time, whichever replica's client sent it.
			for range 100 {
				switch got := c.do("jsonrpc", "tok-alice", "send", ""); got.verdict {
				case vOK:
					admitted.Add(1)
				case vBudget:
					refusedBudget.Add(1)
					return
				default:
					t.Errorf("alice's task on %s: %s", r.name, got.verdict)
					return
				}
			}
			t.Errorf("%s: 100 tasks and the budget never refused one", r.name)
		}()
	}
	wg.Wait()
	spent, err := fl[0].db.SpendTokens(context.Background(), budgetKey(testCard().Name, "alice"), time.Now().UnixNano()/int64(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tasks admitted, %d replicas refused on the budget; %d of %d tokens spent", admitted.Load(), refusedBudget.Load(), spent, budget)
	if spent < budget {
		t.Errorf("the replicas stopped at %d tokens, under the budget of %d", spent, budget)
	}
	if over := spent - budget; over > int64(len(fl))*perTurn*turns {
		t.Errorf("overshoot %d tokens, over one in-flight task (%d tokens) per replica", over, perTurn*turns)
	}
}

// TestEgressRecorded: the policy's egress narrowing reaches the job, and survives in the
// task's record for whichever replica runs it.
func TestEgressRecorded(t *testing.T) {
	jobs := make(chan *Job, 4)
	h, srv := grpcServer(t, Config{Executor: execFunc(func(_ context.Context, job *Job) Outcome {
		jobs <- job
		return Outcome{State: "completed", Text: "ok"}
	}), Tokens: edgeTokens})
	cfg := h.config()
	cfg.Policy = mustPolicy(t, "", `principal == "alice" ? ["http://127.0.0.1:8081"] : []`)
	if err := h.Update(cfg); err != nil {
		t.Fatal(err)
	}
	c := newEdgeClient(t, srv)
	for _, tc := range []struct {
		who  string
		want []string
	}{{"alice", []string{"http://127.0.0.1:8081"}}, {"bob", nil}} {
		c.do("jsonrpc", "tok-"+tc.who, "send", "")
		job := recv(t, jobs)
		if !job.Narrowed || len(job.Egress) != len(tc.want) {
			t.Errorf("%s's job: narrowed %v to %v, want %v", tc.who, job.Narrowed, job.Egress, tc.want)
			continue
		}
		for i, r := range job.Egress {
			if r.String() != tc.want[i] {
				t.Errorf("%s's job narrowed to %v, want %v", tc.who, job.Egress, tc.want)
			}
		}
	}
}

// TestFleetConcurrentLimit: a principal's limit of unfinished tasks holds across the
// replicas of a fleet: the store counts them wherever they were sent.
func TestFleetConcurrentLimit(t *testing.T) {
	pgtest.Need(t)
	exec := newBlocking()
	fl := newFleet(t, 3, Config{Tokens: edgeTokens, Limits: Limits{Concurrent: 2}, Lifecycle: Lifecycle{Concurrency: 2}},
		func(string) Executor { return exec })
	send := func(r *replica, token string) (string, int) {
		_, body := post(t, r.srv, map[string]string{"Authorization": "Bearer " + token, "A2A-Version": "1.0"},
			request("SendMessage", map[string]any{"message": msg10("hi"), "configuration": map[string]any{"returnImmediately": true}}))
		var res struct {
			Result struct{ Task struct{ ID string } } `json:"result"`
			Error  *struct{ Code int }                `json:"error"`
		}
		_ = json.Unmarshal(body, &res)
		if res.Error != nil {
			return "", res.Error.Code
		}
		return res.Result.Task.ID, 0
	}
	first, code := send(fl[0], "tok-alice")
	if code != 0 {
		t.Fatalf("alice's first task: %d", code)
	}
	if _, code := send(fl[1], "tok-alice"); code != 0 {
		t.Fatalf("alice's second task: %d", code)
	}
	recv(t, exec.started)
	recv(t, exec.started)
	if _, code := send(fl[2], "tok-alice"); code != codeRateLimited {
		t.Errorf("alice's third unfinished task, through a third replica: code %d, want the rate error", code)
	}
	if _, code := send(fl[2], "tok-bob"); code != 0 {
		t.Errorf("bob's task: code %d", code)
	}
	recv(t, exec.started)
	for range 3 {
		exec.release <- "done"
	}
	waitStateWith(t, fl[0].srv, map[string]string{"Authorization": "Bearer tok-alice"}, first, "completed")
	if _, code := send(fl[2], "tok-alice"); code != 0 {
		t.Errorf("alice's task once hers ended: code %d", code)
	}
	go func() { exec.release <- "done" }()
	recv(t, exec.started)
}

// TestSheddingOnMemory: with the heap over the bound, a new task is refused 503 with
// Retry-After and counted by reason, while a read is served.
func TestSheddingOnMemory(t *testing.T) {
	shed := new(Shedder)
	shed.Set(ShedBounds{MaxMemory: 1 << 20}) // any live test process holds more
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, srv := grpcServer(t, Config{Executor: &echoExec{}, Shed: shed, Metrics: m})
	c := newEdgeClient(t, srv)
	for _, b := range bindings {
		if got := c.do(b, "", "send", ""); got.verdict != vOverload || got.retryAfter != "5" {
			t.Errorf("a new task over %s with the heap over the bound: %+v, want 503 with Retry-After 5", b, got)
		}
		if got := c.do(b, "", "list", ""); got.verdict != vOK {
			t.Errorf("a list over %s while shedding: %s", b, got.verdict)
		}
	}
	if n := testutil.ToFloat64(m.Shed.WithLabelValues(testCard().Name, "memory")); n != 3 {
		t.Errorf("capsule_shed_total{reason=memory} = %v, want 3", n)
	}
}

// TestCardSchemes: the card lists each way a route authenticates, any one of them
// enough, in both shapes.
func TestCardSchemes(t *testing.T) {
	v, err := edgeauth.NewJWT(context.Background(), edgeauth.JWTConfig{Issuer: "https://login.example.com/", Audiences: []string{"gw"},
		JWKSURL: "https://login.example.com/jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	_, srv := newServer(t, Config{Executor: &echoExec{}, Tokens: edgeTokens, JWT: v, ClientCert: "cn"})
	for _, version := range []string{"1.0", "0.3"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+prefix+"/.well-known/agent-card.json", nil)
		req.Header.Set("A2A-Version", version)
		_, body := roundTrip(t, srv, req, nil)
		var card struct {
			SecuritySchemes map[string]map[string]any `json:"securitySchemes"`
			Requirements    []map[string]any          `json:"securityRequirements"`
		}
		if err := json.Unmarshal(body, &card); err != nil {
			t.Fatal(err)
		}
		bearer, _ := card.SecuritySchemes["bearer"]["httpAuthSecurityScheme"].(map[string]any)
		if bearer["bearerFormat"] != "JWT" || !strings.Contains(fmt.Sprint(bearer["description"]), "https://login.example.com/") {
			t.Errorf("%s card's bearer scheme: %v", version, card.SecuritySchemes["bearer"])
		}
		if _, ok := card.SecuritySchemes["mtls"]["mtlsSecurityScheme"]; !ok {
			t.Errorf("%s card lists no mtls scheme: %v", version, card.SecuritySchemes)
		}
		if len(card.Requirements) != 2 {
			t.Errorf("%s card's requirements: %v, want one per scheme", version, card.Requirements)
		}
		if version == "0.3" && (card.SecuritySchemes["mtls"]["type"] != "mutualTLS" || card.SecuritySchemes["bearer"]["type"] != "http") {
			t.Errorf("0.3 card's scheme types: %v", card.SecuritySchemes)
		}
	}
}

// TestRouteGRPCTarget: two routes serving one capsule each list their own gRPC target
// on the card, whichever was configured last.
func TestRouteGRPCTarget(t *testing.T) {
	h, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopNow(h) })
	for _, target := range []string{"grpc.example.com:443", ""} {
		rt, err := CheckRoute(Route{GRPC: target})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil).WithContext(WithRoute(context.Background(), &rt))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if listed := strings.Contains(w.Body.String(), `"protocolBinding":"GRPC"`); listed != (target != "") || target != "" && !strings.Contains(w.Body.String(), target) {
			t.Errorf("route with gRPC target %q: card %s", target, w.Body)
		}
	}
}
