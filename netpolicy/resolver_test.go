package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/capsulegate/capsulegate/errs"
)

// fakeDNS is an upstream DNS server on 127.0.0.1 (UDP and TCP on one port) answering from
// a script and counting the questions it gets.
type fakeDNS struct {
	addr   string
	script func(name string, qtype uint16, n int) reply

	mu    sync.Mutex
	asked map[string]int // "name/TYPE" → times asked
}

// reply is what fakeDNS answers to one question.
type reply struct {
	rrs         []string // records in zone-file form
	rcode       int
	drop        bool // answer nothing, as a dead server does
	truncateUDP bool // over UDP, answer empty with TC set
}

func (f *fakeDNS) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	qq := q.Question[0]
	name := strings.ToLower(qq.Name)
	f.mu.Lock()
	f.asked[name+"/"+dns.TypeToString[qq.Qtype]]++
	n := f.asked[name+"/"+dns.TypeToString[qq.Qtype]]
	f.mu.Unlock()
	rep := f.script(name, qq.Qtype, n)
	if rep.drop {
		return
	}
	m := new(dns.Msg)
	m.SetRcode(q, rep.rcode)
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp && rep.truncateUDP {
		m.Truncated = true
	} else {
		for _, s := range rep.rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				panic(err)
			}
			m.Answer = append(m.Answer, rr)
		}
	}
	w.WriteMsg(m)
}

// count returns how often name was asked for qtype.
func (f *fakeDNS) count(name string, qtype uint16) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[dns.Fqdn(name)+"/"+dns.TypeToString[qtype]]
}

// total returns every question asked.
func (f *fakeDNS) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.asked {
		n += c
	}
	return n
}

// zoneScript answers like a recursive server over a tiny zone: the records of the asked
// name and type, following CNAMEs; a name with no records is NXDOMAIN. extra records are
// added to every answer, as a poisoning server might.
func zoneScript(zone []string, extra ...string) func(string, uint16, int) reply {
	var rrs []dns.RR
	for _, s := range zone {
		rr, err := dns.NewRR(s)
		if err != nil {
			panic(err)
		}
		rrs = append(rrs, rr)
	}
	return func(name string, qtype uint16, _ int) reply {
		var out []string
		known := false
		for hops := 0; hops < 10; hops++ {
			next := ""
			for _, rr := range rrs {
				if !strings.EqualFold(rr.Header().Name, name) {
					continue
				}
				known = true
				if c, ok := rr.(*dns.CNAME); ok {
					next = c.Target
				}
				if rr.Header().Rrtype == qtype || rr.Header().Rrtype == dns.TypeCNAME {
					out = append(out, rr.String())
				}
			}
			if next == "" {
				break
			}
			name = next
		}
		if !known {
			return reply{rcode: dns.RcodeNameError}
		}
		return reply{rrs: append(out, extra...)}
	}
}

// aRecord answers an A question with addr and anything else with no records.
func aRecord(name string, qtype uint16, addr string) reply {
	if qtype != dns.TypeA {
		return reply{}
	}
	return reply{rrs: []string{name + " 60 IN A " + addr}}
}

// listenPair listens on UDP and TCP at the same 127.0.0.1 port.
func listenPair(t testing.TB) (net.PacketConn, net.Listener) {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		pc, err := net.ListenPacket("udp", l.Addr().String())
		if err == nil {
			return pc, l
		}
		l.Close()
	}
	t.Fatal("no port free for both UDP and TCP")
	return nil, nil
}

// startFakeDNS serves script until the test ends.
func startFakeDNS(t testing.TB, script func(string, uint16, int) reply) *fakeDNS {
	t.Helper()
	f := &fakeDNS{script: script, asked: map[string]int{}}
	pc, l := listenPair(t)
	f.addr = pc.LocalAddr().String()
	for _, s := range []*dns.Server{{PacketConn: pc, Handler: f}, {Listener: l, Handler: f}} {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		go s.ActivateAndServe()
		<-started
		t.Cleanup(func() { s.Shutdown() })
	}
	return f
}

