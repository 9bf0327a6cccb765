package netpolicy

import (
	"net/netip"
	"testing"
)

func TestRestricted(t *testing.T) {
	tests := []struct{ ip, reason string }{
		{"0.0.0.0", ReasonUnspecified},
		{"0.1.2.3", ReasonUnspecified},
		{"::", ReasonUnspecified},
		{"127.0.0.1", ReasonLoopback},
		{"127.255.255.254", ReasonLoopback},
		{"::1", ReasonLoopback},
		{"::ffff:127.0.0.1", ReasonLoopback},
		{"10.0.0.1", ReasonPrivate},
		{"172.16.0.1", ReasonPrivate},
		{"172.31.255.255", ReasonPrivate},
		{"192.168.1.1", ReasonPrivate},
		{"fc00::1", ReasonPrivate},
		{"fd12:3456::1", ReasonPrivate},
		{"fec0::1", ReasonPrivate},
		{"64:ff9b:1::a", ReasonPrivate},
		{"169.254.0.1", ReasonLinkLocal},
		{"fe80::1", ReasonLinkLocal},
		{"169.254.169.254", ReasonMetadata},
		{"169.254.170.2", ReasonMetadata},
		{"169.254.170.23", ReasonMetadata},
		{"100.100.100.200", ReasonMetadata},
		{"168.63.129.16", ReasonMetadata},
		{"192.0.0.192", ReasonMetadata},
		{"fd00:ec2::254", ReasonMetadata},
		{"fd00:ec2::23", ReasonMetadata},
		{"fd20:ce::254", ReasonMetadata},
		{"::ffff:169.254.169.254", ReasonMetadata},
		{"100.64.0.1", ReasonCGNAT},
		{"100.127.255.255", ReasonCGNAT},
		{"224.0.0.1", ReasonMulticast},
		{"239.255.255.250", ReasonMulticast},
		{"ff02::1", ReasonMulticast},
		{"255.255.255.255", ReasonBroadcast},
		{"240.0.0.1", ReasonReserved},
		{"192.0.2.1", ReasonReserved},
		{"198.51.100.1", ReasonReserved},
		{"203.0.113.1", ReasonReserved},
		{"198.18.0.1", ReasonReserved},
		{"192.0.0.8", ReasonReserved},
		{"192.88.99.1", ReasonReserved},
		{"2001:db8::1", ReasonReserved},
		{"2001::1", ReasonReserved}, // Teredo
		{"3fff::1", ReasonReserved},
		{"::7f00:1", ReasonReserved},           // IPv4-compatible
		{"100::1", ReasonReserved},             // discard-only
		{"4000::1", ReasonReserved},            // outside global unicast
		{"64:ff9b::7f00:1", ReasonLoopback},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", ReasonMetadata}, // NAT64 of 169.254.169.254
		{"2002:a00:1::", ReasonPrivate},        // 6to4 of 10.0.0.1
		{"2002:7f00:1::1", ReasonLoopback},     // 6to4 of 127.0.0.1
		{"fe80::1%eth0", ReasonLinkLocal},      // zone ignored
	}
	for _, tt := range tests {
		reason, restricted := Restricted(netip.MustParseAddr(tt.ip))
		if !restricted || reason != tt.reason {
			t.Errorf("Restricted(%s) = %q, %v; want %q", tt.ip, reason, restricted, tt.reason)
		}
	}
	if reason, restricted := Restricted(netip.Addr{}); !restricted || reason != ReasonInvalid {
		t.Errorf("Restricted(zero) = %q, %v", reason, restricted)
	}
}

func TestNotRestricted(t *testing.T) {
	for _, ip := range []string{
		"1.1.1.1", "8.8.8.8", "93.184.216.34", "172.15.255.255", "172.32.0.0", "100.63.255.255",
		"100.128.0.0", "169.253.255.255", "223.255.255.255", "192.0.1.1", "11.0.0.1",
		"2606:4700:4700::1111", "2001:4860:4860::8888", "::ffff:8.8.8.8",
		"64:ff9b::808:808", // NAT64 of 8.8.8.8
		"2002:808:808::1",  // 6to4 of 8.8.8.8
	} {
		if reason, restricted := Restricted(netip.MustParseAddr(ip)); restricted {
			t.Errorf("Restricted(%s) = %q, want not restricted", ip, reason)
		}
	}
}

func TestPermitsAddr(t *testing.T) {
	tests := []struct {
		rule, ip string
		want     bool
	}{
		{"https://api.example.com", "93.184.216.34", true},
		{"https://api.example.com", "10.0.0.1", false},
		{"https://api.example.com", "127.0.0.1", false},
		{"https://api.example.com", "169.254.169.254", false},
		{"https://api.example.com", "::ffff:10.0.0.1", false},
		{"https://api.example.com", "fd00:ec2::254", false},
		{"*.example.com", "192.168.0.10", false},
		{"*.example.com", "2606:4700::1", true},
		{"10.0.0.5", "10.0.0.5", true},        // the rule names the address
		{"10.0.0.5", "::ffff:10.0.0.5", true}, // in any spelling
		{"10.0.0.5", "10.0.0.6", false},       // and only that address
		{"10.0.0.5", "8.8.8.8", false},
		{"[::1]:8080", "::1", true},
		{"[::1]:8080", "127.0.0.1", false},
		{"169.254.169.254", "169.254.169.254", true}, // explicit even for metadata
		{"localhost", "127.0.0.1", true},
		{"localhost", "127.0.0.53", true},
		{"localhost", "::1", true},
		{"localhost:3000", "::ffff:127.0.0.1", true},
		{"localhost", "10.0.0.1", false},
		{"localhost", "8.8.8.8", false}, // loopback only
		{"localhost", "169.254.169.254", false},
		{"api.example.com", "", false}, // the zero Addr
	}
	for _, tt := range tests {
		r, err := ParseRule(tt.rule)
		if err != nil {
			t.Fatal(err)
		}
		var ip netip.Addr
		if tt.ip != "" {
			ip = netip.MustParseAddr(tt.ip)
		}
		if got := r.PermitsAddr(ip); got != tt.want {
			t.Errorf("rule %q PermitsAddr(%v) = %v, want %v", tt.rule, ip, got, tt.want)
		}
	}
}
