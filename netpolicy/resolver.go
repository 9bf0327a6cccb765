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
	"time"

	"github.com/miekg/dns"

	"github.com/capsulegate/capsulegate/errs"
)

// Sources of a Denial, the values of the metrics label "source".
const (
	SourceProxy = "proxy"
	SourceDNS   = "dns"
)

// Denial is one refusal by the proxy or the resolver, reported for metrics and traces.
type Denial struct {
	Source string // SourceProxy or SourceDNS
	Host   string // the host asked for, canonical when it could be canonicalised
	Port   int    // the port asked for; 0 for a DNS query
	Err    error  // the refusal, an *errs.Error carrying its code
}

// Resolver limits: the TTL of every answer, the longest CNAME chain followed, the addresses
// kept per name.
const (
	pinTTL         = 10
	maxChain       = 16
	maxAddrs       = 32
	defaultTimeout = 5 * time.Second // per upstream exchange
	ednsSize       = 1232            // the DNS flag day 2020 size: no IP fragmentation
)

// maxPins bounds the distinct names one session may pin: wildcard rules admit unboundedly
// many names, and each costs upstream queries and memory. A variable so a test can lower it.
var maxPins = 4096

// ResolverConfig configures a session's DNS-pinning resolver.
type ResolverConfig struct {
	Rules    Rules        // the capsule's capabilities.network.allow
	Upstream string       // "host:port" of the upstream DNS server; "" = the first nameserver of /etc/resolv.conf
	OnDeny   func(Denial) // told of every refused DNS query (Port 0); must be safe for concurrent use
}

// PinningResolver answers DNS for one session (docs/sandbox.md "Network"): only names
// some rule names, each resolved upstream (A and AAAA) once, the first time anyone asks
// over DNS or through LookupNetIP, with concurrent first lookups sharing one exchange.
// The answer is then fixed for the session, so a server that later answers differently
// (DNS rebinding) is never heard. Addresses the matching rule does not permit
// (Rule.PermitsAddr) are dropped, and a name left with none is refused. Upstream failures
// are not pinned. "localhost" and names under it are answered with 127.0.0.1 and ::1, and
// an IP literal with itself, without asking upstream; both still need a rule naming them.
//
// Local test servers: loopback is reachable through a name only when the name is
// localhost, so a test needing "an allowlisted host served by a local server" allows
// "localhost:PORT" (or "http://localhost:PORT") and requests http://localhost:PORT/. An
// upstream answering 127.0.0.1 for api.test is refused (E-NET-017) even beside a rule
// naming 127.0.0.1: that is the rebinding defence. httptest.NewTLSServer's certificate
// names 127.0.0.1, ::1 and example.com, so an https test sets tls.Config.ServerName to
// "example.com" with the localhost rule, or allows "127.0.0.1:PORT" and connects by address.
type PinningResolver struct {
	rules    Rules
	upstream string
	timeout  time.Duration // per upstream exchange: defaultTimeout, lowered by tests
	onDeny   func(Denial)

	mu   sync.Mutex
	pins map[string]*pin // by canonical name
}

// pin is the session's answer for one name; ready is closed once the rest is set.
type pin struct {
	ready    chan struct{}
	addrs    []netip.Addr // permitted addresses, IPv4 first
	nxdomain bool         // upstream said the name does not exist
	err      error        // a refusal (pinned) or an upstream failure (forgotten)
}

// NewResolver returns a pinning resolver for one session.
func NewResolver(cfg ResolverConfig) (*PinningResolver, error) {
	r := &PinningResolver{rules: cfg.Rules, upstream: cfg.Upstream, timeout: defaultTimeout, onDeny: cfg.OnDeny, pins: map[string]*pin{}}
	if r.upstream == "" {
		conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err != nil || len(conf.Servers) == 0 {
			return nil, errs.Wrap(err, CodeConfig, Part, "resolver: no upstream DNS server given and none found in /etc/resolv.conf", "set the upstream DNS server as host:port")
		}
		r.upstream = net.JoinHostPort(conf.Servers[0], conf.Port)
	}
	host, port, err := net.SplitHostPort(r.upstream)
	if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
		return nil, errs.Wrap(err, CodeConfig, Part, fmt.Sprintf("resolver: upstream %q is not host:port", short(r.upstream)), "write the upstream DNS server as host:port, e.g. 192.0.2.53:53")
	}
	return r, nil
}

