package escape

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/capsulegate/capsulegate/a2a"
)

// Peer rows claim to be another capsule's runtime (the peer headers) to a real
// a2a.Handler that takes peer tasks, with two named principals, and to one that does not.
// A claim never lends a principal's identity: a peer task belongs to a principal derived
// from the authenticated caller and the claim, so it can never reach a task of the
// principal it names. Sentinels: principal A's task text, and the executor of the
// capsule that refuses peers (no claim may become a task there).

type peersFixture struct {
	accepting, refusing string // endpoints
	taskA               string
	refusedJobs         atomic.Int64
	client              *http.Client
	longestChain        atomic.Int64 // the most task ids a peer job's chain held
	longestEntry        atomic.Int64 // the longest task id in one
}

// peerExec is countingExec that also records the longest peer chain it was handed: a
// chain is what bounds a loop of peers (runtime refuses a send past peer_depth), so a
// claim must not bring more of it than the handler keeps.
type peerExec struct {
	countingExec
	f *peersFixture
}

func (e peerExec) Execute(ctx context.Context, job *a2a.Job) a2a.Outcome {
	if job.Peer != nil {
		storeMax(&e.f.longestChain, int64(len(job.Peer.Chain)))
		for _, id := range job.Peer.Chain {
			storeMax(&e.f.longestEntry, int64(len(id)))
		}
	}
	return e.countingExec.Execute(ctx, job)
}