// serveResolver serves r on UDP and TCP until the test ends and returns the address.
func serveResolver(t testing.TB, r *PinningResolver) string {
	t.Helper()
	pc, l := listenPair(t)
	stop, err := r.Serve(pc, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	return pc.LocalAddr().String()
}

// denials collects what OnDeny is told.
type denials struct {
	mu   sync.Mutex
	list []Denial
}

func (d *denials) add(x Denial) { d.mu.Lock(); d.list = append(d.list, x); d.mu.Unlock() }

func (d *denials) get() []Denial {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.list)
}

// newTestResolver builds a resolver over rules and upstream.
func newTestResolver(t testing.TB, rules []string, upstream string, d *denials) *PinningResolver {
	t.Helper()
	r, err := NewResolver(ResolverConfig{Rules: mustRules(t, rules...), Upstream: upstream, OnDeny: d.add})
	if err != nil {
		t.Fatal(err)
	}
	r.timeout = 2 * time.Second
	return r
}

// ask sends one question over network ("udp" or "tcp") and returns the answer.
func ask(t testing.TB, network, addr, name string, qtype uint16) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	c := &dns.Client{Net: network, Timeout: 10 * time.Second}
	in, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("%s %s %s: %v", network, name, dns.TypeToString[qtype], err)
	}
	return in
}

// addrsOf returns the A and AAAA data of an answer, checking owner names and TTLs.
func addrsOf(t testing.TB, m *dns.Msg) []string {
	t.Helper()
	var out []string
	for _, rr := range m.Answer {
		if rr.Header().Name != m.Question[0].Name {
			t.Errorf("answer owner %q, asked %q", rr.Header().Name, m.Question[0].Name)
		}
		if rr.Header().Ttl > pinTTL {
			t.Errorf("TTL %d, want at most %d", rr.Header().Ttl, pinTTL)
		}
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		default:
			t.Errorf("unexpected record %s", rr)
		}
	}
	return out
}

