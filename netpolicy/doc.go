// Package netpolicy is the one network-rule engine of capsulegate
// (docs/reference/manifest.md "Network rules"): it parses the entries of
// capabilities.network.allow, matches requests against them, and applies the address
// refusal rule. The proxy, the DNS-pinning resolver and the guests' HTTP import all
// decide through it.
//
// # Grammar
//
// An entry is one of
//
//	https://host[:port]   https only; port defaults to 443
//	http://host[:port]    http only; port defaults to 80
//	host:port             http and https, that port only
//	host                  http and https, any port
//
// where host is a DNS name, "*." followed by a DNS name, an IPv4 address, or an IPv6
// address in brackets. The scheme is case-insensitive. A lone trailing "/" is tolerated
// (people paste "https://api.example.com/"); any other path, a query, a fragment,
// userinfo, whitespace, an empty entry, or a port outside 1–65535 is refused.
//
// # Hosts
//
// Names are mapped with the UTS #46 lookup profile (non-transitional, STD3: letters,
// digits and '-' only, so '_' is refused) and compared in lower-case ASCII:
// "BÜCHER.example" and "xn--bcher-kva.example" are the same host. One trailing dot is
// stripped; labels are at most 63 bytes and names 253.
//
// A name whose last label is a number (decimal, or 0x hex) is an IPv4 address or nothing,
// as in the WHATWG URL standard: the inet_aton spellings "127.1", "0x7f.1", "0177.0.0.1",
// "2130706433" all mean 127.0.0.1, and "256.1.1.1" or "foo.123" is refused rather than
// looked up as a name. IPv4-mapped IPv6 (::ffff:127.0.0.1) is the IPv4 address; IPv6
// zones are refused. Rules and the hosts checked against them are canonicalised the same
// way, by CanonicalHost. A rule naming the unspecified address (0.0.0.0/8, ::) is
// refused: it is no destination, and it does not mean "any host". Hosts longer than 1024
// bytes are refused before mapping.
//
// # Wildcards
//
// "*.example.com" matches subdomains of example.com at any depth, never example.com
// itself. "*" alone is refused, and so is a wildcard over a single label ("*.com",
// "*.localhost") or over an ICANN public suffix ("*.co.uk"): each would admit hosts run
// by unrelated parties. A wildcard never applies to an IP address.
//
// # Matching
//
// A request is (scheme, host, port). Scheme "" means unknown, as for a CONNECT tunnel,
// and matches on host and port only, so "http://h" admits CONNECT h:80. Only http and
// https requests match. Rules are tried in order.
//
// # Addresses
//
// Restricted names the address classes sandboxed code must not reach through a name:
// unspecified, loopback, private, link-local, cloud metadata, CGNAT, multicast, broadcast
// and reserved space (see the Reason constants). A rule naming an IP permits exactly that
// address, even a restricted one; a "localhost" rule permits loopback addresses only; any
// other rule permits every address that is not restricted. So a name resolving to a
// private address is refused even when another rule names that address.
package netpolicy
