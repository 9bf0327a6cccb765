package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
)

// peersCassette: asked to delegate, the model sends the count to the peer "counter";
// asked to try the closed one, to "closed"; asked for a report, to "reporter"; asked to
// bounce, to "next" (the delegator's next is the bouncer, and the bouncer's the
// delegator). Each second turn ends the task.
var peersCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "delegate the count", "turns": [` + sendTurn("d", "counter", "one two three") + `, ` + endTurn("d", "The counter answered.") + `]},
 {"match": "try the closed one", "turns": [` + sendTurn("c", "closed", "one two") + `, ` + endTurn("c", "The closed one refused.") + `]},
 {"match": "report please", "turns": [` + sendTurn("r", "reporter", "alpha beta") + `, ` + endTurn("r", "Reported.") + `]},
 {"match": "bounce", "turns": [` + sendTurn("b", "next", "bounce") + `, ` + endTurn("b", "Bounced.") + `]}]}`

// sendTurn is a model turn calling send_message (call id tu_<id>), endTurn one ending the
// task with text.
func sendTurn(id, peer, msg string) string {
	return `{"id": "` + id + `1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_` + id + `", "name": "send_message", "input": {"peer": "` + peer + `", "message": "` + msg + `"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}`
}

func endTurn(id, text string) string {
	return `{"id": "` + id + `2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "` + text + `"}], "usage": {"input_tokens": 20, "output_tokens": 4}}`
}

// TestPeers: capsules on one gateway, reached in-process through its own server under
// handle_path. The agent "delegator" hands a count to the wordcount capsule, which
// accepts peer tasks: its answer reaches the model, and its streamed chunks reach a
// client streaming the delegating task; a report to the reporter capsule comes back as
// text and a file part, the file relayed to the client as an artifact of its task; a
// wordcount that does not accept peer tasks refuses (E-PEER-005, read by the model as the
// tool's error); A → B → A (delegator → bouncer → delegator) stops at peer_depth
// (E-PEER-003). The delegated task is owned by the principal derived from the delegator:
// the anonymous client cannot read it, the delegator's runtime, acting for the same
// principal, can, another capsule's cannot.
func TestPeers(t *testing.T) {
	// Parallel: it waits on gateways and an exporter more than it computes, and the
	// package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	tmp, reg, provider, requests := peerRig(t, peersCassette)

	port := freePort(t)
	base := "http://127.0.0.1:" + port
	script := func(dir, wasm, m string) string {
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "capsule.wasm"), guestbuild.Wasm(t, wasm), 0o644)
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(m), 0o644)
		return filepath.Join(dir, "murmur.yaml")
	}
	const wc = "artifacts:\n  - {name: wordcount, version: 1.1.0}\ncapabilities:\n  limits: {memory_bytes: 67108864, deadline_seconds: 30}\n" +
		"lifecycle: {task_acceptance: queue, queue_depth: 8}\n"
	const accept = "exports:\n  peer_tasks: {accept: true}\n"
	open := script(filepath.Join(tmp, "open"), "../examples/guests/wordcount-capsule", "name: wordcount\nversion: 1.0.0\n"+wc+accept)
	closed := script(filepath.Join(tmp, "closed"), "../examples/guests/wordcount-capsule", "name: wordcount\nversion: 1.0.0\n"+wc)
	reporter := script(filepath.Join(tmp, "reporter"), "../internal/testkit/testguests/reporter", "name: reporter\nversion: 1.0.0\n"+wc+accept)
	agent := func(name, next string) string {
		p := filepath.Join(tmp, name, "murmur.yaml")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(agentWith(name, provider.URL)+`peers:
  - {name: counter, url: "`+base+`/agents/counter/", description: counts words}
  - {name: closed, url: "`+base+`/agents/closed/"}
  - {name: reporter, url: "`+base+`/agents/reporter/"}
  - {name: next, url: "`+base+`/agents/`+next+`/"}
`+accept+`capabilities:
  network: {allow: ["127.0.0.1:`+port+`"]}
  limits: {memory_bytes: 134217728, deadline_seconds: 60, peer_depth: 2}
lifecycle: {task_acceptance: queue, queue_depth: 8}
`), 0o644)
		return p
	}
	delegator, bouncer := agent("delegator", "bouncer"), agent("bouncer", "delegator")
	serveSites(t, `http://127.0.0.1:`+port+` {
	handle_path /agents/delegator/* {
		# A → B → A: two of the chain's tasks run at once on this capsule.
		capsule `+delegator+` {
			concurrency 4
		}
	}
	handle_path /agents/bouncer/* {
		capsule `+bouncer+`
	}
	handle_path /agents/counter/* {
		capsule `+open+`
	}
	handle_path /agents/closed/* {
		capsule `+closed+`
	}
	handle_path /agents/reporter/* {
		capsule `+reporter+`
	}
}
`, "CAPSULE_REGISTRY="+reg)
	g := &gateway{base: base, httpClient: &http.Client{Timeout: 60 * time.Second}}

	// Delegated, streamed: the peer's chunks reach the client as progress, its answer the
	// model, and the task completes.
	var progress strings.Builder
	for ev := range g.stream(t, "/agents/delegator/", "", "message/stream", map[string]any{"message": msg03("delegate the count")}) {
		progress.Write(ev.data)
	}
	if !strings.Contains(progress.String(), "Counting the words") || !strings.Contains(progress.String(), "The counter answered.") {
		t.Errorf("the stream of the delegating task lacks the peer's chunks or its end: %.3000s", progress.String())
	}
	result := toolResult(t, requests(), "tu_d")
	peerTask := regexp.MustCompile(`its task (\S+),`).FindStringSubmatch(result)
	if !strings.Contains(result, "Peer counter answered") || !strings.Contains(result, "3 words") || peerTask == nil {
		t.Fatalf("the model read %q", result)
	}

	// Whose task it is: not the anonymous client's, though it sent the delegating task;
	// the delegator's runtime, for that same principal, reads it.
	if r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]}); r.Error == nil {
		t.Errorf("the client read the delegated task: %s", r.body)
	}
	r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]},
		a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "delegator")
	if got := decodeTask(t, r); got.Status.State != "completed" || !strings.Contains(got.text(), "3 words") {
		t.Errorf("the delegated task, read as the delegator: %v", got)
	}
	// Another capsule's runtime, or the delegator acting for someone else, cannot.
	for _, h := range [][]string{{a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "other"},
		{a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "delegator", a2a.HeaderPeerPrincipal, "mallory"}} {
		if r := g.call(t, "/agents/counter/", "", "tasks/get", map[string]any{"id": peerTask[1]}, h...); r.Error == nil {
			t.Errorf("read with %v: %s", h, r.body)
		}
	}

	// A report: text to the model, the file relayed to the client with the task.
	r = g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("report please")})
	if tk := decodeTask(t, r); tk.Status.State != "completed" || !strings.HasPrefix(tk.text(), "Reported.") { // then the relayed answer
		t.Fatalf("reporting task %v", tk)
	}
	if result := toolResult(t, requests(), "tu_r"); !strings.Contains(result, "2 words") || !strings.Contains(result, "report.txt") {
		t.Errorf("the model read %q", result)
	}
	if !strings.Contains(string(r.Result), `"name":"report.txt"`) || !strings.Contains(string(r.Result), `"mimeType":"text/plain"`) ||
		!strings.Contains(string(r.Result), `"name":"reporter: answer"`) || !strings.Contains(string(r.Result), `2 words`) {
		t.Errorf("the reporter's text and file are not artifacts of the delegating task: %s", r.Result)
	}

	// Refused by a capsule that does not accept peer tasks: the model reads why.
	tk := decodeTask(t, g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("try the closed one")}))
	if result := toolResult(t, requests(), "tu_c"); tk.Status.State != "completed" || !strings.Contains(result, "E-PEER-005") {
		t.Errorf("task %v; the model read %q", tk, result)
	}
	// A client that is no runtime is served as always by the closed capsule.
	if tk := decodeTask(t, g.call(t, "/agents/closed/", "", "message/send", map[string]any{"message": msg03("a b")})); tk.Status.State != "completed" {
		t.Errorf("a client's task on the closed capsule: %v", tk)
	}

	// A → B → A: the client's task on the delegator (depth 0) sends to the bouncer (1),
	// which sends back to the delegator (2, peer_depth); that task may not start depth 3.
	tk = decodeTask(t, g.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("bounce")}))
	if tk.Status.State != "completed" || !strings.HasPrefix(tk.text(), "Bounced.") {
		t.Fatalf("bouncing task %v", tk)
	}
	var refusals int
	for _, body := range requests() {
		if strings.Contains(body, "E-PEER-003") && strings.Contains(body, "depth 2") {
			refusals++
		}
	}
	if refusals != 1 {
		t.Errorf("%d turns read the depth refusal E-PEER-003 at depth 2, want the chain's last task's one", refusals)
	}
}