func TestResolverAnswers(t *testing.T) {
	const (
		public  = "93.184.216.34"
		public6 = "2606:2800:220:1:248:1893:25c8:1946"
	)
	tests := []struct {
		name     string
		rules    []string
		zone     []string
		extra    []string // added to every upstream answer
		truncate bool     // upstream truncates over UDP
		q        string
		qtype    uint16
		rcode    int
		want     []string
		denied   string // code told to OnDeny, "" for none
		upstream int    // questions upstream must have seen
	}{
		{name: "allowed name", rules: []string{"https://api.example.com"}, zone: []string{"api.example.com. 300 IN A " + public},
			q: "api.example.com", qtype: dns.TypeA, want: []string{public}, upstream: 2},
		{name: "name no rule names", rules: []string{"https://api.example.com"}, zone: []string{"evil.example.com. 300 IN A " + public},
			q: "evil.example.com", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeNotAllowed},
		{name: "metadata answer", rules: []string{"meta.example.com"}, zone: []string{"meta.example.com. 300 IN A 169.254.169.254"},
			q: "meta.example.com", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeRestricted, upstream: 2},
		{name: "ip rule does not admit a name resolving to it", rules: []string{"meta.example.com", "169.254.169.254"}, zone: []string{"meta.example.com. 300 IN A 169.254.169.254"},
			q: "meta.example.com", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeRestricted, upstream: 2},
		{name: "ip rule answers its own literal", rules: []string{"169.254.169.254"},
			q: "169.254.169.254", qtype: dns.TypeA, want: []string{"169.254.169.254"}},
		{name: "loopback answer with an ip rule for loopback", rules: []string{"http://api.test:8080", "127.0.0.1:8080"}, zone: []string{"api.test. 300 IN A 127.0.0.1"},
			q: "api.test", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeRestricted, upstream: 2},
		{name: "restricted addresses dropped from a mixed answer", rules: []string{"mixed.example.com"},
			zone: []string{"mixed.example.com. 300 IN A 10.0.0.1", "mixed.example.com. 300 IN A " + public, "mixed.example.com. 300 IN A 127.0.0.1"},
			q:    "mixed.example.com", qtype: dns.TypeA, want: []string{public}, upstream: 2},
		{name: "wildcard covers a deep subdomain", rules: []string{"*.cdn.example.net"}, zone: []string{"a.b.cdn.example.net. 300 IN A " + public},
			q: "a.b.cdn.example.net", qtype: dns.TypeA, want: []string{public}, upstream: 2},
		{name: "wildcard does not cover its apex", rules: []string{"*.cdn.example.net"}, zone: []string{"cdn.example.net. 300 IN A " + public},
			q: "cdn.example.net", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeNotAllowed},
		{name: "case and trailing dot", rules: []string{"api.example.com:443"}, zone: []string{"api.example.com. 300 IN A " + public},
			q: "API.Example.COM.", qtype: dns.TypeA, want: []string{public}, upstream: 2},
		{name: "AAAA", rules: []string{"api.example.com"}, zone: []string{"api.example.com. 300 IN AAAA " + public6, "api.example.com. 300 IN A " + public},
			q: "api.example.com", qtype: dns.TypeAAAA, want: []string{public6}, upstream: 2},
		{name: "AAAA of a name with IPv4 only", rules: []string{"api.example.com"}, zone: []string{"api.example.com. 300 IN A " + public},
			q: "api.example.com", qtype: dns.TypeAAAA, upstream: 2},
		{name: "other types answered empty without upstream", rules: []string{"api.example.com"}, zone: []string{"api.example.com. 300 IN MX 10 mail.example.com."},
			q: "api.example.com", qtype: dns.TypeMX},
		{name: "TXT of a name no rule names", rules: []string{"api.example.com"},
			q: "secret.example.com", qtype: dns.TypeTXT, rcode: dns.RcodeRefused, denied: CodeNotAllowed},
		{name: "CNAME chain to its final address", rules: []string{"www.example.org"},
			zone:  []string{"www.example.org. 300 IN CNAME edge.cdn.example.net.", "edge.cdn.example.net. 300 IN CNAME e1.cdn.example.net.", "e1.cdn.example.net. 300 IN A " + public},
			extra: []string{"unrelated.example.org. 300 IN A 93.184.216.99", "www.example.org. 300 IN AAAA " + public6},
			q:     "www.example.org", qtype: dns.TypeA, want: []string{public}, upstream: 2},
		{name: "CNAME chain ending at a private address", rules: []string{"www.example.org"},
			zone: []string{"www.example.org. 300 IN CNAME internal.example.org.", "internal.example.org. 300 IN A 192.168.1.1"},
			q:    "www.example.org", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeRestricted, upstream: 2},
		{name: "localhost answered locally", rules: []string{"localhost:3000"},
			q: "localhost", qtype: dns.TypeA, want: []string{"127.0.0.1"}},
		{name: "localhost AAAA answered locally", rules: []string{"http://localhost:3000"},
			q: "LocalHost.", qtype: dns.TypeAAAA, want: []string{"::1"}},
		{name: "localhost without a rule", rules: []string{"api.example.com"},
			q: "localhost", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeNotAllowed},
		{name: "a name under localhost is loopback, which its rule does not permit", rules: []string{"dev.localhost"},
			q: "dev.localhost", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeRestricted},
		{name: "NXDOMAIN passed on", rules: []string{"gone.example.com"},
			q: "gone.example.com", qtype: dns.TypeA, rcode: dns.RcodeNameError, upstream: 2},
		{name: "truncated UDP answer retried over TCP", rules: []string{"big.example.com"}, zone: []string{"big.example.com. 300 IN A " + public}, truncate: true,
			q: "big.example.com", qtype: dns.TypeA, want: []string{public}, upstream: 4},
		{name: "name that is no host name", rules: []string{"api.example.com"},
			q: "_svc._tcp.example.com", qtype: dns.TypeA, rcode: dns.RcodeRefused, denied: CodeHost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := zoneScript(tt.zone, tt.extra...)
			if tt.truncate {
				inner := script
				script = func(name string, qtype uint16, n int) reply {
					rep := inner(name, qtype, n)
					rep.truncateUDP = true
					return rep
				}
			}
			up := startFakeDNS(t, script)
			var d denials
			r := newTestResolver(t, tt.rules, up.addr, &d)
			addr := serveResolver(t, r)
			// Over UDP, then TCP: the second answer comes from the pin.
			for i, network := range []string{"udp", "tcp"} {
				in := ask(t, network, addr, tt.q, tt.qtype)
				if in.Rcode != tt.rcode {
					t.Fatalf("%s: rcode %s, want %s", network, dns.RcodeToString[in.Rcode], dns.RcodeToString[tt.rcode])
				}
				if got := addrsOf(t, in); !slices.Equal(got, tt.want) {
					t.Errorf("%s: answer %v, want %v", network, got, tt.want)
				}
				dl := d.get()
				if tt.denied == "" {
					if len(dl) != 0 {
						t.Errorf("%s: unexpected denials %v", network, dl)
					}
				} else {
					if len(dl) != i+1 {
						t.Fatalf("%s: %d denials, want %d", network, len(dl), i+1)
					}
					x := dl[i]
					if x.Source != SourceDNS || x.Port != 0 || errs.Code(x.Err) != tt.denied {
						t.Errorf("%s: denial %+v, want source dns and code %s", network, x, tt.denied)
					}
					var e *errs.Error
					if !errors.As(x.Err, &e) || e.Fix == "" {
						t.Errorf("%s: denial error %v is not an *errs.Error with a fix", network, x.Err)
					}
				}
			}
			if got := up.total(); got != tt.upstream {
				t.Errorf("upstream asked %d questions, want %d", got, tt.upstream)
			}
		})
	}
}

