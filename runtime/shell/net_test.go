//go:build linux

package shell

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// testProxy is a stand-in for the netpolicy proxy: absolute-form GET and CONNECT, only to
// allowed.test, which it sends to the upstream test server.
type testProxy struct {
	upstream string // host:port of the test server
	denied   atomic.Int32
}

func (p *testProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if r.Method != http.MethodConnect {
		host = r.URL.Host
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host != "allowed.test" {
		p.denied.Add(1)
		http.Error(w, "denied by the test proxy: "+host, http.StatusForbidden)
		return
	}
	if r.Method == http.MethodConnect {
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		if n := brw.Reader.Buffered(); n > 0 {
			b, _ := brw.Reader.Peek(n)
			up.Write(b)
		}
		pipe(c, up)
		return
	}
	u := *r.URL
	u.Host = p.upstream
	req, _ := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

// testDNS answers DNS over TCP: allowed.test A 198.51.100.7, everything else NXDOMAIN.
type testDNS struct {
	queries atomic.Int32
	names   sync.Map
}

func (d *testDNS) serve(ln net.Listener) {
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		d.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		d.names.Store(name, true)
		switch {
		case name == "allowed.test." && q.Question[0].Qtype == dns.TypeA:
			rr, _ := dns.NewRR("allowed.test. 60 IN A 198.51.100.7")
			m.Answer = append(m.Answer, rr)
		case name == "allowed.test.":
		default:
			m.Rcode = dns.RcodeNameError
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
}

func listenLoopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// netFixture starts the upstream server, the stand-in proxy and DNS server on loopback.
func netFixture(t *testing.T) (upstream *httptest.Server, proxy *testProxy, proxyAddr string, d *testDNS, dnsAddr string) {
	upstream = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello from upstream")
	}))
	t.Cleanup(upstream.Close)
	proxy = &testProxy{upstream: upstream.Listener.Addr().String()}
	pl := listenLoopback(t)
	ps := &http.Server{Handler: proxy}
	go ps.Serve(pl)
	t.Cleanup(func() { ps.Close() })
	d = &testDNS{}
	dl := listenLoopback(t)
	d.serve(dl)
	return upstream, proxy, pl.Addr().String(), d, dl.Addr().String()
}

// TestSealedNetwork: the proxy is the only way out; DNS goes to the resolver bridge.
func TestSealedNetwork(t *testing.T) {
	requireTier(t, TierSealed)
	upstream, proxy, proxyAddr, d, dnsAddr := netFixture(t)
	s := newSandbox(t, Config{ProxyAddr: proxyAddr, DNSAddr: dnsAddr, Allow: []string{"bash", "curl", "python3"}})
	up, _ := url.Parse(upstream.URL)

	for name, tc := range map[string]struct {
		cmd, want string
		ok        bool
	}{
		"allowed via proxy":      {"curl -sS -m 20 http://allowed.test/", "hello from upstream", true},
		"allowed via CONNECT":    {"curl -sS -m 20 -p http://allowed.test/", "hello from upstream", true},
		"denied by proxy":        {"curl -sS -m 20 -o /dev/null -w '%{http_code}' http://denied.test/", "403", true},
		"proxy env":              {`echo "$HTTP_PROXY $https_proxy $ALL_PROXY"`, "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128", true},
		"direct to upstream":     {"curl -sS -m 5 --noproxy '*' " + upstream.URL, "", false},
		"direct to host proxy":   {"curl -sS -m 5 --noproxy '*' -x '' http://" + proxyAddr + "/", "", false},
		"udp out":                {`python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('198.51.100.1', 53))"`, "", false},
		"tcp out":                {`python3 -c "import socket; socket.create_connection(('198.51.100.1', 80), timeout=5)"`, "", false},
		"dns allowed":            {"getent ahostsv4 allowed.test | head -1", "198.51.100.7", true},
		"dns refused":            {"getent hosts denied.test", "", false},
		"vsock":                  {`python3 -c "import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)"`, "", false},
		"mptcp":                  {`python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)"`, "", false},
		"loopback server inside": {`python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); c=socket.create_connection(s.getsockname()); print('local ok')"`, "local ok", true},
	} {
		r := bash(t, s, tc.cmd)
		out, _ := streams(t, r)
		if (r.ExitCode == 0) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want ok=%v and %q:\n%s", name, r.ExitCode, tc.ok, tc.want, r.Text)
		}
	}
	if proxy.denied.Load() == 0 {
		t.Error("the proxy never saw the denied request")
	}
	if _, ok := d.names.Load("allowed.test."); !ok {
		t.Error("the DNS query never reached the gateway's resolver")
	}
	_ = up
}

// TestScopedNetwork: without namespaces, Landlock lets TCP reach only the proxy's port,
// and seccomp refuses every other kind of socket.
func TestScopedNetwork(t *testing.T) {
	requireTier(t, TierScoped)
	upstream, _, proxyAddr, _, _ := netFixture(t)
	s := newSandbox(t, Config{ProxyAddr: proxyAddr, Allow: []string{"bash", "curl", "python3"}, tier: TierScoped})
	for name, tc := range map[string]struct {
		cmd, want string
		ok        bool
	}{
		"allowed via proxy":  {"curl -sS -m 20 http://allowed.test/", "hello from upstream", true},
		"denied by proxy":    {"curl -sS -m 20 -o /dev/null -w '%{http_code}' http://denied.test/", "403", true},
		"proxy env":          {`echo "$HTTP_PROXY"`, "http://" + proxyAddr, true},
		"direct to upstream": {"curl -sS -m 5 --noproxy '*' " + upstream.URL, "", false},
		"udp out":            {`python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"`, "", false},
		"unix socket":        {`python3 -c "import socket; socket.socket(socket.AF_UNIX)"`, "", false},
		"listen":             {`python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0))"`, "", false},
		"mptcp":              {`python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262)"`, "", false},
		"sctp":               {`python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132)"`, "", false},
		"vsock":              {`python3 -c "import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)"`, "", false},
	} {
		r := bash(t, s, tc.cmd)
		out, _ := streams(t, r)
		if (r.ExitCode == 0) != tc.ok || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want ok=%v and %q:\n%s", name, r.ExitCode, tc.ok, tc.want, r.Text)
		}
	}
}

// TestNoNetwork: without ProxyAddr there is no proxy variable and no way out.
func TestNoNetwork(t *testing.T) {
	for _, tier := range tiers(t) {
		t.Run(tier, func(t *testing.T) {
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }))
			defer upstream.Close()
			s := newSandbox(t, Config{Allow: []string{"bash", "curl"}, tier: tier})
			r := bash(t, s, `env | grep -i proxy; curl -sS -m 5 `+upstream.URL)
			if r.ExitCode == 0 || strings.Contains(r.Text, "reached") || strings.Contains(strings.ToLower(r.Text), "proxy=") {
				t.Errorf("no-network sandbox reached out or has proxy variables:\n%s", r.Text)
			}
		})
	}
}
