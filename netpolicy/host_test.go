package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCanonicalHostIPSpellings(t *testing.T) {
	tests := []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0x7f.0.0.1", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.1", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0x7f.0.0x0.01", "127.0.0.1"}, // mixed
		{"0x7f.000.0.1", "127.0.0.1"},
		{"0x00000000000007f.1", "127.0.0.1"}, // leading zeros do not overflow
		{"127.0.0.0x1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"0x", "0.0.0.0"},
		{"4294967295", "255.255.255.255"},
		{"169.254.43518", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"0251.0376.0251.0376", "169.254.169.254"},
		{"１２７．０．０．１", "127.0.0.1"}, // full-width digits and dots, mapped by UTS #46
		{"127。0。0。1", "127.0.0.1"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"0:0:0:0:0:0:0:1", "::1"},
		{"[2001:DB8:0::1]", "2001:db8::1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"::ffff:7f00:1", "127.0.0.1"},
		{"[::FFFF:7F00:0001]", "127.0.0.1"},
		{"0:0:0:0:0:ffff:a9fe:a9fe", "169.254.169.254"},
		{"::7f00:1", "::7f00:1"}, // IPv4-compatible is not IPv4 (Restricted refuses it)
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, ip, err := CanonicalHost(tt.in)
			if err != nil {
				t.Fatalf("CanonicalHost(%q): %v", tt.in, err)
			}
			want := netip.MustParseAddr(tt.want)
			if name != tt.want || ip != want {
				t.Errorf("CanonicalHost(%q) = %q, %v; want %q", tt.in, name, ip, tt.want)
			}
			if got, ok := parseIP(tt.in); !ok || got != want {
				t.Errorf("parseIP(%q) = %v, %v; want %v", tt.in, got, ok, want)
			}
		})
	}
}

func TestCanonicalHostNames(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"EXAMPLE.COM", "example.com"},
		{"example.com.", "example.com"},
		{"ＥＸＡＭＰＬＥ.com", "example.com"},
		{"example.com。", "example.com"},
		{"BÜCHER.example", "xn--bcher-kva.example"},
		{"bücher.example", "xn--bcher-kva.example"},
		{"xn--bcher-kva.example", "xn--bcher-kva.example"},
		{"XN--BCHER-KVA.EXAMPLE", "xn--bcher-kva.example"},
		{"faß.de", "xn--fa-hia.de"}, // non-transitional: ß is kept
		{"例え.テスト", "xn--r8jz45g.xn--zckzah"},
		{"123.example.com", "123.example.com"}, // only the last label decides
		{"0x7f.example", "0x7f.example"},
		{"example.0xg", "example.0xg"}, // not a hex number
		{"localhost", "localhost"},
		{"a-b.c-d.example", "a-b.c-d.example"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			name, ip, err := CanonicalHost(tt.in)
			if err != nil {
				t.Fatalf("CanonicalHost(%q): %v", tt.in, err)
			}
			if name != tt.want || ip.IsValid() {
				t.Errorf("CanonicalHost(%q) = %q, %v; want %q and no IP", tt.in, name, ip, tt.want)
			}
			if _, ok := parseIP(tt.in); ok {
				t.Errorf("parseIP(%q) accepted a name", tt.in)
			}
		})
	}
}

func TestCanonicalHostInvalid(t *testing.T) {
	tests := []struct{ in, code string }{
		{"", CodeHost},
		{".", CodeHost},
		{"a..b", CodeHost},
		{"a_b.example", CodeHost},
		{"a b.example", CodeHost},
		{"exa%2emple.com", CodeHost},
		{"256.1.1.1", CodeNumericHost},
		{"0x1ffffffff", CodeNumericHost},
		{"0x100000000", CodeNumericHost},
		{"99999999999999999999999", CodeNumericHost},
		{"08.0.0.1", CodeNumericHost},
		{"1.2.3.4..", CodeHost},
		{"1.2.3.4..", CodeHost},
		{"example.1", CodeNumericHost},
		{"[::1", CodeIPv6},
		{"[1.2.3.4]", CodeIPv6},
		{"example.com:443", CodeIPv6},
		{"::ffff:127.1", CodeIPv6},
		{"fe80::1%eth0", CodeZone},
		{"[fe80::1%25eth0]", CodeZone},
		{"\xe8000", CodeCharacter}, // found by FuzzCanonicalHost: idna maps it to xn--000-4t7s
		{"ex\xffample.com", CodeCharacter},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, _, err := CanonicalHost(tt.in)
			assertCode(t, err, tt.code)
			if _, ok := parseIP(tt.in); ok {
				t.Errorf("parseIP(%q) accepted it", tt.in)
			}
		})
	}
}

func TestHostLengthLimit(t *testing.T) {
	// Ignored code points (soft hyphen) vanish in mapping; the input limit still applies.
	long := strings.Repeat("\u00ad", 600) + "example.com"
	_, _, err := CanonicalHost(long)
	assertCode(t, err, CodeHost)
	if len(err.Error()) > 1000 {
		t.Errorf("error quotes the whole host: %d bytes", len(err.Error()))
	}
	if name, _, err := CanonicalHost(strings.Repeat("\u00ad", 300) + "example.com"); err != nil || name != "example.com" {
		t.Errorf("CanonicalHost = %q, %v", name, err)
	}
	if got := short(strings.Repeat("ü", 80)); len(got) > 100+len("…") || !strings.HasSuffix(got, "ü…") {
		t.Errorf("clip = %q", got)
	}
}
