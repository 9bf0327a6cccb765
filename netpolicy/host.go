package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// idnaProfile is the UTS #46 lookup profile (non-transitional, STD3 rules, hyphen and
// joiner checks, bidi rule): what a browser does to a host before resolving it.
var idnaProfile = idna.Lookup

// DNS length limits, without the root dot, and the longest host text accepted before
// mapping (a 253-byte name spelled in full-width or other non-ASCII characters fits).
const (
	maxName  = 253
	maxLabel = 63
	maxInput = 1024
)

// CanonicalHost returns the canonical form of a host: a lower-case ASCII (IDNA) name
// without trailing dot, or, for an IP literal in any spelling, the address's text and the
// address itself; brackets around IPv6 are optional here.
func CanonicalHost(host string) (name string, ip netip.Addr, err error) {
	name, ip, p := canonicalHost(host)
	if p != nil {
		return "", netip.Addr{}, p.at(fmt.Sprintf("network policy: host %q", short(host)))
	}
	return name, ip, nil
}

// parseIP parses an IP address in any spelling CanonicalHost accepts (inet_aton forms,
// IPv6 with or without brackets, IPv4-mapped IPv6 as IPv4); zones are refused.
func parseIP(s string) (netip.Addr, bool) {
	_, ip, p := canonicalHost(s)
	return ip, p == nil && ip.IsValid()
}

// canonicalHost is CanonicalHost without the subject of the error.
func canonicalHost(host string) (string, netip.Addr, *problem) {
	if host == "" {
		return "", netip.Addr{}, &problem{code: CodeHost, what: "the host is empty", fix: "name a host, e.g. api.example.com"}
	}
	if len(host) > maxInput {
		return "", netip.Addr{}, &problem{code: CodeHost, what: fmt.Sprintf("the host is %d bytes long, over the limit of %d", len(host), maxInput), fix: "use a host name of at most 253 characters"}
	}
	if !utf8.ValidString(host) {
		// The IDNA profile maps invalid bytes to U+FFFD and may accept the result.
		return "", netip.Addr{}, &problem{code: CodeCharacter, what: "the host is not valid UTF-8", fix: "send the host in UTF-8 or as its ASCII (xn--) form"}
	}
	if host[0] == '[' {
		if host[len(host)-1] != ']' {
			return "", netip.Addr{}, &problem{code: CodeIPv6, what: "starts with \"[\" but does not end with \"]\"", fix: "pass the host alone, e.g. [2001:db8::1], without a port"}
		}
		return parseIPv6(host[1 : len(host)-1])
	}
	if strings.IndexByte(host, ':') >= 0 {
		return parseIPv6(host)
	}
	if name, ok := fastASCII(host); ok {
		return finishName(name)
	}
	name, err := idnaProfile.ToASCII(host)
	if err != nil {
		return "", netip.Addr{}, &problem{code: CodeHost, what: "not a valid host name", fix: "use letters, digits, '-' and '.' (or a valid internationalised name); '_', '%' and spaces are not allowed", cause: err}
	}
	return finishName(strings.TrimSuffix(name, "."))
}

// finishName classifies an ASCII name: IPv4 when its last label is a number, else a DNS
// name whose labels and length are checked.
func finishName(name string) (string, netip.Addr, *problem) {
	if endsInNumber(name) {
		ip, ok := parseIPv4(name)
		if !ok {
			return "", netip.Addr{}, &problem{code: CodeNumericHost, what: "ends in a number but is not a valid IPv4 address (each part must fit, at most four parts)", fix: "write the address as four decimal numbers 0–255, e.g. 192.0.2.10, or give a host name whose last label is not a number"}
		}
		return ip.String(), ip, nil
	}
	if name == "" {
		return "", netip.Addr{}, &problem{code: CodeHost, what: "the host is empty", fix: "name a host, e.g. api.example.com"}
	}
	if len(name) > maxName {
		return "", netip.Addr{}, &problem{code: CodeHost, what: fmt.Sprintf("the name is %d bytes long, over the DNS limit of %d", len(name), maxName), fix: "use a shorter host name"}
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" {
			return "", netip.Addr{}, &problem{code: CodeHost, what: "has an empty label (\"..\" or a leading \".\")", fix: "remove the extra dot"}
		}
		if len(label) > maxLabel {
			return "", netip.Addr{}, &problem{code: CodeHost, what: fmt.Sprintf("label %q is over the DNS limit of %d bytes", short(label), maxLabel), fix: "use a shorter label"}
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				// The IDNA profile only hands back LDH labels; this guards the invariant.
				return "", netip.Addr{}, &problem{code: CodeHost, what: fmt.Sprintf("label %q has a character outside a-z, 0-9 and '-'", short(label)), fix: "use letters, digits and '-'"}
			}
		}
	}
	return name, netip.Addr{}, nil
}

