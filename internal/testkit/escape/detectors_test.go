package escape

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/miekg/dns"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/internal/testkit/jwttest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
)

// detector is one way rows notice an escape, and the control proving it can fire: a
// subtest of TestEscapeDetectorsFire that makes the detector see what an escape would
// do, from outside any sandbox. docs/escapes.md lists them from this table.
type detector struct {
	name, notices string
	control       func(t *testing.T, s *suite)
}

// detectors are the suite's sentinels beyond the file ones TestEscapeDetectors checks.
var detectors = []detector{
	{"network sentinel", "a connection to the loopback server no rule allows (network, shell, native, harness rows)", func(t *testing.T, s *suite) {
		n := s.netFix(t)
		counted(t, "the network sentinel", &n.sentinelHits, "http://127.0.0.1:"+n.sentinelPort+"/")
	}},
	{"DNS upstream counter", "a question the pinning resolver should have refused reaching the upstream server (dns rows)", func(t *testing.T, s *suite) {
		n := s.netFix(t)
		before := n.asked("control.test")
		m := new(dns.Msg)
		m.SetQuestion("control.test.", dns.TypeA)
		c := &dns.Client{Net: "udp", Timeout: 10 * time.Second} // the upstream serves UDP
		if _, _, err := c.Exchange(m, n.upstreamAddr); err != nil {
			t.Fatal(err)
		}
		if n.asked("control.test") == before {
			t.Error("a question to the upstream server went uncounted")
		}
	}},
	{"wasm forbidden server", "a guest's HTTP reaching the loopback server its grants leave out (wasm rows)", func(t *testing.T, s *suite) {
		w := s.wasmNet(t)
		counted(t, "the forbidden server", &w.forbiddenHits, "http://127.0.0.1:"+w.forbiddenPort+"/")
	}},
	{"A2A job and webhook counters", "a refused request that ran a task or reached the loopback webhook (a2a-input rows)", func(t *testing.T, s *suite) {
		f := s.a2aFix(t)
		jobs, hooks := f.jobs.Load(), f.hookHits.Load()
		if o := a2aAttack(tokenA, call("message/send", func(*a2aFixture) any { return map[string]any{"message": message("a task")} }))(t, s); !strings.Contains(o.escaped, "ran 1 tasks") {
			t.Errorf("a request that ran a task: %+v, want the job counter to fire", o)
		}
		get(t, f.hookURL)
		if f.jobs.Load() == jobs || f.hookHits.Load() == hooks {
			t.Error("a task or a webhook call went uncounted")
		}
	}},
	{"A2A leak check", "principal A's text, task or context in another principal's answer (a2a-input rows)", func(t *testing.T, s *suite) {
		f := s.a2aFix(t)
		// Principal A's own list names its task: seen as a leak when another's would.
		o := a2aCall(a2aReq{token: tokenA, method: http.MethodGet, path: "v1/tasks", listing: true})(t, s)
		if o.escaped != "" {
			t.Fatalf("principal A's own list: %s", o.escaped)
		}
		status, body := f.do(t, http.MethodGet, "v1/tasks", tokenA, nil, nil)
		if status != http.StatusOK || !strings.Contains(string(body), f.taskA) {
			t.Fatalf("principal A's list does not name its task: HTTP %d %s", status, body)
		}
	}},
	{"gateway task count, webhook, folder and leak check", "a refused request to the built gateway that made a task, reached the loopback webhook, changed the folder beside the work root, or brought principal A's secret or task to another principal (a2a-gateway rows)", func(t *testing.T, s *suite) {
		f := s.gwFix(t)
		for _, b := range gwBindings {
			if o := gwAttack(b, opSend, tokenA, "", false, 0)(t, s); !strings.Contains(o.escaped, "made 1 tasks") {
				t.Errorf("%s: a request that made a task: %+v, want the task count to fire", b, o)
			}
		}
		counted(t, "the loopback webhook", &f.hookHits, f.hookURL)
		planted := filepath.Join(f.outside, "planted.txt")
		os.WriteFile(planted, nil, 0o644)
		o := gwAttack(rest10, opGet, tokenB, "", false, 0)(t, s)
		os.Remove(planted)
		if !strings.Contains(o.escaped, "folder beside the work root changed") {
			t.Errorf("a file planted beside the work root: %+v, want the folder check to fire", o)
		}
		stray := filepath.Join(f.dir, "work", "stray.txt")
		os.WriteFile(stray, []byte(filePayload+"\n"), 0o644)
		got := f.landed()
		os.Remove(stray)
		if len(got) != 1 {
			t.Errorf("a row's file outside any in/ folder: %q, want the disk check to fire", got)
		}
		if _, where := foundAt("answered", []byte(`{"text":"in/message.json {}\n/etc/cron.d/x `+filePayload+`\n"}`)); len(where) != 1 || where[0] != "/etc/cron.d/x" {
			t.Errorf("the lister's line naming /etc/cron.d/x: read as %q", where)
		}
		// A token the issuer really signed for a subject the forgeries claim makes a task
		// there: the count the JWT rows watch sees it.
		honest := func(_ *testing.T, j *jwtFixture) string {
			return jwttest.Sign(t, j.ecKey, jose.ES256, "ec", j.claims("mallory", nil), nil)
		}
		for _, b := range gwBindings {
			if o := gwJWTAttack(b, honest)(t, s); !strings.Contains(o.escaped, "made 1 tasks") {
				t.Errorf("%s: a task under a JWT the issuer signed: %+v, want the forged subjects' task count to fire", b, o)
			}
		}
		// What principal A may see is what the leak check looks for in others' answers.
		for _, b := range gwBindings {
			if _, answer := f.call(t, b, opGet, tokenA, ""); !strings.Contains(string(answer), secret) {
				t.Errorf("%s: principal A's own task does not hold the secret: %s", b, answer)
			}
			if b == rpc03 {
				continue // no list in JSON-RPC 0.3
			}
			if _, answer := f.call(t, b, opList, tokenA, ""); !strings.Contains(string(answer), f.taskA) {
				t.Errorf("%s: principal A's own list does not name its task: %s", b, answer)
			}
		}
	}},
	{"JWT job counter and attacker JWKS", "a forged token that ran a task, or made the gateway fetch the attacker's keys (edge-auth rows)", func(t *testing.T, s *suite) {
		f := s.jwtFix(t)
		valid := func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, "ES256", "ec", f.claims("alice", nil), nil)
		}
		if o := jwtAttack(valid)(t, s); !strings.Contains(o.escaped, "ran 1 tasks") {
			t.Errorf("a valid token: %+v, want the job counter to fire", o)
		}
		hits := f.attackerHits.Load()
		get(t, f.attackerJWKS)
		if f.attackerHits.Load() == hits {
			t.Error("a fetch of the attacker's JWKS went uncounted")
		}
	}},
	{"the lister's view of a message's files", "a file of a task's message the guest finds outside in/ (a2a-parts rows)", func(t *testing.T, s *suite) {
		f := s.partsFix(t)
		// The task's own text is task.md, outside in/: the lister must report it.
		out := f.hosted.RunTask(context.Background(), runtime.TaskRequest{Text: "PAYLOAD-control"})
		if !strings.Contains(out.Result, "task.md PAYLOAD-control") {
			t.Errorf("the lister did not report a file outside in/: %s %q", out.State, out.Result)
		}
	}},
	{"the registry folder's snapshot", "an upload a refusal let into the served registry's folder (registry rows)", func(t *testing.T, s *suite) {
		accepted := func(t *testing.T, f *registryFixture) (int, string) {
			return f.upload(t, publishToken, "control", "1.0.0", "wasm", bytes.NewReader(toolArchive(t, "control", "1.0.0", "control")), -1)
		}
		if o := registryAttack(accepted)(t, s); o.class != "HTTP 201" || !strings.Contains(o.escaped, "folder changed") {
			t.Errorf("an accepted upload: %+v, want the folder's change noticed", o)
		}
	}},
	{"the peer-refusing capsule's job counter", "a peer claim that became a task where peers are refused (peers rows)", func(t *testing.T, s *suite) {
		// A message without a peer claim is a task there: the counter sees it.
		send := func(*peersFixture) any { return map[string]any{"message": message("not a peer")} }
		if o := peerAttack(true, tokenB, nil, "message/send", send)(t, s); !strings.Contains(o.escaped, "ran 1 tasks") {
			t.Errorf("a task on the capsule that refuses peers: %+v, want its job counter to fire", o)
		}
	}},
	{"a WASI 0.2 call the host served", "a handle row's attack the host answered instead of refusing (wasi2-handle rows)", func(t *testing.T, s *suite) {
		served := func(g *w2Guest) error {
			_, err := g.call("check-write", g.must("get-stdout"), w2Ret)
			return err
		}
		if o := ioAttack(served)(t, s); !strings.Contains(o.escaped, "served the attack") {
			t.Errorf("a call the host served: %+v, want it seen", o)
		}
	}},
	{"a registry client that accepted bytes", "a remote registry's fetch answer the client took (registry client rows)", func(t *testing.T, s *suite) {
		honest := func(t *testing.T) func(http.ResponseWriter) {
			good := toolArchive(t, "good", "1.0.0", "good")
			return func(w http.ResponseWriter) {
				w.Header().Set(registry.HeaderSHA256, sha256Hex(good))
				w.Write(good)
			}
		}
		if o := registryClientAttack(honest)(t, s); o.class != "accepted" || o.escaped == "" {
			t.Errorf("an honest registry's answer: %+v, want it taken and seen", o)
		}
	}},
	{"the real dispatcher's tool calls", "a call through a run's bridge that reached the session's tool dispatch (mcp-bridge MD rows, harness rows)", func(t *testing.T, s *suite) {
		if why := s.lacks(needHarness); why != "" {
			unavailable(t, inCI(), row{id: "the real dispatcher's tool calls", attack: "the control of the dispatch counter", need: needHarness}, why)
			return
		}
		o := harnessAttack(`python3 {bin}/mcpcall tools/call '{"name":"echo","arguments":{"text":"hi"}}'`, 0)(t, s)
		if !strings.Contains(o.escaped, "the bridge dispatched 1 tool calls") || !strings.Contains(o.class, "tool: ") {
			t.Errorf("a well-formed call of echo through the bridge: %+v, want it dispatched and counted", o)
		}
	}},
	{"the peer chain's length", "a peer job handed more of a claimed chain than the handler keeps (peers rows)", func(t *testing.T, s *suite) {
		f := &peersFixture{}
		var jobs atomic.Int64
		chain := make([]string, maxPeerChain+1)
		for i := range chain {
			chain[i] = "tsk_" + strings.Repeat("x", maxPeerChainEntry)
		}
		peerExec{countingExec{&jobs}, f}.Execute(context.Background(), &a2a.Job{Peer: &a2a.PeerOrigin{Chain: chain}})
		if got := f.chainEscapes(); len(got) != 2 {
			t.Errorf("a job handed %d task ids of %d bytes: %q, want both checks to fire", len(chain), len(chain[0]), got)
		}
	}},
	{"unix socket sentinels", "a connection to the gateway's unix sockets, by path or abstract name (shell rows)", func(t *testing.T, s *suite) {
		if why := s.lacks(needSealed); why != "" {
			unavailable(t, inCI(), row{id: "unix socket sentinels", attack: "the control of the unix sockets", need: needSealed}, why)
			return
		}
		sb := s.sandbox(t)
		before := sb.unixHits.Load()
		for _, addr := range []string{sb.unixPath, "@" + sb.unixAbstract} {
			c, err := net.Dial("unix", addr)
			if err != nil {
				t.Fatal(err)
			}
			// The sentinel counts a connection, then closes it: its EOF says it counted.
			c.SetReadDeadline(time.Now().Add(watchdogControl))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Errorf("the sentinel at %s answered instead of closing", addr)
			}
			c.Close()
		}
		if got := sb.unixHits.Load() - before; got != 2 {
			t.Errorf("connections to the unix sentinels: %d counted, want 2", got)
		}
	}},
}

// watchdogControl bounds a control's wait for a sentinel's goroutine to count.
const watchdogControl = 10 * time.Second

// TestEscapeDetectorsFire runs each detector's control: a row cannot pass because its
// sentinel is blind.
func TestEscapeDetectorsFire(t *testing.T) {
	s := newSuite(t)
	for _, d := range detectors {
		t.Run(d.name, func(t *testing.T) { d.control(t, s) })
	}
}

// get fetches u from the test process and discards the answer.
// counted GETs u, a sentinel's, and fails t unless hits counted the request.
func counted(t *testing.T, what string, hits *atomic.Int64, u string) {
	t.Helper()
	before := hits.Load()
	get(t, u)
	if hits.Load() == before {
		t.Errorf("a request to %s went uncounted", what)
	}
}

func get(t *testing.T, u string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), watchdogControl)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}
