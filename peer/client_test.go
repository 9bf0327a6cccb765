package peer

import (
	"context"
	"encoding/json"

	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime"
)

// answering is an executor that records each job and answers with text, a file and data.
type answering struct {
	mu   sync.Mutex
	jobs []a2a.Job
}

func (e *answering) Execute(_ context.Context, job *a2a.Job) a2a.Outcome {
	e.mu.Lock()
	e.jobs = append(e.jobs, *job)
	e.mu.Unlock()
	if job.Chunk != nil {
		job.Chunk("working on " + job.Text)
	}
	return a2a.Outcome{State: "completed", Text: "done: " + job.Text, Artifacts: []a2a.Artifact{
		{Name: "file", Parts: []a2a.Part{{Kind: a2a.KindFile, Name: "r.txt", MediaType: "text/plain", Bytes: []byte("report")}}},
		{Name: "data", Parts: []a2a.Part{{Kind: a2a.KindData, Data: json.RawMessage(`{"n":3}`)}}},
	}}
}

func (e *answering) last() a2a.Job {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.jobs[len(e.jobs)-1]
}

// serve runs a2a's handler on 127.0.0.1 under /agents/p/; card, when set, rewrites the
// agent card it serves (to list only some interfaces), as a peer of another make would.
func serve(t *testing.T, cfg a2a.Config, card func(map[string]any)) (string, *answering, *[]http.Header) {
	t.Helper()
	exec := &answering{}
	cfg.Executor, cfg.Card = exec, a2a.Card{Name: "p", Version: "1.0.0", Description: "a peer"}
	h, err := a2a.NewHandler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var headers []http.Header
	mux := http.NewServeMux()
	mux.Handle("/agents/p/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		if card == nil || !strings.HasSuffix(r.URL.Path, "agent-card.json") {
			h.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var c map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
			t.Errorf("card: %v", err)
		}
		card(c)
		json.NewEncoder(w).Encode(c)
	}))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = h.Shutdown(ctx)
		srv.Close()
	})
	return srv.URL + "/agents/p/", exec, &headers
}

// only keeps the card's interfaces of binding and version.
func only(binding, version string) func(map[string]any) {
	return func(c map[string]any) {
		var kept []any
		for _, i := range c["supportedInterfaces"].([]any) {
			m := i.(map[string]any)
			if m["protocolBinding"] == binding && m["protocolVersion"] == version {
				kept = append(kept, m)
			}
		}
		c["supportedInterfaces"] = kept
	}
}

// old03 is a 0.3 card: no supportedInterfaces, the 0.3 fields only.
func old03(c map[string]any) {
	c["url"] = c["supportedInterfaces"].([]any)[0].(map[string]any)["url"] // the JSON-RPC 1.0 endpoint, the same
	delete(c, "supportedInterfaces")
	c["protocolVersion"], c["preferredTransport"] = "0.3.0", "JSONRPC"
	delete(c, "additionalInterfaces")
}