func TestResolverPinsAgainstRebinding(t *testing.T) {
	tests := []struct {
		name   string
		first  string // upstream's first answer
		later  string // every later answer
		want   []string
		rcode  int
		denied string
	}{
		{name: "public then loopback keeps the public answer", first: "93.184.216.34", later: "127.0.0.1", want: []string{"93.184.216.34"}},
		{name: "public then metadata keeps the public answer", first: "93.184.216.34", later: "169.254.169.254", want: []string{"93.184.216.34"}},
		{name: "loopback then public stays refused", first: "127.0.0.1", later: "93.184.216.34", rcode: dns.RcodeRefused, denied: CodeRestricted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startFakeDNS(t, func(name string, qtype uint16, n int) reply {
				if qtype != dns.TypeA {
					return reply{}
				}
				a := tt.later
				if n == 1 {
					a = tt.first
				}
				return reply{rrs: []string{name + " 0 IN A " + a}}
			})
			var d denials
			r := newTestResolver(t, []string{"https://rebind.example.com"}, up.addr, &d)
			addr := serveResolver(t, r)
			const rounds = 6
			for i := range rounds {
				in := ask(t, []string{"udp", "tcp"}[i%2], addr, "rebind.example.com", dns.TypeA)
				if in.Rcode != tt.rcode {
					t.Fatalf("round %d: rcode %s", i, dns.RcodeToString[in.Rcode])
				}
				if got := addrsOf(t, in); !slices.Equal(got, tt.want) {
					t.Fatalf("round %d: answer %v, want %v", i, got, tt.want)
				}
			}
			got, err := r.LookupNetIP(context.Background(), "ip", "rebind.example.com")
			if tt.denied == "" {
				if err != nil || len(got) != 1 || got[0].String() != tt.want[0] {
					t.Errorf("LookupNetIP = %v, %v; want the pinned %v", got, err, tt.want)
				}
			} else if errs.Code(err) != tt.denied {
				t.Errorf("LookupNetIP error %v, want %s", err, tt.denied)
			}
			if n := up.count("rebind.example.com", dns.TypeA); n != 1 {
				t.Errorf("upstream asked %d times for A, want once per session", n)
			}
			if want := map[bool]int{true: 0, false: rounds}[tt.denied == ""]; len(d.get()) != want {
				t.Errorf("%d denials, want %d", len(d.get()), want)
			}
		})
	}
}