// LookupNetIP returns the pinned, permitted addresses of host for network "ip", "ip4" or
// "ip6"; it implements Resolver, so a Dialer using it dials what the subprocess's DNS
// answers. Refusals are returned, not reported to OnDeny: the caller reports them.
func (r *PinningResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	name, ip, err := CanonicalHost(host)
	if err != nil {
		return nil, err
	}
	rule, ok := r.rules.MatchHost(name)
	if !ok {
		return nil, notNamed(name)
	}
	addrs, nx, err := r.answer(ctx, name, ip, rule)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if network == "ip" || network == "ip4" && a.Is4() || network == "ip6" && a.Is6() {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		e := &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		if !nx {
			e.Err = "no " + network + " address"
		}
		return nil, e
	}
	return out, nil
}

// ServeDNS answers one query; it implements dns.Handler.
func (r *PinningResolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	m := r.reply(q)
	size := dns.MaxMsgSize
	if _, udp := w.LocalAddr().(*net.UDPAddr); udp {
		size = dns.MinMsgSize
		if opt := q.IsEdns0(); opt != nil {
			size = int(min(opt.UDPSize(), ednsSize))
		}
	}
	m.Truncate(size)
	_ = w.WriteMsg(m) // a client that went away needs no answer
}

// reply builds the answer to q.
func (r *PinningResolver) reply(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	if q.IsEdns0() != nil {
		m.SetEdns0(ednsSize, false)
	}
	switch {
	case q.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
		return m
	case len(q.Question) != 1:
		m.Rcode = dns.RcodeFormatError
		return m
	case q.Question[0].Qclass != dns.ClassINET:
		m.Rcode = dns.RcodeNotImplemented
		return m
	}
	qq := q.Question[0]
	asked := strings.TrimSuffix(qq.Name, ".")
	name, ip, err := CanonicalHost(asked)
	if err != nil {
		r.deny(short(asked), err)
		m.Rcode = dns.RcodeRefused
		return m
	}
	rule, ok := r.rules.MatchHost(name)
	if !ok {
		r.deny(name, notNamed(name))
		m.Rcode = dns.RcodeRefused
		return m
	}
	if qq.Qtype != dns.TypeA && qq.Qtype != dns.TypeAAAA {
		// Other types (MX, TXT, HTTPS, CNAME, ANY…) would only leak what upstream knows.
		return m
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*r.timeout)
	defer cancel()
	addrs, nx, err := r.answer(ctx, name, ip, rule)
	switch {
	case err != nil && (errs.Code(err) == CodeUpstreamDNS || errs.Code(err) == ""):
		// Upstream trouble or our own deadline: the client may retry; nothing was refused.
		m.Rcode = dns.RcodeServerFailure
		return m
	case err != nil:
		r.deny(name, err)
		m.Rcode = dns.RcodeRefused
		return m
	case nx:
		m.Rcode = dns.RcodeNameError
		return m
	}
	for _, a := range addrs {
		hdr := dns.RR_Header{Name: qq.Name, Rrtype: qq.Qtype, Class: dns.ClassINET, Ttl: pinTTL}
		switch {
		case qq.Qtype == dns.TypeA && a.Is4():
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		case qq.Qtype == dns.TypeAAAA && a.Is6():
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return m
}

// Serve answers DNS on pc (UDP) and l (TCP), either of which may be nil, until stop is
// called; stop closes both and waits for the servers to end.
func (r *PinningResolver) Serve(pc net.PacketConn, l net.Listener) (stop func() error, err error) {
	var servers []*dns.Server
	if pc != nil {
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: r, UDPSize: ednsSize})
	}
	if l != nil {
		servers = append(servers, &dns.Server{Listener: l, Handler: r})
	}
	if len(servers) == 0 {
		return nil, errs.New(CodeConfig, Part, "resolver: Serve was given neither a packet connection nor a listener", "pass a UDP packet connection, a TCP listener, or both")
	}
	var running []*dns.Server
	var done []chan error
	shutdown := func() error {
		var all []error
		for i, s := range running {
			all = append(all, s.Shutdown(), <-done[i])
		}
		return errors.Join(all...)
	}
	for _, s := range servers {
		started, ended := make(chan struct{}), make(chan error, 1)
		s.NotifyStartedFunc = func() { close(started) }
		go func() { ended <- s.ActivateAndServe() }()
		select {
		case <-started:
			running, done = append(running, s), append(done, ended)
		case err := <-ended:
			return nil, errors.Join(fmt.Errorf("netpolicy: resolver: serve: %w", err), shutdown())
		}
	}
	return sync.OnceValue(shutdown), nil
}