// peerRig is what both peer tests start from: a folder, a registry holding the wordcount
// tool and the anthropic-messages driver, and a replay provider answering from cassette,
// recording each request.
func peerRig(t *testing.T, cassette string) (tmp, reg string, provider *httptest.Server, requests func() []string) {
	t.Helper()
	tmp = t.TempDir()
	home := filepath.Join(tmp, "home")
	reg = filepath.Join(tmp, "registry")
	os.MkdirAll(home, 0o755)
	publish(t, home, reg, "../examples/artifacts/wordcount", "wordcount", guestbuild.Wasm(t, "../examples/guests/wordcount"))
	publish(t, home, reg, "../examples/drivers/anthropic-messages/artifact", "anthropic-messages", guestbuild.Wasm(t, "../examples/drivers/anthropic-messages"))
	cassettes := filepath.Join(tmp, "cassettes")
	os.MkdirAll(cassettes, 0o755)
	os.WriteFile(filepath.Join(cassettes, "peers.json"), []byte(cassette), 0o644)
	provider, requests = recordingProvider(t, cassettes)
	return tmp, reg, provider, requests
}

// agentWith is the head of an agent capsule's manifest: name, the anthropic-messages
// driver against the replay provider at providerURL, model m, four turns.
func agentWith(name, providerURL string) string {
	return "name: " + name + "\nversion: 1.0.0\nartifacts:\n" +
		"  - {name: anthropic-messages, version: 0.2.0, runtime: driver, gateway: {endpoint: \"" + providerURL + "\"}}\n" +
		"inference:\n  driver: {artifact: anthropic-messages}\n  model: m\n  max_turns: 4\n"
}