func TestResolverUpstreamFailure(t *testing.T) {
	// A port nothing listens on: the kernel answers "port unreachable".
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.LocalAddr().String()
	closed.Close()
	// A socket nobody reads: queries vanish.
	hole, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close()

	servfail := startFakeDNS(t, func(string, uint16, int) reply { return reply{rcode: dns.RcodeServerFailure} })
	for _, tc := range []struct{ name, upstream string }{
		{"nothing listening", closedAddr},
		{"no answer", hole.LocalAddr().String()},
		{"upstream SERVFAIL", servfail.addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d denials
			r, err := NewResolver(ResolverConfig{Rules: mustRules(t, "api.example.com"), Upstream: tc.upstream, OnDeny: d.add})
			if err != nil {
				t.Fatal(err)
			}
			r.timeout = 300 * time.Millisecond
			addr := serveResolver(t, r)
			start := time.Now()
			in := ask(t, "udp", addr, "api.example.com", dns.TypeA)
			if in.Rcode != dns.RcodeServerFailure {
				t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[in.Rcode])
			}
			if el := time.Since(start); el > 5*time.Second {
				t.Errorf("SERVFAIL took %s", el)
			}
			_, err = r.LookupNetIP(context.Background(), "ip", "api.example.com")
			if errs.Code(err) != CodeUpstreamDNS {
				t.Errorf("LookupNetIP error %v, want %s", err, CodeUpstreamDNS)
			}
			if len(d.get()) != 0 {
				t.Errorf("an upstream failure is no refusal, got denials %v", d.get())
			}
		})
	}

	t.Run("failure is not pinned", func(t *testing.T) {
		up := startFakeDNS(t, func(name string, qtype uint16, n int) reply {
			if n == 1 {
				return reply{drop: true}
			}
			if qtype != dns.TypeA {
				return reply{}
			}
			return reply{rrs: []string{name + " 60 IN A 93.184.216.34"}}
		})
		r, err := NewResolver(ResolverConfig{Rules: mustRules(t, "api.example.com"), Upstream: up.addr})
		if err != nil {
			t.Fatal(err)
		}
		r.timeout = 300 * time.Millisecond
		addr := serveResolver(t, r)
		if in := ask(t, "udp", addr, "api.example.com", dns.TypeA); in.Rcode != dns.RcodeServerFailure {
			t.Fatalf("first: rcode %s, want SERVFAIL", dns.RcodeToString[in.Rcode])
		}
		in := ask(t, "udp", addr, "api.example.com", dns.TypeA)
		if got := addrsOf(t, in); in.Rcode != dns.RcodeSuccess || !slices.Equal(got, []string{"93.184.216.34"}) {
			t.Fatalf("second: %s %v", dns.RcodeToString[in.Rcode], got)
		}
	})
}

