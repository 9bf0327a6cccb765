package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"
)

// Resolver looks up a host's addresses; *net.Resolver satisfies it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Dialer connects only where the rules allow: it resolves the host itself, checks every
// address it got against the rule that matches host:port (a name resolving to a
// restricted address is refused unless that rule names it), and dials the checked
// address, so no second lookup can redirect the connection.
type Dialer struct {
	Rules    Rules
	Resolver Resolver // nil: net.DefaultResolver
	// Traffic, when set, counts the bytes of every connection the dialer makes.
	Traffic *Traffic
	dialer  net.Dialer
}

// DialContext implements the signature http.Transport wants.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	// Name first: an address is never looked up for a host no rule allows.
	if _, err := d.Rules.Check("", host, port, nil); err != nil {
		return nil, err
	}
	narrow, narrowed := NarrowingOf(ctx)
	if narrowed {
		if err := CheckNarrowed(narrow, "", host, port, nil); err != nil {
			return nil, err
		}
	}
	var addrs []netip.Addr
	if _, ip, err := CanonicalHost(host); err == nil && ip.IsValid() {
		addrs = []netip.Addr{ip}
	} else {
		res := d.Resolver
		if res == nil {
			res = net.DefaultResolver
		}
		ipNet := "ip"
		switch network {
		case "tcp4", "udp4":
			ipNet = "ip4"
		case "tcp6", "udp6":
			ipNet = "ip6"
		}
		found, err := res.LookupNetIP(ctx, ipNet, host)
		if err != nil {
			return nil, err
		}
		for _, a := range found {
			addrs = append(addrs, a.Unmap())
		}
		if len(addrs) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	if _, err := d.Rules.Check("", host, port, addrs); err != nil {
		return nil, err
	}
	if narrowed {
		if err := CheckNarrowed(narrow, "", host, port, addrs); err != nil {
			return nil, err
		}
	}
	var errsSeen []error
	for _, a := range addrs {
		c, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), portStr))
		if err == nil {
			return d.Traffic.counted(c), nil
		}
		errsSeen = append(errsSeen, err)
	}
	return nil, errors.Join(errsSeen...)
}

// NewTransport returns an HTTP transport that dials only through d, never uses a proxy
// from the environment, and keeps its own connection pool (one transport per capsule,
// since rules differ between capsules).
func NewTransport(d *Dialer) *http.Transport {
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ResponseHeaderTimeout: 5 * time.Minute,
	}
}