// answer returns name's permitted addresses: from the pin, or for localhost and IP
// literals without asking upstream.
func (r *PinningResolver) answer(ctx context.Context, name string, ip netip.Addr, rule Rule) (addrs []netip.Addr, nxdomain bool, err error) {
	switch {
	case ip.IsValid():
		addrs, err = permit(rule, name, []netip.Addr{ip})
		return addrs, false, err
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		// RFC 6761: localhost names never leave the host.
		addrs, err = permit(rule, name, []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()})
		return addrs, false, err
	}
	p, err := r.pinned(ctx, name, rule)
	if err != nil {
		return nil, false, err
	}
	return p.addrs, p.nxdomain, p.err
}

// pinned returns name's pin, resolving it upstream if nobody has yet; waiters share the
// first lookup, which runs detached so one caller's cancellation does not fail the rest.
func (r *PinningResolver) pinned(ctx context.Context, name string, rule Rule) (*pin, error) {
	r.mu.Lock()
	p, ok := r.pins[name]
	if !ok {
		if len(r.pins) >= maxPins {
			r.mu.Unlock()
			return nil, errs.New(CodeTooManyNames, Part,
				fmt.Sprintf("resolver: DNS name %q: the session already resolved %d names, the most one session may", name, maxPins),
				"narrow the wildcard rules in capabilities.network.allow, or split the work over sessions")
		}
		p = &pin{ready: make(chan struct{})}
		r.pins[name] = p
		go r.resolve(name, rule, p)
	}
	r.mu.Unlock()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.err != nil && errs.Code(p.err) == CodeUpstreamDNS {
		return nil, p.err
	}
	return p, nil
}

// resolve asks upstream for name's A and AAAA records and fills p. A name is pinned when
// at least one of the two exchanges answered (some servers fail AAAA); when both failed,
// the pin is forgotten so the next query tries again.
func (r *PinningResolver) resolve(name string, rule Rule, p *pin) {
	defer close(p.ready)
	type result struct {
		addrs []netip.Addr
		nx    bool
		err   error
	}
	var v4, v6 result
	var wg sync.WaitGroup
	wg.Go(func() { v4.addrs, v4.nx, v4.err = r.exchange(name, dns.TypeA) })
	v6.addrs, v6.nx, v6.err = r.exchange(name, dns.TypeAAAA)
	wg.Wait()
	if v4.err != nil && v6.err != nil {
		p.err = errs.Wrap(errors.Join(v4.err, v6.err), CodeUpstreamDNS, Part,
			fmt.Sprintf("resolver: DNS name %q: the upstream server %s did not answer", name, r.upstream),
			"check that the upstream DNS server is reachable from the gateway; the next lookup tries again")
		r.mu.Lock()
		delete(r.pins, name)
		r.mu.Unlock()
		return
	}
	found := append(v4.addrs, v6.addrs...)
	p.nxdomain = len(found) == 0 && (v4.nx || v6.nx)
	p.addrs, p.err = permit(rule, name, found)
}