// toolResult is the text of the tool result for call id in the provider requests.
func toolResult(t *testing.T, bodies []string, id string) string {
	t.Helper()
	for _, b := range bodies {
		var req struct {
			Messages []struct {
				Content []struct {
					Type      string
					ToolUseID string `json:"tool_use_id"`
					Content   []struct{ Text string }
				}
			}
		}
		if json.Unmarshal([]byte(b), &req) != nil {
			continue
		}
		for _, m := range req.Messages {
			for _, c := range m.Content {
				if c.Type == "tool_result" && c.ToolUseID == id && len(c.Content) > 0 {
					return c.Content[0].Text
				}
			}
		}
	}
	t.Fatalf("no provider request holds the result of %s", id)
	return ""
}

// reportCassette: asked for a report, the model hands the text to the peer "reporter",
// then ends the task.
const reportCassette = `{"provider": "anthropic-messages", "conversations": [
 {"match": "delegate the report", "turns": [
   {"id": "r1", "type": "message", "role": "assistant", "model": "m", "stop_reason": "tool_use",
    "content": [{"type": "tool_use", "id": "tu_r", "name": "send_message", "input": {"peer": "reporter", "message": "alpha beta gamma"}}], "usage": {"input_tokens": 12, "output_tokens": 6}},
   {"id": "r2", "type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "The reporter reported."}], "usage": {"input_tokens": 30, "output_tokens": 4}}]}]}`

