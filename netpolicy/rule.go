package netpolicy

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/publicsuffix"

	"github.com/capsulegate/capsulegate/errs"
)

// Rule is one parsed entry of capabilities.network.allow.
type Rule struct {
	Scheme   string     // "http", "https", or "" for both
	Host     string     // canonical host: lower-case ASCII name, IP text, or the suffix of a wildcard
	Wildcard bool       // Host is a suffix: the rule matches its subdomains, never Host itself
	IP       netip.Addr // the address when Host is an IP literal, else the zero Addr
	Port     int        // 1–65535, or 0 for any port (only a bare host without scheme)
	Raw      string     // the entry as written
}

// ParseRule parses one entry of capabilities.network.allow (docs/reference/manifest.md
// "Network rules"; grammar in doc.go).
func ParseRule(s string) (Rule, error) {
	r, p := parseRule(s)
	if p != nil {
		return Rule{}, p.at(fmt.Sprintf("network rule %q", short(s)))
	}
	return r, nil
}

// parseRule is ParseRule without the subject of the error.
func parseRule(s string) (Rule, *problem) {
	r := Rule{Raw: s}
	if s == "" {
		return r, &problem{code: CodeEmpty, what: "the rule is empty", fix: "write a host, e.g. api.example.com or https://api.example.com, or remove the entry"}
	}
	if !utf8.ValidString(s) {
		return r, &problem{code: CodeCharacter, what: "the rule is not valid UTF-8", fix: "write the rule in UTF-8"}
	}
	for _, c := range s {
		if unicode.IsSpace(c) || unicode.IsControl(c) {
			return r, &problem{code: CodeCharacter, what: fmt.Sprintf("contains %q; spaces and control characters are not allowed", c), fix: "remove the whitespace or control character"}
		}
	}

	rest := s
	if i := strings.Index(s, "://"); i >= 0 && isSchemeToken(s[:i]) {
		r.Scheme = strings.ToLower(s[:i])
		if r.Scheme == "" {
			return r, &problem{code: CodeScheme, what: "the scheme before \"://\" is missing", fix: "use https://host, http://host, or a bare host for both"}
		}
		if r.Scheme != "http" && r.Scheme != "https" {
			return r, &problem{code: CodeScheme, what: fmt.Sprintf("scheme %q is not supported (only http and https)", short(s[:i])), fix: "use https://host, http://host, or a bare host for both"}
		}
		rest = s[i+3:]
	} else if i := strings.IndexByte(s, ':'); i > 0 && isHTTPScheme(s[:i]) && !isDigits(cut(s[i+1:], "/?#")) {
		return r, &problem{code: CodeScheme, what: fmt.Sprintf("scheme %q is not followed by \"//\"", short(s[:i])), fix: fmt.Sprintf("write %s://host", strings.ToLower(s[:i]))}
	}

	auth, tail := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		auth, tail = rest[:i], rest[i:]
	}
	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		return r, &problem{code: CodeUserinfo, what: fmt.Sprintf("userinfo %q is not allowed", short(auth[:i+1])), fix: "remove everything up to and including '@'; credentials never belong in a network rule"}
	}
	if p := checkTail(tail); p != nil {
		return r, p
	}

	if strings.HasPrefix(auth, "*.") {
		r.Wildcard = true
		auth = auth[2:]
		if strings.HasPrefix(auth, "[") {
			return r, &problem{code: CodeWildcard, what: "a wildcard cannot apply to an IP address", fix: "allow the address itself, without \"*.\""}
		}
	}
	host, port, hasPort, p := splitHostPort(auth)
	if p != nil {
		return r, p
	}
	if hasPort {
		n, p := parsePort(port)
		if p != nil {
			return r, p
		}
		r.Port = n
	} else {
		r.Port = defaultPort(r.Scheme)
	}

	if host == "*" && !r.Wildcard {
		return r, &problem{code: CodeTooBroad, what: "\"*\" would allow every host", fix: "list the hosts the capsule needs, or a wildcard under a domain you trust, e.g. *.example.com"}
	}
	if strings.IndexByte(host, '*') >= 0 {
		return r, &problem{code: CodeWildcard, what: "'*' is only allowed as the whole first label, as in *.example.com", fix: "write *.example.com, or list the hosts"}
	}
	if r.Wildcard && host == "" {
		return r, &problem{code: CodeWildcard, what: "the wildcard has no domain after \"*.\"", fix: "write *.example.com"}
	}

	name, ip, p := canonicalHost(host)
	if p != nil {
		return r, p
	}
	r.Host, r.IP = name, ip
	if ip.IsValid() && (ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0) {
		return r, &problem{code: CodeUnspecified, what: fmt.Sprintf("%s is the unspecified address (0.0.0.0/8 or ::): it does not mean \"any host\", and connecting to it reaches the gateway itself", ip), fix: "name the hosts the capsule needs; use localhost for services on the gateway host"}
	}
	if r.Wildcard {
		if ip.IsValid() {
			return r, &problem{code: CodeWildcard, what: fmt.Sprintf("a wildcard cannot apply to the IP address %s", ip), fix: "allow the address itself, without \"*.\""}
		}
		if p := checkBreadth(name); p != nil {
			return r, p
		}
	}
	return r, nil
}