// chainEscapes says what peer jobs were handed beyond the chain the handler keeps.
func (f *peersFixture) chainEscapes() []string {
	var out []string
	if n := f.longestChain.Load(); n > maxPeerChain {
		out = append(out, fmt.Sprintf("a peer job was handed a chain of %d task ids", n))
	}
	if n := f.longestEntry.Load(); n > maxPeerChainEntry {
		out = append(out, fmt.Sprintf("a peer job's chain held a task id of %d bytes", n))
	}
	return out
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

func (s *suite) peersFix(t *testing.T) *peersFixture {
	if s.peers != nil {
		return s.peers
	}
	f := &peersFixture{}
	var jobs atomic.Int64
	serve := func(accept bool, counter *atomic.Int64) string {
		h, err := a2a.NewHandler(a2a.Config{Card: a2a.Card{Name: "escape-peers", Version: "1.0.0"}, Executor: peerExec{countingExec{counter}, f},
			Tokens: []a2a.Token{{Name: "team-a", Secret: tokenA}, {Name: "team-b", Secret: tokenB}}, AcceptPeers: accept})
		if err != nil {
			t.Fatal(err)
		}
		url, client := s.serveA2A(h, "/")
		f.client = client
		return url
	}
	f.accepting, f.refusing = serve(true, &jobs), serve(false, &f.refusedJobs)
	status, body := f.post(t, f.accepting, tokenA, nil, rpc("message/send", map[string]any{"message": message("principal A's " + secret)}))
	var r struct {
		Result struct{ ID string } `json:"result"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r.Result.ID == "" {
		t.Fatalf("principal A's task: HTTP %d %s", status, body)
	}
	f.taskA = r.Result.ID
	s.peers = f
	return f
}

func (f *peersFixture) post(t *testing.T, url, token string, header map[string]string, body io.Reader) (int, []byte) {
	return sendA2A(t, f.client, http.MethodPost, url, token, body, header)
}

// peerClaim is the headers of a peer message from capsule for principal, with chain.
func peerClaim(capsule, principal, chain string) map[string]string {
	return map[string]string{a2a.HeaderTaskOrigin: "peer", a2a.HeaderTaskTrust: "trusted", a2a.HeaderPeerCapsule: capsule,
		a2a.HeaderPeerPrincipal: principal, a2a.HeaderPeerChain: chain}
}

// withVersion10 asks for A2A 1.0 besides the claim.
func withVersion10(h map[string]string) map[string]string {
	h["A2A-Version"] = "1.0"
	return h
}

// peerAttack sends method with params (principal A's task id substituted for {taskA}) as
// the holder of token with the peer claim, to the accepting capsule or the refusing one,
// and classifies the answer as "HTTP <status>" or "JSON-RPC <code>" or "answered".
func peerAttack(refusing bool, token string, claim map[string]string, method string, params func(f *peersFixture) any) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.peersFix(t)
		url := f.accepting
		if refusing {
			url = f.refusing
		}
		jobs := f.refusedJobs.Load()
		status, body := f.post(t, url, token, claim, rpc(method, params(f)))
		class := classifyA2A(status, body)
		var escaped []string
		if strings.Contains(string(body), secret) {
			escaped = append(escaped, "principal A's task text came back")
		}
		if method == "tasks/list" || method == "ListTasks" {
			if strings.Contains(string(body), f.taskA) {
				escaped = append(escaped, "principal A's task was listed")
			}
		}
		escaped = append(escaped, f.chainEscapes()...)
		if n := f.refusedJobs.Load() - jobs; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the capsule that refuses peers ran %d tasks", n))
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// The most a peer chain may hold once read (a2a keeps 64 task ids of at most 128 bytes).
const (
	maxPeerChain      = 64
	maxPeerChainEntry = 128
)

func peerRows() []row {
	taskA := func(f *peersFixture) any { return map[string]any{"id": f.taskA} }
	send := func(*peersFixture) any { return map[string]any{"message": message("from a peer")} }
	cases := []struct {
		attack, want string
		refusing     bool
		token        string
		claim        map[string]string
		method       string
		params       func(*peersFixture) any
	}{
		{"a peer claim for principal A, by principal B, reading A's task", "JSON-RPC -32001", false, tokenB, peerClaim("helper", "team-a", "tsk_1"), "tasks/get", taskA},
		{"a peer claim for principal A, by principal B, canceling A's task", "JSON-RPC -32001", false, tokenB, peerClaim("helper", "team-a", "tsk_1"), "tasks/cancel", taskA},
		{"a peer claim for principal A, by principal B, continuing A's task", "JSON-RPC -32001", false, tokenB, peerClaim("helper", "team-a", "tsk_1"), "message/send",
			func(f *peersFixture) any { return map[string]any{"message": message("hijack", "taskId="+f.taskA)} }},
		{"a peer claim for principal A, by principal B, listing tasks (ListTasks)", "answered", false, tokenB, withVersion10(peerClaim("helper", "team-a", "tsk_1")), "ListTasks",
			func(*peersFixture) any { return map[string]any{} }},
		{"a peer claim naming capsule ../../team-a", "JSON-RPC -32001", false, tokenB, peerClaim("../../team-a", "team-a", "tsk_1"), "tasks/get", taskA},
		{"a peer claim with a principal escaped to climb (team-a%2F..)", "JSON-RPC -32001", false, tokenB, peerClaim("helper", "team-a%2F..%2F..", "tsk_1"), "tasks/get", taskA},
		{"a peer claim with no credentials", "HTTP 401", false, "", peerClaim("helper", "team-a", "tsk_1"), "message/send", send},
		{"a peer claim to a capsule that takes no peer tasks", "HTTP 403", true, tokenB, peerClaim("helper", "team-b", "tsk_1"), "message/send", send},
		{"a peer claim spelled PEER to a capsule that takes no peer tasks", "HTTP 403", true, tokenB,
			map[string]string{a2a.HeaderTaskOrigin: " PEER ", a2a.HeaderPeerCapsule: "helper"}, "message/send", send},
		{"a peer claim carrying a chain of 10,000 task ids (a loop of peers past any depth)", "answered", false, tokenB,
			peerClaim("helper", "team-b", strings.Repeat("tsk_loop,", 10000)+"tsk_last"), "message/send", send},
		{"a peer claim whose chain holds a task id of 64 KiB", "answered", false, tokenB,
			peerClaim("helper", "team-b", "tsk_1,"+strings.Repeat("x", 64<<10)), "message/send", send},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("PE-%02d", i+1), surface: Peers, attack: c.attack, want: c.want,
			run: peerAttack(c.refusing, c.token, c.claim, c.method, c.params)})
	}
	return rows
}
