package netpolicy

import "net/netip"

// Reasons Restricted gives; a small fixed set, safe as a metrics label.
const (
	ReasonInvalid     = "invalid"     // the zero netip.Addr
	ReasonUnspecified = "unspecified" // 0.0.0.0/8, ::
	ReasonLoopback    = "loopback"    // 127.0.0.0/8, ::1
	ReasonPrivate     = "private"     // RFC 1918, fc00::/7, fec0::/10, 64:ff9b:1::/48
	ReasonLinkLocal   = "link-local"  // 169.254.0.0/16, fe80::/10
	ReasonMetadata    = "metadata"    // cloud instance-metadata and platform endpoints
	ReasonCGNAT       = "cgnat"       // 100.64.0.0/10, shared address space (RFC 6598)
	ReasonMulticast   = "multicast"   // 224.0.0.0/4, ff00::/8
	ReasonBroadcast   = "broadcast"   // 255.255.255.255
	ReasonReserved    = "reserved"    // documentation, benchmarking, IETF and unallocated space
)

type restrictedPrefix struct {
	prefix netip.Prefix
	reason string
}

// restrictedPrefixes is checked in order, so a specific entry wins over the block that
// contains it (169.254.169.254 is metadata before it is link-local).
var restrictedPrefixes = func() []restrictedPrefix {
	table := []struct{ prefix, reason string }{
		{"169.254.169.254/32", ReasonMetadata}, // AWS, GCP, Azure, OCI, OpenStack, DigitalOcean…
		{"169.254.170.2/32", ReasonMetadata},   // AWS ECS task metadata and credentials
		{"169.254.170.23/32", ReasonMetadata},  // AWS EKS Pod Identity agent
		{"100.100.100.200/32", ReasonMetadata}, // Alibaba Cloud
		{"168.63.129.16/32", ReasonMetadata},   // Azure WireServer (a public-looking address)
		{"192.0.0.192/32", ReasonMetadata},     // Oracle Cloud Classic
		{"fd00:ec2::254/128", ReasonMetadata},  // AWS IMDS over IPv6
		{"fd00:ec2::23/128", ReasonMetadata},   // AWS EKS Pod Identity agent over IPv6
		{"fd20:ce::254/128", ReasonMetadata},   // GCP metadata server over IPv6

		{"0.0.0.0/8", ReasonUnspecified}, // "this network"; 0.0.0.0 reaches the local host on Linux
		{"127.0.0.0/8", ReasonLoopback},
		{"10.0.0.0/8", ReasonPrivate},
		{"172.16.0.0/12", ReasonPrivate},
		{"192.168.0.0/16", ReasonPrivate},
		{"100.64.0.0/10", ReasonCGNAT},
		{"169.254.0.0/16", ReasonLinkLocal},
		{"192.0.0.0/24", ReasonReserved},    // IETF protocol assignments
		{"192.0.2.0/24", ReasonReserved},    // TEST-NET-1
		{"192.88.99.0/24", ReasonReserved},  // deprecated 6to4 relay anycast
		{"198.18.0.0/15", ReasonReserved},   // benchmarking
		{"198.51.100.0/24", ReasonReserved}, // TEST-NET-2
		{"203.0.113.0/24", ReasonReserved},  // TEST-NET-3
		{"224.0.0.0/4", ReasonMulticast},
		{"255.255.255.255/32", ReasonBroadcast},
		{"240.0.0.0/4", ReasonReserved},

		{"::/128", ReasonUnspecified},
		{"::1/128", ReasonLoopback},
		{"64:ff9b:1::/48", ReasonPrivate}, // local-use NAT64 (RFC 8215)
		{"fc00::/7", ReasonPrivate},       // unique local
		{"fec0::/10", ReasonPrivate},      // deprecated site-local
		{"fe80::/10", ReasonLinkLocal},
		{"ff00::/8", ReasonMulticast},
		{"2001::/23", ReasonReserved},     // IETF protocol assignments, Teredo
		{"2001:db8::/32", ReasonReserved}, // documentation
		{"3fff::/20", ReasonReserved},     // documentation (RFC 9637)
		{"5f00::/16", ReasonReserved},     // SRv6 SIDs
	}
	out := make([]restrictedPrefix, len(table))
	for i, t := range table {
		out[i] = restrictedPrefix{netip.MustParsePrefix(t.prefix), t.reason}
	}
	return out
}()

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96") // well-known NAT64 prefix (RFC 6052)
	sixToFour = netip.MustParsePrefix("2002::/16")    // 6to4 (RFC 3056)
	global6   = netip.MustParsePrefix("2000::/3")     // IPv6 global unicast
)

// Restricted reports whether ip is an address sandboxed code must not reach through a
// name, and why: one of the Reason constants. IPv4-mapped addresses are judged as IPv4;
// NAT64 and 6to4 addresses by the IPv4 address they embed; IPv6 outside 2000::/3 is reserved.
func Restricted(ip netip.Addr) (reason string, restricted bool) {
	if !ip.IsValid() {
		return ReasonInvalid, true
	}
	ip = ip.WithZone("").Unmap()
	for _, r := range restrictedPrefixes {
		if r.prefix.Contains(ip) {
			return r.reason, true
		}
	}
	if ip.Is4() {
		return "", false
	}
	b := ip.As16()
	switch {
	case nat64.Contains(ip):
		return Restricted(netip.AddrFrom4([4]byte(b[12:16])))
	case sixToFour.Contains(ip):
		return Restricted(netip.AddrFrom4([4]byte(b[2:6])))
	case !global6.Contains(ip):
		return ReasonReserved, true
	}
	return "", false
}

// PermitsAddr reports whether r lets a connection go to ip: a rule naming an IP permits
// that address only, a localhost rule loopback addresses only, and any other rule every
// address that is not Restricted.
func (r Rule) PermitsAddr(ip netip.Addr) bool {
	ip = ip.WithZone("").Unmap()
	switch {
	case r.IP.IsValid():
		return ip == r.IP
	case r.Host == "localhost" && !r.Wildcard:
		return ip.IsLoopback()
	}
	_, restricted := Restricted(ip)
	return !restricted
}
