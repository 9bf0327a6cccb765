package runtime

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/runtime/shell"
)

// TestAgentShellTools runs an agent whose model asks for shell commands, through the
// real loop, dispatcher and sandbox: a read of /etc/shadow is refused, curl reaches the
// allowlisted local host through the session's proxy, and a host not allowed is refused
// by the proxy, denied in the trace and counted. The wrapper is the configured one
// (SessionConfig.SandboxHelper), announced with the tier.
func TestAgentShellTools(t *testing.T) {
	if rep := shell.DetectTier(); rep.Tier == shell.TierEnvOnly {
		t.Skipf("this host only gives the env-only sandbox tier (%v): nothing would confine the commands", rep.Reasons)
	}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from the allowed host")
	}))
	defer origin.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(origin.URL, "http://"))

	call := func(id, name, command string) string {
		return fmt.Sprintf(`{"id": %q, "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
 "content": [{"type": "tool_use", "id": "tu_%s", "name": %q, "input": {"command": %q}}], "usage": {"input_tokens": 1, "output_tokens": 1}}`, id, id, name, command)
	}
	cassette := `{"provider": "anthropic-messages", "conversations": [{"match": "use the shell", "turns": [` +
		call("s1", "bash", "cat /etc/shadow; echo home=$HOME") + `,` +
		call("s2", "curl", "curl -s -m 20 http://localhost:"+port+"/") + `,` +
		call("s3", "curl", "curl -s -m 20 -o /dev/null -w code=%{http_code} http://not-allowed.test/") + `,
 {"id": "s4", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
  "content": [{"type": "text", "text": "done"}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`
	p := newProvider(t, cassette)
	e, reg := agentRig(t, map[string][2]string{
		"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"},
		"echo":               {"tool", "../internal/testkit/testguests/echo"},
	})
	lookup := func(k string) (string, bool) { return map[string]string{"TEST_KEY": "k"}[k], k == "TEST_KEY" }
	m := agentManifest(t, "anthropic-messages", p.srv.URL, "10",
		"  shell: {allow: [bash, curl]}\n  network: {allow: [\"localhost:"+port+"\"]}\n", lookup)

	// The test binary, which imports runtime/shell, as the configured wrapper.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	res, err := e.RunOnce(context.Background(), m, RunOptions{Registry: reg, Task: "please use the shell",
		Session: SessionConfig{WorkRoot: t.TempDir(), LookupEnv: lookup, Stderr: &stderr, SandboxHelper: self}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != StateCompleted || res.Result != "done" {
		t.Fatalf("result = %+v", res)
	}
	seen := p.seen()
	if len(seen) != 4 {
		t.Fatalf("%d provider requests", len(seen))
	}
	for i, want := range []string{"home=", "hello from the allowed host", "code=403"} {
		if body := string(seen[i+1].body); !strings.Contains(body, want) {
			t.Errorf("request %d lacks %q: %.600s", i+2, want, body)
		}
	}
	if body := string(seen[1].body); strings.Contains(body, "root:") || !strings.Contains(body, "Exit code:") {
		t.Errorf("/etc/shadow was readable, or the result is not a shell result: %.600s", body)
	}
	if !strings.Contains(stderr.String(), "sandbox tier") || !strings.Contains(stderr.String(), "wrapper "+self+" (configured)") {
		t.Errorf("the tier and the configured wrapper were not announced: %q", stderr.String())
	}
	counts := map[string]int{}
	var tier string
	var receipt map[string]any
	for _, ev := range traceEvents(t, res.Records) {
		typ := ev["event_type"].(string)
		counts[typ]++
		if typ == EventReceipt {
			receipt = ev
		}
		if typ == EventSessionStart {
			tier, _ = ev["sandbox_tier"].(string)
		}
		if typ == EventToolCall && ev["kind"] != "shell" {
			t.Errorf("tool call %v", ev)
		}
	}
	if !strings.HasPrefix(tier, "wasm+") || counts[EventShell] != 3 || counts[EventToolCall] != 3 || counts[EventNetworkDenied] < 1 {
		t.Errorf("tier %q, events %v", tier, counts)
	}
	if n := testutil.ToFloat64(e.engine.Metrics().Denied.WithLabelValues("agent", "proxy")); n < 1 {
		t.Errorf("proxy denials counted: %v", n)
	}
	// The receipt counts what the events told (3 shell calls, every denial) and what the
	// proxy carried: the allowed host's answer came through it.
	if receipt == nil {
		t.Fatal("no task_receipt event in the trace")
	}
	if tools, _ := receipt["toolCalls"].(map[string]any); len(tools) != 1 || tools["shell"] != 3.0 ||
		receipt["networkDenials"] != float64(counts[EventNetworkDenied]) {
		t.Errorf("receipt %v, events %v", receipt, counts)
	}
	if recv, _ := receipt["networkBytesReceived"].(float64); recv < float64(len("hello from the allowed host")) {
		t.Errorf("receipt: %v bytes received through the proxy", receipt["networkBytesReceived"])
	}
}