// checkTail accepts what follows the authority: nothing or a lone "/".
func checkTail(tail string) *problem {
	t := tail
	if strings.HasPrefix(t, "/") {
		if len(t) > 1 && t[1] != '?' && t[1] != '#' {
			return &problem{code: CodePath, what: fmt.Sprintf("path %q is not allowed; rules name hosts, not URLs", short(cut(t, "?#"))), fix: "remove the path; a rule allows the whole host"}
		}
		t = t[1:]
	}
	switch {
	case strings.HasPrefix(t, "?"):
		return &problem{code: CodeQuery, what: fmt.Sprintf("query %q is not allowed", short(cut(t, "#"))), fix: "remove everything from '?'"}
	case strings.HasPrefix(t, "#"):
		return &problem{code: CodeFragment, what: fmt.Sprintf("fragment %q is not allowed", short(t)), fix: "remove everything from '#'"}
	}
	return nil
}

// splitHostPort splits host[:port] and [v6][:port].
func splitHostPort(auth string) (host, port string, hasPort bool, p *problem) {
	if strings.HasPrefix(auth, "[") {
		i := strings.IndexByte(auth, ']')
		if i < 0 {
			return "", "", false, &problem{code: CodeIPv6, what: "the IPv6 literal lacks its closing \"]\"", fix: "write it as [2001:db8::1] or [2001:db8::1]:8443"}
		}
		host, after := auth[:i+1], auth[i+1:]
		if after == "" {
			return host, "", false, nil
		}
		if after[0] != ':' {
			return "", "", false, &problem{code: CodeIPv6, what: fmt.Sprintf("unexpected %q after the IPv6 literal", short(after)), fix: "write [2001:db8::1] or [2001:db8::1]:8443"}
		}
		return host, after[1:], true, nil
	}
	switch strings.Count(auth, ":") {
	case 0:
		return auth, "", false, nil
	case 1:
		i := strings.IndexByte(auth, ':')
		return auth[:i], auth[i+1:], true, nil
	}
	return "", "", false, &problem{code: CodeIPv6Brackets, what: fmt.Sprintf("%q has more than one ':'; an IPv6 address must be written in brackets", short(auth)), fix: "write [2001:db8::1] or [2001:db8::1]:8443"}
}

// parsePort parses a decimal port in 1–65535.
func parsePort(s string) (int, *problem) {
	if len(s) <= 5 && isDigits(s) {
		if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= 65535 {
			return n, nil
		}
	}
	return 0, &problem{code: CodePort, what: fmt.Sprintf("port %q is not a number in 1–65535", short(s)), fix: "write a decimal port such as 443, or leave it out for the scheme's default"}
}

// checkBreadth refuses a wildcard over a single label or an ICANN public suffix
// (*.com, *.co.uk): either would allow hosts run by unrelated parties.
func checkBreadth(suffix string) *problem {
	if strings.IndexByte(suffix, '.') < 0 {
		return &problem{code: CodeTooBroad, what: fmt.Sprintf("*.%s covers a whole top-level domain", suffix), fix: fmt.Sprintf("list the hosts, or use a wildcard under a domain you trust, e.g. *.example.%s", suffix)}
	}
	if ps, icann := publicsuffix.PublicSuffix(suffix); icann && ps == suffix {
		return &problem{code: CodeTooBroad, what: fmt.Sprintf("*.%s covers a public suffix, where anyone can register a domain", suffix), fix: fmt.Sprintf("list the hosts, or use a wildcard under a domain you trust, e.g. *.example.%s", suffix)}
	}
	return nil
}

