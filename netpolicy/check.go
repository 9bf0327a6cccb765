package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
)

// Check decides whether a connection may go to host:port for scheme ("" when unknown, as in
// a CONNECT tunnel, 0 port meaning the scheme's default) at the resolved addrs, returning
// the rule that allows it or a refusal; with no addrs it judges the name alone, and the
// caller must check the addresses once resolved (again with Check, or Rule.PermitsAddr).
func (rs Rules) Check(scheme, host string, port int, addrs []netip.Addr) (Rule, error) {
	name, ip, p := canonicalHost(host)
	if p != nil {
		return Rule{}, p.at(fmt.Sprintf("network policy: host %q", short(host)))
	}
	nscheme, nport, ok := normalizeRequest(scheme, port)
	if !ok {
		if nscheme == "" && scheme != "" {
			return Rule{}, errs.New(CodeScheme, Part, fmt.Sprintf("network policy: scheme %q is not supported (only http and https)", short(scheme)), "reach the host over http or https")
		}
		return Rule{}, errs.New(CodePort, Part, fmt.Sprintf("network policy: port %d is not in 1–65535", port), "connect to a port in 1–65535")
	}
	if ip.IsValid() {
		addrs = append([]netip.Addr{ip}, addrs...)
	}
	target := net.JoinHostPort(name, strconv.Itoa(nport))

	var (
		first   Rule
		refused netip.Addr
		matched bool
	)
	for i := range rs {
		r := &rs[i]
		if !r.matches(nscheme, name, ip, nport) {
			continue
		}
		a, bad := firstRefused(r, addrs)
		if !bad {
			return *r, nil
		}
		if !matched {
			first, refused, matched = *r, a, true
		}
	}
	if !matched {
		return Rule{}, errs.New(CodeNotAllowed, Part,
			fmt.Sprintf("network policy: %s not in capabilities.network.allow", target),
			fmt.Sprintf("if the capsule should reach it, add %q to capabilities.network.allow", suggest(nscheme, name, ip, nport)))
	}
	what := "an address it does not name"
	if reason, restricted := Restricted(refused); restricted {
		what = article(reason) + " " + reason + " address"
	} else if first.Host == "localhost" {
		what = "not a loopback address"
	}
	return Rule{}, errs.New(CodeRestricted, Part,
		fmt.Sprintf("network policy: %s resolves to %s, %s, which rule %q does not permit", target, refused, what, first.String()),
		"point the name at a public address, or allow the address itself as an IP rule and connect to it by address; a localhost rule reaches loopback only")
}

// firstRefused returns the first of addrs r does not permit.
func firstRefused(r *Rule, addrs []netip.Addr) (netip.Addr, bool) {
	for _, a := range addrs {
		if !r.PermitsAddr(a) {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// suggest returns the narrowest rule that would allow a request.
func suggest(scheme, name string, ip netip.Addr, port int) string {
	r := Rule{Scheme: scheme, Host: name, IP: ip, Port: port}
	return r.String()
}

// article returns "an" before a vowel, else "a".
func article(word string) string {
	if word != "" && strings.IndexByte("aeiou", word[0]) >= 0 {
		return "an"
	}
	return "a"
}

// CheckURL checks an absolute http or https URL against the rules: its scheme, host and
// port (the scheme's default when it names none), as the dialer will.
func (rs Rules) CheckURL(u *url.URL) error {
	port := defaultPort(u.Scheme)
	if p := u.Port(); p != "" {
		port, _ = strconv.Atoi(p) // url.Parse took it: digits; 0 if out of range, which no rule grants
	}
	_, err := rs.Check(u.Scheme, u.Hostname(), port, nil)
	return err
}