// TestAgentShellDNS asks, from a shell command the model requested, for names through the
// sandbox's resolver: an upstream that rebinds (first a public address, then loopback)
// is pinned to its first answer for the whole session; an allowlisted name resolving to
// the metadata address and a name no rule names are refused.
func TestAgentShellDNS(t *testing.T) {
	if rep := shell.DetectTier(); rep.Tier != shell.TierSealed {
		t.Skipf("the sandbox's own resolver needs the sealed tier; this host gives %s (%v)", rep.Tier, rep.Reasons)
	}
	var mu sync.Mutex
	asked := map[string]int{}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		if q.Question[0].Qtype == dns.TypeA {
			mu.Lock()
			asked[name]++
			n := asked[name]
			mu.Unlock()
			addr := map[string]string{"rebind.test.": "93.184.216.34", "meta.test.": "169.254.169.254"}[name]
			if name == "rebind.test." && n > 1 {
				addr = "127.0.0.1" // the rebinding answer, never to be used
			}
			if addr != "" {
				rr, _ := dns.NewRR(name + " 1 IN A " + addr)
				m.Answer = append(m.Answer, rr)
			}
		}
		w.WriteMsg(m)
	})}
	go upstream.ActivateAndServe()
	defer upstream.Shutdown()

	command := "getent ahostsv4 rebind.test | head -1; getent ahostsv4 rebind.test | head -1; " +
		"getent ahostsv4 meta.test || echo meta=refused; getent ahostsv4 other.test || echo other=refused"
	cassette := `{"provider": "anthropic-messages", "conversations": [{"match": "resolve", "turns": [
 {"id": "d1", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "tool_use",
  "content": [{"type": "tool_use", "id": "tu_d1", "name": "bash", "input": {"command": ` + strconv.Quote(command) + `}}], "usage": {"input_tokens": 1, "output_tokens": 1}},
 {"id": "d2", "type": "message", "role": "assistant", "model": "m-test", "stop_reason": "end_turn",
  "content": [{"type": "text", "text": "resolved"}], "usage": {"input_tokens": 1, "output_tokens": 1}}]}]}`
	p := newProvider(t, cassette)
	e, reg := agentRig(t, map[string][2]string{
		"anthropic-messages": {"driver", "../examples/drivers/anthropic-messages"},
		"echo":               {"tool", "../internal/testkit/testguests/echo"},
	})
	lookup := func(k string) (string, bool) { return map[string]string{"TEST_KEY": "k"}[k], k == "TEST_KEY" }
	m := agentManifest(t, "anthropic-messages", p.srv.URL, "10",
		"  shell: {allow: [bash]}\n  network: {allow: [rebind.test, meta.test]}\n", lookup)
	res, err := e.RunOnce(context.Background(), m, RunOptions{Registry: reg, Task: "please resolve", Session: SessionConfig{WorkRoot: t.TempDir(), LookupEnv: lookup, DNSUpstream: pc.LocalAddr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	seen := p.seen()
	if res.Status != StateCompleted || len(seen) != 2 {
		t.Fatalf("result %+v after %d requests", res, len(seen))
	}
	body := string(seen[1].body)
	if strings.Count(body, "93.184.216.34") != 2 || strings.Contains(body, "127.0.0.1") ||
		!strings.Contains(body, "meta=refused") || !strings.Contains(body, "other=refused") {
		t.Fatalf("the command saw: %.2000s (asked %v)", body[strings.Index(body, "tool_result"):], asked)
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["rebind.test."] != 1 || asked["other.test."] != 0 { // one A question, ever: the answer is pinned
		t.Errorf("upstream asked %v", asked)
	}
}