func TestResolverCoalesces(t *testing.T) {
	gate := make(chan struct{})
	first := make(chan struct{})
	var once sync.Once
	up := startFakeDNS(t, func(name string, qtype uint16, n int) reply {
		if qtype == dns.TypeA {
			once.Do(func() { close(first) })
			<-gate
		}
		return aRecord(name, qtype, "93.184.216.34")
	})
	r := newTestResolver(t, []string{"api.example.com"}, up.addr, &denials{})
	addr := serveResolver(t, r)

	const n = 16
	var wg sync.WaitGroup
	results := make(chan string, 2*n+1)
	lookup := func() {
		got, err := r.LookupNetIP(context.Background(), "ip4", "API.example.com.")
		if err != nil {
			results <- err.Error()
			return
		}
		results <- got[0].String()
	}
	wg.Go(lookup)
	<-first // the pin now exists and its upstream exchange is held at the gate
	for i := range n {
		wg.Go(lookup)
		wg.Go(func() {
			m := new(dns.Msg)
			m.SetQuestion("api.example.com.", dns.TypeA)
			in, _, err := (&dns.Client{Net: []string{"udp", "tcp"}[i%2], Timeout: 10 * time.Second}).Exchange(m, addr)
			switch {
			case err != nil:
				results <- err.Error()
			case len(in.Answer) != 1:
				results <- in.String()
			default:
				results <- in.Answer[0].(*dns.A).A.String()
			}
		})
	}
	close(gate)
	wg.Wait()
	close(results)
	for got := range results {
		if got != "93.184.216.34" {
			t.Errorf("a concurrent lookup got %q", got)
		}
	}
	if c := up.count("api.example.com", dns.TypeA); c != 1 {
		t.Errorf("upstream asked %d times, want 1", c)
	}
}