func rulesFor(t *testing.T, u string) netpolicy.Rules {
	t.Helper()
	p, _ := url.Parse(u)
	r, err := netpolicy.ParseRules([]string{p.Host})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSendFollowsTheCard: the client takes a binding the peer's card lists — JSON-RPC or
// HTTP+JSON of A2A 1.0, JSON-RPC of 0.3 — and gets the peer's text, file and data; every
// request carries the peer marks, the operator's credential and the trace context, and
// the peer's job sees the chain and a principal derived from the sender (the trace
// context reaches a peer that traces: e2e TestPeersAcrossGateways).
func TestSendFollowsTheCard(t *testing.T) {
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{9}, SpanID: trace.SpanID{8}, TraceFlags: trace.FlagsSampled})
	for _, tc := range []struct {
		name string
		card func(map[string]any)
	}{
		{"JSON-RPC 1.0", only("JSONRPC", "1.0")},
		{"HTTP+JSON 1.0", only("HTTP+JSON", "1.0")},
		{"JSON-RPC 0.3", old03},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, exec, headers := serve(t, a2a.Config{AcceptPeers: true, Tokens: []a2a.Token{{Name: "gw-a", Secret: "s3cret"}}}, tc.card)
			c := &Client{Credentials: []Credential{{Prefix: "http://127.0.0.1", Header: "Authorization", Value: "Bearer s3cret"},
				{Prefix: "http://127.0.0.1:1/", Header: "Authorization", Value: "Bearer wrong"}}}
			var chunks []string
			ans, err := c.Send(context.Background(), runtime.PeerMessage{URL: u, Rules: rulesFor(t, u), Text: "count", MessageID: "m-1",
				From:  runtime.PeerOrigin{Capsule: "sender", TaskID: "tsk_2", Principal: "alice", Chain: []string{"tsk_1", "tsk_2"}},
				Trace: parent, Chunk: func(s string) { chunks = append(chunks, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if ans.State != "completed" || !strings.Contains(ans.Text, "done: count") || ans.TaskID == "" || len(ans.Parts) != 2 ||
				ans.Parts[0].Kind != "file" || string(ans.Parts[0].Bytes) != "report" || ans.Parts[0].Name != "r.txt" ||
				ans.Parts[1].Kind != "data" || string(ans.Parts[1].Data) != `{"n":3}` {
				t.Errorf("answer %+v", ans)
			}
			job := exec.last()
			if job.Principal != "gw-a/capsule:sender/for:alice" || job.Peer == nil || strings.Join(job.Peer.Chain, ",") != "tsk_1,tsk_2" ||
				job.Peer.TaskID != "tsk_2" || job.MessageID != "m-1" {
				t.Errorf("the peer's job: principal %q, peer %+v, message %q", job.Principal, job.Peer, job.MessageID)
			}
			for _, h := range *headers {
				if h.Get(a2a.HeaderTaskOrigin) != "peer" || h.Get("Authorization") != "Bearer s3cret" || !strings.HasPrefix(h.Get("Traceparent"), "00-09") {
					t.Errorf("a request without the marks: %v", h)
				}
			}
			if tc.name != "JSON-RPC 0.3" && (len(chunks) == 0 || !strings.Contains(strings.Join(chunks, ""), "working on count")) {
				t.Errorf("chunks %q", chunks)
			}
		})
	}
}

// TestSendRefusals: a peer that does not accept peer tasks is E-PEER-005; one the rules
// do not grant, one that is down and one without a card are E-PEER-006, naming what failed.
func TestSendRefusals(t *testing.T) {
	closedURL, _, _ := serve(t, a2a.Config{}, nil)
	openURL, _, _ := serve(t, a2a.Config{AcceptPeers: true}, nil)
	noCard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }))
	defer noCard.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/agents/p/"
	down.Close()
	other, _ := netpolicy.ParseRules([]string{"127.0.0.1:1"})
	for _, tc := range []struct {
		name, url string
		rules     netpolicy.Rules
		code, in  string
	}{
		{"no consent", closedURL, rulesFor(t, closedURL), runtime.CodePeerRefused, "does not accept tasks"},
		{"outside the rules", openURL, other, runtime.CodePeerFailed, "E-NET-016"},
		{"down", downURL, rulesFor(t, downURL), runtime.CodePeerFailed, "refused"},
		{"no card", noCard.URL + "/", rulesFor(t, noCard.URL), runtime.CodePeerFailed, "HTTP 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := (&Client{}).Send(context.Background(), runtime.PeerMessage{URL: tc.url, Rules: tc.rules, Text: "hi",
				From: runtime.PeerOrigin{Capsule: "sender", TaskID: "tsk_1", Chain: []string{"tsk_1"}}})
			if errs.Code(err) != tc.code || !strings.Contains(err.Error(), tc.in) {
				t.Errorf("error %v, want %s with %q", err, tc.code, tc.in)
			}
		})
	}
}

// TestInProcess: a peer this process serves is reached through its handler, without a
// socket, with the rules still checked.
func TestInProcess(t *testing.T) {
	exec := &answering{}
	h, err := a2a.NewHandler(a2a.Config{AcceptPeers: true, Executor: exec, Card: a2a.Card{Name: "p", Version: "1.0.0"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = h.Shutdown(ctx)
	}()
	const u = "http://127.0.0.1:9/agents/p/" // nothing listens there: only in process
	c := &Client{Local: func(*url.URL) http.Handler { return h }}
	ans, err := c.Send(context.Background(), runtime.PeerMessage{URL: u, Rules: rulesFor(t, u), Text: "local",
		From: runtime.PeerOrigin{Capsule: "sender", TaskID: "tsk_1", Chain: []string{"tsk_1"}}})
	if err != nil || ans.State != "completed" || !strings.Contains(ans.Text, "done: local") {
		t.Fatalf("answer %+v, %v", ans, err)
	}
	other, _ := netpolicy.ParseRules([]string{"127.0.0.1:8"})
	_, err = c.Send(context.Background(), runtime.PeerMessage{URL: u, Rules: other, Text: "local"})
	if errs.Code(err) != runtime.CodePeerFailed || !strings.Contains(err.Error(), "E-NET-016") {
		t.Errorf("in process past the rules: %v", err)
	}
}

// TestSendReusesCardAndConnections: a capsule's later messages to a peer read its card
// once and go through one connection pool; a message that fails drops the card it used.
func TestSendReusesCardAndConnections(t *testing.T) {
	var reads atomic.Int32
	u, _, _ := serve(t, a2a.Config{AcceptPeers: true}, func(map[string]any) { reads.Add(1) })
	c := &Client{}
	msg := runtime.PeerMessage{URL: u, Rules: rulesFor(t, u), Text: "hi", From: runtime.PeerOrigin{Capsule: "sender", TaskID: "tsk_1", Chain: []string{"tsk_1"}}}
	for i := range 3 {
		if _, err := c.Send(context.Background(), msg); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if n := reads.Load(); n != 1 || len(c.transports) != 1 {
		t.Errorf("three messages read the card %d times through %d pools, want once through one", n, len(c.transports))
	}
	other, _ := netpolicy.ParseRules([]string{"127.0.0.1:1"})
	bad := msg
	bad.Rules = other // the peer's card is cached, the message is refused by the policy
	if _, err := c.Send(context.Background(), bad); err == nil {
		t.Fatal("a message outside its policy was sent")
	}
	if c.cachedCardOf(u) != nil {
		t.Error("a failed message left its card cached")
	}
	if _, err := c.Send(context.Background(), msg); err != nil || reads.Load() != 2 {
		t.Errorf("after the failure: %v, %d card reads, want the card read again", err, reads.Load())
	}
}