// fastASCII lower-cases and strips the root dot of a plain LDH name, reporting false for
// anything the IDNA profile must judge (non-ASCII, other characters, "--" in positions
// 3–4, leading or trailing '-').
func fastASCII(s string) (string, bool) {
	var lower []byte
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			label := s[start:i]
			if len(label) > 0 && (label[0] == '-' || label[len(label)-1] == '-') {
				return "", false
			}
			if len(label) >= 4 && label[2] == '-' && label[3] == '-' {
				return "", false
			}
			start = i + 1
			continue
		}
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-':
		case c >= 'A' && c <= 'Z':
			if lower == nil {
				lower = []byte(s)
			}
			lower[i] = c + 'a' - 'A'
		default:
			return "", false
		}
	}
	if lower != nil {
		s = string(lower)
	}
	return strings.TrimSuffix(s, "."), true
}

// parseIPv6 parses the inside of brackets (or an unbracketed host containing ':').
func parseIPv6(s string) (string, netip.Addr, *problem) {
	if strings.IndexByte(s, '%') >= 0 {
		return "", netip.Addr{}, &problem{code: CodeZone, what: "an IPv6 zone (\"%…\") is not allowed", fix: "remove the zone; link-local addresses cannot be allowed anyway"}
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || !ip.Is6() {
		return "", netip.Addr{}, &problem{code: CodeIPv6, what: fmt.Sprintf("%q is not a valid IPv6 address", short(s)), fix: "write a valid IPv6 address in brackets, e.g. [2001:db8::1], or an IPv4 address without brackets", cause: err}
	}
	ip = ip.Unmap()
	return ip.String(), ip, nil
}

// endsInNumber reports whether the last label of name is a number (decimal, or a 0x hex
// number), which makes the whole name an IPv4 address or nothing (WHATWG URL host rule).
func endsInNumber(name string) bool {
	last := name[strings.LastIndexByte(name, '.')+1:]
	if last == "" {
		return false
	}
	if isDigits(last) {
		return true
	}
	_, ok := parseIPv4Part(last)
	return ok
}

// parseIPv4 parses the inet_aton spellings: one to four parts, each decimal, 0x hex or
// 0-prefixed octal, the last filling the remaining bytes.
func parseIPv4(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for p := range strings.SplitSeq(s, ".") {
		if n == len(parts) {
			return netip.Addr{}, false
		}
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		parts[n] = v
		n++
	}
	var v uint64
	for i := range n - 1 {
		if parts[i] > 0xff {
			return netip.Addr{}, false
		}
		v |= parts[i] << (8 * (3 - i))
	}
	last := parts[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// parseIPv4Part parses one part of an inet_aton address; values above 2^32-1 saturate at 2^32.
func parseIPv4Part(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		base, s = 16, s[2:]
	case len(s) >= 2 && s[0] == '0':
		base, s = 8, s[1:]
	}
	var v uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		var d uint64
		switch {
		case c >= '0' && c <= '9':
			d = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			d = uint64(c-'a') + 10
		case c >= 'A' && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if v = v*base + d; v > 1<<32 {
			v = 1 << 32
		}
	}
	return v, true
}
