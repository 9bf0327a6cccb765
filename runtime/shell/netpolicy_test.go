//go:build linux

package shell

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/capsulegate/capsulegate/netpolicy"
)

// TestWithNetpolicy wires the sandbox to the real netpolicy proxy and pinning resolver,
// as a session does.
func TestWithNetpolicy(t *testing.T) {
	requireTier(t, TierSealed)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	defer upstream.Close()
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())

	// The upstream DNS server the resolver asks: api.test has a public address.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dnsSrv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if strings.EqualFold(q.Question[0].Name, "api.test.") && q.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR("api.test. 60 IN A 93.184.215.14")
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	})}
	go dnsSrv.ActivateAndServe()
	defer dnsSrv.Shutdown()

	rules, err := netpolicy.ParseRules([]string{"localhost:" + port, "api.test"})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var denials []string
	onDeny := func(d netpolicy.Denial) {
		mu.Lock()
		denials = append(denials, d.Source+" "+d.Host)
		mu.Unlock()
	}
	res, err := netpolicy.NewResolver(netpolicy.ResolverConfig{Rules: rules, Upstream: pc.LocalAddr().String(), OnDeny: onDeny})
	if err != nil {
		t.Fatal(err)
	}
	rl := listenLoopback(t)
	stop, err := res.Serve(nil, rl)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	proxy, err := netpolicy.NewProxy(netpolicy.ProxyConfig{Rules: rules, Resolver: res, OnDeny: onDeny})
	if err != nil {
		t.Fatal(err)
	}
	pl := listenLoopback(t)
	go proxy.Serve(pl)
	defer proxy.Close()

	s := newSandbox(t, Config{ProxyAddr: pl.Addr().String(), DNSAddr: rl.Addr().String(), Allow: []string{"bash", "curl"}})
	for name, tc := range map[string]struct {
		cmd, want string
		ok        bool
	}{
		"allowed":     {"curl -sS -m 20 http://localhost:" + port + "/", "hello from upstream", true},
		"denied":      {"curl -sS -m 20 -o /dev/null -w '%{http_code}' http://denied.example/", "403", true},
		"direct":      {"curl -sS -m 5 --noproxy '*' " + upstream.URL, "", false},
		"dns allowed": {"getent ahostsv4 api.test | head -1", "93.184.215.14", true},
		"dns denied":  {"getent hosts evil.example", "", false},
	} {
		r := bash(t, s, tc.cmd)
		out, _ := streams(t, r)
		if (r.ExitCode == 0) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want ok=%v and %q:\n%s", name, r.ExitCode, tc.ok, tc.want, r.Text)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	joined := strings.Join(denials, ",")
	if !strings.Contains(joined, "proxy denied.example") || !strings.Contains(joined, "dns evil.example") {
		t.Errorf("denials seen by netpolicy: %q", joined)
	}
}