// defaultPort is the port a rule with this scheme and no port allows (0: any).
func defaultPort(scheme string) int {
	switch scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// String returns the canonical form of the rule; ParseRule(r.String()) yields r again
// (apart from Raw).
func (r Rule) String() string {
	var b strings.Builder
	if r.Scheme != "" {
		b.WriteString(r.Scheme)
		b.WriteString("://")
	}
	if r.Wildcard {
		b.WriteString("*.")
	}
	if r.IP.Is6() {
		b.WriteString("[")
		b.WriteString(r.Host)
		b.WriteString("]")
	} else {
		b.WriteString(r.Host)
	}
	if r.Port != 0 && r.Port != defaultPort(r.Scheme) {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(r.Port))
	}
	return b.String()
}

// Rules is a parsed capabilities.network.allow list; the empty list allows nothing.
type Rules []Rule

// ParseRules parses every entry, reporting all refusals at once as an errs.List whose
// entries carry Path "[i]"; on any refusal it returns no rules.
func ParseRules(entries []string) (Rules, error) {
	rs := make(Rules, 0, len(entries))
	var list errs.List
	for i, s := range entries {
		r, p := parseRule(s)
		if p != nil {
			e := p.at(fmt.Sprintf("network rule %q", short(s)))
			e.Path = fmt.Sprintf("[%d]", i)
			list = append(list, e)
			continue
		}
		rs = append(rs, r)
	}
	if len(list) > 0 {
		return nil, list
	}
	return rs, nil
}

// match returns the first rule allowing scheme, host and port; host is canonicalised first,
// scheme "" means unknown (a CONNECT tunnel) and matches on host and port only, and port 0
// means the scheme's default.
func (rs Rules) match(scheme, host string, port int) (Rule, bool) {
	name, ip, p := canonicalHost(host)
	if p != nil {
		return Rule{}, false
	}
	scheme, port, ok := normalizeRequest(scheme, port)
	if !ok {
		return Rule{}, false
	}
	for i := range rs {
		if rs[i].matches(scheme, name, ip, port) {
			return rs[i], true
		}
	}
	return Rule{}, false
}

// normalizeRequest lower-cases scheme and fills a zero port from it; ok is false for an
// unsupported scheme or an impossible port.
func normalizeRequest(scheme string, port int) (string, int, bool) {
	switch scheme {
	case "", "http", "https":
	default:
		scheme = strings.ToLower(scheme)
		if scheme != "http" && scheme != "https" {
			return "", 0, false
		}
	}
	if port == 0 {
		port = defaultPort(scheme)
	}
	return scheme, port, port >= 1 && port <= 65535
}

// MatchHost returns the first rule naming host, whatever its scheme and port: the question
// a DNS resolver asks before answering for a name.
func (rs Rules) MatchHost(host string) (Rule, bool) {
	name, ip, p := canonicalHost(host)
	if p != nil {
		return Rule{}, false
	}
	for i := range rs {
		if rs[i].matchesHost(name, ip) {
			return rs[i], true
		}
	}
	return Rule{}, false
}

// matches reports whether r allows a canonical request.
func (r *Rule) matches(scheme, name string, ip netip.Addr, port int) bool {
	if r.Scheme != "" && scheme != "" && r.Scheme != scheme {
		return false
	}
	if r.Port != 0 && r.Port != port {
		return false
	}
	return r.matchesHost(name, ip)
}

// matchesHost reports whether r names a canonical host; a wildcard never matches an IP.
func (r *Rule) matchesHost(name string, ip netip.Addr) bool {
	if r.IP.IsValid() || ip.IsValid() {
		return r.IP == ip
	}
	if r.Wildcard {
		return len(name) > len(r.Host)+1 && strings.HasSuffix(name, r.Host) && name[len(name)-len(r.Host)-1] == '.'
	}
	return name == r.Host
}

// isSchemeToken reports whether s is an RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
func isSchemeToken(s string) bool {
	if s == "" {
		return true // "://host": a missing scheme, refused by the caller
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(c >= 'a' && c <= 'z') && (i == 0 || !(s[i] >= '0' && s[i] <= '9' || s[i] == '+' || s[i] == '-' || s[i] == '.')) {
			return false
		}
	}
	return true
}

// isHTTPScheme reports whether s is http or https in any case.
func isHTTPScheme(s string) bool {
	return strings.EqualFold(s, "http") || strings.EqualFold(s, "https")
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// cut returns s up to the first byte in chars.
func cut(s, chars string) string {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return s[:i]
	}
	return s
}