// TestResolverHammer resolves many names from many goroutines released together.
func TestResolverHammer(t *testing.T) {
	up := startFakeDNS(t, func(name string, qtype uint16, n int) reply { return aRecord(name, qtype, "93.184.216.34") })
	r := newTestResolver(t, []string{"*.svc.example.com"}, up.addr, &denials{})
	const names, workers = 32, 8
	start := make(chan struct{})
	var wg sync.WaitGroup
	var failures sync.Map
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range names {
				host := fmt.Sprintf("h%d.svc.example.com", (i+w)%names)
				if _, err := r.LookupNetIP(context.Background(), "ip", host); err != nil {
					failures.Store(host, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	failures.Range(func(k, v any) bool { t.Errorf("%s: %v", k, v); return true })
	if got := up.total(); got != 2*names {
		t.Errorf("upstream asked %d questions for %d names, want %d", got, names, 2*names)
	}
}

func TestLookupNetIP(t *testing.T) {
	up := startFakeDNS(t, zoneScript([]string{
		"dual.example.com. 60 IN A 93.184.216.34",
		"dual.example.com. 60 IN AAAA 2606:2800:220:1:248:1893:25c8:1946",
		"meta.example.com. 60 IN A 169.254.169.254",
	}))
	var d denials
	r := newTestResolver(t, []string{"dual.example.com", "meta.example.com", "gone.example.com", "localhost", "[2001:4860:4860::8888]"}, up.addr, &d)
	tests := []struct {
		network, host string
		want          []string
		code          string
		notFound      bool
	}{
		{"ip", "dual.example.com", []string{"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"}, "", false},
		{"ip4", "DUAL.example.com.", []string{"93.184.216.34"}, "", false},
		{"ip6", "dual.example.com", []string{"2606:2800:220:1:248:1893:25c8:1946"}, "", false},
		{"ip", "localhost", []string{"127.0.0.1", "::1"}, "", false},
		{"ip", "[2001:4860:4860::8888]", []string{"2001:4860:4860::8888"}, "", false},
		{"ip", "meta.example.com", nil, CodeRestricted, false},
		{"ip", "other.example.com", nil, CodeNotAllowed, false},
		{"ip", "gone.example.com", nil, "", true},
		{"ip", "bad host", nil, CodeHost, false},
	}
	for _, tt := range tests {
		t.Run(tt.network+"/"+tt.host, func(t *testing.T) {
			got, err := r.LookupNetIP(context.Background(), tt.network, tt.host)
			var dnsErr *net.DNSError
			switch {
			case tt.notFound:
				if !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
					t.Fatalf("error %v, want not found", err)
				}
			case tt.code != "":
				if errs.Code(err) != tt.code {
					t.Fatalf("error %v, want %s", err, tt.code)
				}
			case err != nil:
				t.Fatal(err)
			}
			var s []string
			for _, a := range got {
				s = append(s, a.String())
			}
			if !slices.Equal(s, tt.want) {
				t.Errorf("got %v, want %v", s, tt.want)
			}
		})
	}
	if len(d.get()) != 0 {
		t.Errorf("LookupNetIP reported denials itself: %v", d.get())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.LookupNetIP(ctx, "ip", "new.example.com"); errs.Code(err) != CodeNotAllowed {
		t.Errorf("refusal must not need the context: %v", err)
	}
}

func TestResolverTooManyNames(t *testing.T) {
	defer func(n int) { maxPins = n }(maxPins)
	maxPins = 3
	up := startFakeDNS(t, func(name string, qtype uint16, n int) reply { return aRecord(name, qtype, "93.184.216.34") })
	var d denials
	r := newTestResolver(t, []string{"*.svc.example.com"}, up.addr, &d)
	addr := serveResolver(t, r)
	for i, host := range []string{"a", "b", "c", "a", "d"} {
		in := ask(t, "udp", addr, host+".svc.example.com", dns.TypeA)
		want := dns.RcodeSuccess
		if i == 4 {
			want = dns.RcodeRefused
		}
		if in.Rcode != want {
			t.Errorf("%s: rcode %s, want %s", host, dns.RcodeToString[in.Rcode], dns.RcodeToString[want])
		}
	}
	if dl := d.get(); len(dl) != 1 || errs.Code(dl[0].Err) != CodeTooManyNames {
		t.Errorf("denials %v, want one %s", dl, CodeTooManyNames)
	}
}

func TestResolverMalformedQueries(t *testing.T) {
	r := newTestResolver(t, []string{"api.example.com"}, "127.0.0.1:1", &denials{})
	addr := serveResolver(t, r)
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}

	two := new(dns.Msg)
	two.SetQuestion("api.example.com.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "b.example.com.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	notify := new(dns.Msg)
	notify.SetNotify("example.com.")
	chaos := new(dns.Msg)
	chaos.SetQuestion("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	for _, tc := range []struct {
		name  string
		m     *dns.Msg
		rcode int
	}{
		{"two questions", two, dns.RcodeFormatError},
		{"notify opcode", notify, dns.RcodeNotImplemented},
		{"chaos class", chaos, dns.RcodeNotImplemented},
	} {
		in, _, err := c.Exchange(tc.m, addr)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if in.Rcode != tc.rcode {
			t.Errorf("%s: rcode %s, want %s", tc.name, dns.RcodeToString[in.Rcode], dns.RcodeToString[tc.rcode])
		}
	}
}

func TestNewResolverRefusesBadConfig(t *testing.T) {
	for _, cfg := range []ResolverConfig{
		{Upstream: "8.8.8.8"},
		{Upstream: ":53"},
		{Upstream: "8.8.8.8:0"},
		{Upstream: "8.8.8.8:dns"},
	} {
		if _, err := NewResolver(cfg); errs.Code(err) != CodeConfig {
			t.Errorf("%+v: error %v, want %s", cfg, err, CodeConfig)
		}
	}
	r, err := NewResolver(ResolverConfig{Upstream: "[::1]:53"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Serve(nil, nil); errs.Code(err) != CodeConfig {
		t.Errorf("Serve(nil, nil): %v, want %s", err, CodeConfig)
	}
}

// TestDialerThroughPinningResolver shows the recipe for tests of later parts: an
// allowlisted localhost rule reaches a local server through the pinned resolver.
func TestDialerThroughPinningResolver(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	r := newTestResolver(t, []string{"localhost:" + strconv.Itoa(port)}, "127.0.0.1:1", &denials{})
	d := &Dialer{Rules: r.rules, Resolver: r}
	c, err := d.DialContext(context.Background(), "tcp", "localhost:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RemoteAddr().(*net.TCPAddr).AddrPort().Addr(); got != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("dialed %s", got)
	}
	c.Close()
}
