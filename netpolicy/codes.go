package netpolicy

import (
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
)

// Part names this package in every error it returns.
const Part = "netpolicy"

// Stable codes of the network-rule refusals (docs/errors.md lists them all).
const (
	CodeEmpty        = "E-NET-001" // a rule is the empty string
	CodeCharacter    = "E-NET-002" // whitespace, a control character or invalid UTF-8 (in a rule or host)
	CodeScheme       = "E-NET-003" // a scheme other than http or https, or one without "//"
	CodeUserinfo     = "E-NET-004" // user:password@ before the host
	CodePath         = "E-NET-005" // a path after the host (a lone trailing "/" is tolerated)
	CodeQuery        = "E-NET-006" // a ?query
	CodeFragment     = "E-NET-007" // a #fragment
	CodePort         = "E-NET-008" // a port that is empty, not decimal, or outside 1–65535
	CodeHost         = "E-NET-009" // a host name that is empty or not a valid (IDNA) name
	CodeNumericHost  = "E-NET-010" // a host that ends in a number but is not a valid IPv4 address
	CodeIPv6         = "E-NET-011" // a bracketed literal that is not a valid IPv6 address
	CodeIPv6Brackets = "E-NET-012" // an IPv6 address written without brackets
	CodeZone         = "E-NET-013" // an IPv6 zone (%eth0)
	CodeWildcard     = "E-NET-014" // "*" anywhere but as the whole first label, or on an IP
	CodeTooBroad     = "E-NET-015" // "*", or a wildcard over a single label or a public suffix
	CodeNotAllowed   = "E-NET-016" // no rule allows this scheme, host and port
	CodeRestricted   = "E-NET-017" // the host resolved to a restricted address its rule does not name
	CodeUnspecified  = "E-NET-018" // a rule naming 0.0.0.0/8 or ::, which is no destination
)

// Codes of the proxy's and the resolver's own refusals and failures.
const (
	CodeConfig       = "E-NET-020" // the resolver's upstream DNS server is not host:port, or none is found
	CodeUpstreamDNS  = "E-NET-021" // the upstream DNS server did not answer for an allowlisted name
	CodeTooManyNames = "E-NET-022" // a session asked for more distinct names than the resolver pins
)

// Codes of the proxy's refusals of requests it cannot or will not forward.
const (
	CodeNotProxyRequest = "E-NET-023" // origin-form request, or a CONNECT target that is not host:port
	CodeProxyScheme     = "E-NET-024" // an absolute-form request for a scheme other than http
	CodeProxyLoop       = "E-NET-025" // a request addressed to the proxy itself
	CodeBadGateway      = "E-NET-026" // an allowed host could not be reached
)

// problem is a refusal not yet attached to the value it is about.
type problem struct {
	code, what, fix string
	cause           error
}

// at turns p into an error about subject, e.g. `network rule "ftp://x"`.
func (p *problem) at(subject string) *errs.Error {
	return errs.Wrap(p.cause, p.code, Part, subject+": "+p.what, p.fix)
}

// short shortens a value quoted in a message, so a hostile host cannot flood logs and traces.
func short(s string) string { return clip.String(s, 100) }