// TestPeersAcrossGateways: capsule A on one gateway process delegates to capsule B on
// another, over a socket, presenting the operator's peer_credential. Alice's task on A
// gets B's answer relayed — text to the model, B's file as an artifact of her task — and
// one trace id, the client's, spans A's request, A's turn, the peer call, B's request, B's
// task and B's tool call on the spans a real OTLP receiver got. The delegated task is
// owned as documented: neither a third principal nor the sending gateway's own principal
// reads it, and the delegator acting for alice reads none of bob's tasks on B. A script
// capsule's guest, through murmur:message/send, reads each refusal: a peer outside
// network.allow, a peer that does not accept peer tasks, a fan-out over peer_calls.
func TestPeersAcrossGateways(t *testing.T) {
	// Parallel: it waits on gateways and an exporter more than it computes, and the
	// package's wall time is near its bound (docs/benchmarks.md, the test suite's time).
	t.Parallel()
	tmp, reg, provider, requests := peerRig(t, reportCassette)
	rcv := otlptest.Start(t)
	portA, portB := freePort(t), freePort(t)
	baseA, baseB := "http://127.0.0.1:"+portA, "http://127.0.0.1:"+portB
	write := func(rel, body string, wasm []byte) string {
		dir := filepath.Join(tmp, rel)
		os.MkdirAll(dir, 0o755)
		if wasm != nil {
			os.WriteFile(filepath.Join(dir, "capsule.wasm"), wasm, 0o644)
		}
		os.WriteFile(filepath.Join(dir, "murmur.yaml"), []byte(body), 0o644)
		return filepath.Join(dir, "murmur.yaml")
	}
	const limits = "  limits: {memory_bytes: 134217728, deadline_seconds: 60}\n"
	reporterWasm := guestbuild.Wasm(t, "../internal/testkit/testguests/reporter")
	reporter := write("b/reporter", "name: reporter\nversion: 1.0.0\nartifacts:\n  - {name: wordcount, version: 1.1.0}\ncapabilities:\n"+limits+
		"lifecycle: {task_acceptance: queue, queue_depth: 8}\nexports:\n  peer_tasks: {accept: true}\n", reporterWasm)
	closed := write("b/closed", "name: closed\nversion: 1.0.0\nartifacts:\n  - {name: wordcount, version: 1.1.0}\ncapabilities:\n"+limits, reporterWasm)
	delegator := write("a/delegator", agentWith("delegator", provider.URL)+`peers:
  - {name: reporter, url: "`+baseB+`/agents/reporter/", description: writes a report}
capabilities:
  network: {allow: ["127.0.0.1:`+portB+`"]}
`+limits, nil)
	messengerWasm := guestbuild.Wasm(t, "../internal/testkit/testguests/messenger")
	messenger := write("a/messenger", "name: messenger\nversion: 1.0.0\ncapabilities:\n  network: {allow: [\"127.0.0.1:"+portB+"\"]}\n"+
		"  limits: {memory_bytes: 134217728, deadline_seconds: 60, peer_calls: 3}\n", messengerWasm)
	// B's messenger sends back to A's: A → B → A, which its peer_depth of 1 stops.
	bounce := write("b/messenger", "name: bounce\nversion: 1.0.0\ncapabilities:\n  network: {allow: [\"127.0.0.1:"+portA+"\"]}\n"+
		"  limits: {memory_bytes: 134217728, deadline_seconds: 60, peer_depth: 1}\nexports:\n  peer_tasks: {accept: true}\n", messengerWasm)

	otel := "\t\totel {\n\t\t\tendpoint " + rcv.Endpoint() + "\n\t\t}"
	env := []string{"CAPSULE_REGISTRY=" + reg, "GW_A_TOKEN=gw-a-secret", "BOB_TOKEN=bob-secret", "ALICE_TOKEN=alice-secret"}
	serveApp(t, otel, `http://127.0.0.1:`+portB+` {
	handle_path /agents/reporter/* {
		capsule `+reporter+` {
			auth bearer {
				gw-a GW_A_TOKEN
				bob BOB_TOKEN
			}
		}
	}
	handle_path /agents/closed/* {
		capsule `+closed+` {
			auth bearer {
				gw-a GW_A_TOKEN
			}
		}
	}
	handle_path /agents/bounce/* {
		capsule `+bounce+` {
			auth bearer {
				gw-a GW_A_TOKEN
			}
		}
	}
}
`, env...)
	serveApp(t, otel+"\n\t\tpeer_credential "+baseB+"/ bearer {env.GW_A_TOKEN}", `http://127.0.0.1:`+portA+` {
	handle_path /agents/delegator/* {
		capsule `+delegator+` {
			auth bearer {
				alice ALICE_TOKEN
			}
		}
	}
	handle_path /agents/messenger/* {
		capsule `+messenger+` {
			auth bearer {
				alice ALICE_TOKEN
			}
		}
	}
}
`, env...)
	gA := &gateway{base: baseA, httpClient: &http.Client{Timeout: 90 * time.Second}}
	gB := &gateway{base: baseB, httpClient: &http.Client{Timeout: 90 * time.Second}}
	alice := []string{"Authorization", "Bearer alice-secret"}

	// Alice delegates through A; the client's traceparent parents everything.
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	r := gA.call(t, "/agents/delegator/", "", "message/send", map[string]any{"message": msg03("delegate the report")},
		append(alice, "traceparent", "00-"+traceID+"-b7ad6b7169203331-01")...)
	tk := decodeTask(t, r)
	if tk.Status.State != "completed" || !strings.HasPrefix(tk.text(), "The reporter reported.") {
		t.Fatalf("delegating task %v", tk)
	}
	if result := toolResult(t, requests(), "tu_r"); !strings.Contains(result, "Peer reporter answered") || !strings.Contains(result, "report.txt") {
		t.Errorf("the model read %q", result)
	}
	// B's file reached alice as an artifact of her task.
	var full struct {
		Artifacts []struct {
			Parts []struct {
				Kind string
				File *struct{ Name, MimeType, Bytes string }
			}
		}
	}
	json.Unmarshal(r.Result, &full)
	var relayed bool
	for _, a := range full.Artifacts {
		for _, p := range a.Parts {
			if p.File != nil && p.File.Name == "report.txt" {
				relayed = true
			}
		}
	}
	if !relayed {
		t.Errorf("B's report.txt is not among the artifacts of alice's task: %s", r.Result)
	}

	// One trace: A's request, A's turn, the peer call, B's request, B's task, B's tool call.
	spans := rcv.WaitFor(t, 60*time.Second, func(s []otlptest.Span) bool {
		return len(otlptest.ByName(s, "invoke_agent reporter")) == 1 && len(otlptest.ByName(s, "execute_tool wordcount")) >= 1 &&
			len(otlptest.ByName(s, "send_message reporter")) == 1 && len(otlptest.ByName(s, "invoke_agent delegator")) == 1
	})
	for _, name := range []string{"message/send", "invoke_agent delegator", "chat m", "send_message reporter", "invoke_agent reporter", "execute_tool wordcount"} {
		found := false
		for _, s := range otlptest.ByName(spans, name) {
			found = found || s.TraceID == traceID
		}
		if !found {
			t.Errorf("no %q span in the client's trace %s", name, traceID)
		}
	}
	send := otlptest.ByName(spans, "send_message reporter")[0]
	peerTask := send.Str("capsule.peer.task.id")
	if send.Str("a2a.task.id") != tk.ID || peerTask == "" || send.Int("capsule.peer.depth") != 1 {
		t.Errorf("the send_message span names %s → %s: %s", send.Str("a2a.task.id"), peerTask, send)
	}
	if b := otlptest.ByName(spans, "invoke_agent reporter")[0]; b.Str("a2a.task.id") != peerTask || b.TraceID != traceID {
		t.Errorf("B's task span %s", b)
	}

	// Whose task it is.
	get := func(id string, h ...string) rpcReply {
		return gB.call(t, "/agents/reporter/", "", "tasks/get", map[string]any{"id": id}, h...)
	}
	gwA := []string{"Authorization", "Bearer gw-a-secret"}
	asDelegator := func(forWhom string) []string {
		return append(append([]string(nil), gwA...), a2a.HeaderTaskOrigin, "peer", a2a.HeaderPeerCapsule, "delegator", a2a.HeaderPeerPrincipal, forWhom)
	}
	if got := decodeTask(t, get(peerTask, asDelegator("alice")...)); got.Status.State != "completed" {
		t.Errorf("the delegator acting for alice cannot read the task it sent: %v", got)
	}
	for name, h := range map[string][]string{"bob": {"Authorization", "Bearer bob-secret"}, "the sending gateway itself": gwA,
		"the delegator for someone else": asDelegator("mallory")} {
		if r := get(peerTask, h...); r.Error == nil {
			t.Errorf("%s read the delegated task: %s", name, r.body)
		}
	}
	bobs := decodeTask(t, gB.call(t, "/agents/reporter/", "", "message/send", map[string]any{"message": msg03("bob's own")}, "Authorization", "Bearer bob-secret"))
	if r := get(bobs.ID, asDelegator("alice")...); r.Error == nil {
		t.Errorf("the delegator read bob's task on B: %s", r.body)
	}

	// A guest's refusals, each read by the guest: outside network.allow, no consent, and the
	// fourth message of a task allowed three.
	lines := strings.Join([]string{
		"send http://127.0.0.1:1/agents/x/ m-far hi",
		"send " + baseB + "/agents/closed/ m-closed hi",
		"send " + baseB + "/agents/reporter/ m-1 one",
		"send " + baseB + "/agents/reporter/ m-2 one two",
		"send " + baseB + "/agents/reporter/ m-3 one two three",
	}, "\n")
	mt := decodeTask(t, gA.call(t, "/agents/messenger/", "", "message/send", map[string]any{"message": msg03(lines)}, alice...))
	got := strings.Split(strings.TrimSpace(mt.text()), "\n")
	want := []string{"error: E-PEER-002", "error: E-PEER-005", "ok: ", "ok: ", "error: E-PEER-004"}
	if mt.Status.State != "completed" || len(got) != len(want) {
		t.Fatalf("messenger answered %v: %q", mt.Status.State, got)
	}
	for i, w := range want {
		if !strings.Contains(got[i], w) {
			t.Errorf("line %d: %q, want %q", i+1, got[i], w)
		}
	}
	if !strings.Contains(got[2], "completed: 1 word") {
		t.Errorf("the guest did not read the peer's answer: %q", got[2])
	}

	// A → B → A through guests: A's messenger asks B's to send back to A; B's task, at
	// depth 1 of its peer_depth 1, may not, and its guest reads why — which A's reads.
	mt = decodeTask(t, gA.call(t, "/agents/messenger/", "", "message/send",
		map[string]any{"message": msg03("send " + baseB + "/agents/bounce/ m-out send " + baseA + "/agents/messenger/ m-back hi")}, alice...))
	if back := mt.text(); mt.Status.State != "completed" || !strings.HasPrefix(back, "ok: ") || !strings.Contains(back, "error: E-PEER-003") {
		t.Errorf("the loop's answer: %q", back)
	}
}