// exchange asks upstream one question, over UDP and again over TCP if the answer was
// truncated, and returns the addresses at the end of the asked name's CNAME chain.
func (r *PinningResolver) exchange(name string, qtype uint16) ([]netip.Addr, bool, error) {
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	q.SetEdns0(ednsSize, false)
	ctx, cancel := context.WithTimeout(context.Background(), r.timeout)
	defer cancel()
	c := &dns.Client{Net: "udp", Timeout: r.timeout}
	in, _, err := c.ExchangeContext(ctx, q, r.upstream)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.ExchangeContext(ctx, q, r.upstream)
	}
	if err != nil {
		return nil, false, err
	}
	if len(in.Question) != 1 || in.Question[0].Qtype != qtype || !strings.EqualFold(in.Question[0].Name, q.Question[0].Name) {
		return nil, false, fmt.Errorf("the answer is for another question")
	}
	switch in.Rcode {
	case dns.RcodeSuccess:
		return chase(in.Answer, q.Question[0].Name, qtype), false, nil
	case dns.RcodeNameError:
		return nil, true, nil
	}
	return nil, false, fmt.Errorf("upstream answered %s", dns.RcodeToString[in.Rcode])
}

// chase follows the CNAME chain from name through answer and returns the addresses of
// type qtype owned by its last name; records about any other name are ignored, so an
// upstream cannot slip in addresses for names nobody asked about.
func chase(answer []dns.RR, name string, qtype uint16) []netip.Addr {
	owner := strings.ToLower(name)
	seen := map[string]bool{owner: true}
	for range maxChain {
		next := ""
		for _, rr := range answer {
			if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, owner) {
				next = strings.ToLower(c.Target)
				break
			}
		}
		if next == "" || seen[next] {
			break
		}
		seen[next], owner = true, next
	}
	var out []netip.Addr
	for _, rr := range answer {
		if !strings.EqualFold(rr.Header().Name, owner) {
			continue
		}
		var raw net.IP
		switch v := rr.(type) {
		case *dns.A:
			raw = v.A
		case *dns.AAAA:
			raw = v.AAAA
		}
		if rr.Header().Rrtype != qtype || raw == nil {
			continue
		}
		if a, ok := netip.AddrFromSlice(raw); ok {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// permit keeps the addresses rule permits, IPv4 first, without duplicates; when it keeps
// none of a non-empty answer, the name is refused.
func permit(rule Rule, name string, found []netip.Addr) ([]netip.Addr, error) {
	var kept []netip.Addr
	var refused netip.Addr
	for _, a := range found {
		a = a.Unmap()
		switch {
		case !rule.PermitsAddr(a):
			if !refused.IsValid() {
				refused = a
			}
		case !slices.Contains(kept, a) && len(kept) < maxAddrs:
			kept = append(kept, a)
		}
	}
	slices.SortStableFunc(kept, func(a, b netip.Addr) int { return a.BitLen() - b.BitLen() })
	if len(kept) > 0 || !refused.IsValid() {
		return kept, nil
	}
	what := "an address it does not name"
	if reason, restricted := Restricted(refused); restricted {
		what = article(reason) + " " + reason + " address"
	} else if rule.Host == "localhost" {
		what = "not a loopback address"
	}
	return nil, errs.New(CodeRestricted, Part,
		fmt.Sprintf("network policy: DNS name %q resolves to %s, %s, which rule %q does not permit", name, refused, what, rule.String()),
		"point the name at a public address, or allow the address itself as an IP rule and connect to it by address; a localhost rule reaches loopback only")
}

// notNamed is the refusal of a name no rule names.
func notNamed(name string) error {
	return errs.New(CodeNotAllowed, Part,
		fmt.Sprintf("network policy: DNS name %q is not in capabilities.network.allow", name),
		fmt.Sprintf("if the capsule should reach it, add %q to capabilities.network.allow", name))
}

// deny tells OnDeny of a refused query.
func (r *PinningResolver) deny(host string, err error) {
	if r.onDeny != nil {
		r.onDeny(Denial{Source: SourceDNS, Host: host, Err: err})
	}
}

var (
	_ dns.Handler = (*PinningResolver)(nil)
	_ Resolver    = (*PinningResolver)(nil)
)
