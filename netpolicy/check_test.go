package netpolicy

import (
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

func TestCheck(t *testing.T) {
	rs := mustRules(t,
		"https://api.example.com",
		"*.cdn.example.net",
		"localhost:3000",
		"10.0.0.5:8080",
		"http://[fd00::5]",
		"internal.example.org",
	)
	tests := []struct {
		scheme, host string
		port         int
		addrs        []netip.Addr
		rule, code   string // rule.Raw when allowed, else code
	}{
		{"https", "api.example.com", 443, addrs("93.184.216.34"), "https://api.example.com", ""},
		{"https", "api.example.com", 0, nil, "https://api.example.com", ""},
		{"", "API.example.com.", 443, addrs("2606:2800::1"), "https://api.example.com", ""},
		{"https", "api.example.com", 443, addrs("93.184.216.34", "10.1.2.3"), "", CodeRestricted},
		{"https", "api.example.com", 443, addrs("169.254.169.254"), "", CodeRestricted},
		{"https", "api.example.com", 443, []netip.Addr{{}}, "", CodeRestricted},
		{"http", "api.example.com", 80, nil, "", CodeNotAllowed},
		{"https", "evil.example.com", 443, nil, "", CodeNotAllowed},
		{"https", "x.cdn.example.net", 443, addrs("151.101.1.1"), "*.cdn.example.net", ""},
		{"https", "x.cdn.example.net", 443, addrs("fe80::1"), "", CodeRestricted},
		{"http", "localhost", 3000, addrs("127.0.0.1", "::1"), "localhost:3000", ""},
		{"http", "localhost", 3000, addrs("192.168.1.2"), "", CodeRestricted},
		{"http", "localhost", 3000, addrs("8.8.8.8"), "", CodeRestricted},
		{"http", "localhost", 3001, addrs("127.0.0.1"), "", CodeNotAllowed},
		{"http", "10.0.0.5", 8080, nil, "10.0.0.5:8080", ""},
		{"http", "012.0.0.5", 8080, nil, "10.0.0.5:8080", ""},
		{"http", "167772165", 8080, nil, "10.0.0.5:8080", ""},
		{"http", "10.0.0.5", 8080, addrs("10.0.0.6"), "", CodeRestricted},
		{"http", "10.0.0.6", 8080, nil, "", CodeNotAllowed},
		{"http", "fd00::5", 80, nil, "http://[fd00::5]", ""},
		{"http", "[fd00::5]", 0, nil, "http://[fd00::5]", ""},
		{"https", "fd00::5", 443, nil, "", CodeNotAllowed},
		// A name resolving to a private address is refused even though another rule names it.
		{"http", "internal.example.org", 8080, addrs("10.0.0.5"), "", CodeRestricted},
		{"http", "internal.example.org", 8080, addrs("203.0.114.7"), "internal.example.org", ""},
		{"http", "127.0.0.1", 3000, nil, "", CodeNotAllowed}, // localhost names the name only
		{"ftp", "api.example.com", 21, nil, "", CodeScheme},
		{"https", "api.example.com", 65536, nil, "", CodePort},
		{"", "api.example.com", 0, nil, "", CodePort},
		{"https", "a_b.example.com", 443, nil, "", CodeHost},
		{"https", "256.0.0.1", 443, nil, "", CodeNumericHost},
		{"https", "fe80::1%eth0", 443, nil, "", CodeZone},
	}
	for _, tt := range tests {
		r, err := rs.Check(tt.scheme, tt.host, tt.port, tt.addrs)
		if tt.code != "" {
			assertCode(t, err, tt.code)
			continue
		}
		if err != nil || r.Raw != tt.rule {
			t.Errorf("Check(%q, %q, %d, %v) = %q, %v; want rule %q", tt.scheme, tt.host, tt.port, tt.addrs, r.Raw, err, tt.rule)
		}
	}
}

func TestCheckMessages(t *testing.T) {
	rs := mustRules(t, "https://api.example.com", "localhost")
	tests := []struct {
		scheme, host string
		port         int
		addrs        []netip.Addr
		msg, fix     string
	}{
		{"https", "other.example.com", 443, nil,
			"network policy: other.example.com:443 not in capabilities.network.allow", `"https://other.example.com"`},
		{"http", "other.example.com", 80, nil,
			"network policy: other.example.com:80 not in capabilities.network.allow", `"http://other.example.com"`},
		{"", "2001:db8::1", 8443, nil,
			"network policy: [2001:db8::1]:8443 not in capabilities.network.allow", `"[2001:db8::1]:8443"`},
		{"https", "api.example.com", 443, addrs("10.0.0.1"),
			`network policy: api.example.com:443 resolves to 10.0.0.1, a private address, which rule "https://api.example.com" does not permit`, ""},
		{"https", "api.example.com", 443, addrs("fe80::1"),
			"resolves to fe80::1, a link-local address", ""},
		{"https", "api.example.com", 443, addrs("::"),
			"resolves to ::, an unspecified address", ""},
		{"http", "localhost", 80, addrs("8.8.8.8"),
			`resolves to 8.8.8.8, not a loopback address, which rule "localhost" does not permit`, ""},
	}
	for _, tt := range tests {
		_, err := rs.Check(tt.scheme, tt.host, tt.port, tt.addrs)
		if err == nil || !strings.Contains(err.Error(), tt.msg) || !strings.Contains(err.Error(), tt.fix) {
			t.Errorf("Check(%q, %q) error %v; want it to contain %q and %q", tt.scheme, tt.host, err, tt.msg, tt.fix)
		}
	}
}

// TestCheckConcurrent hammers one Rules from many goroutines released together; run with -race.
func TestCheckConcurrent(t *testing.T) {
	rs := mustRules(t, benchEntries...)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			<-start
			for i := range 200 {
				host := benchHosts[(g+i)%len(benchHosts)]
				rs.match("https", host, 443)
				rs.Check("https", host, 443, addrs("93.184.216.34"))
			}
		})
	}
	close(start)
	wg.Wait()
}

// TestCheckURL: a URL's scheme, host and port — the scheme's default when it names none —
// decide, as the dialer will.
func TestCheckURL(t *testing.T) {
	rules, err := ParseRules([]string{"https://api.example.com", "127.0.0.1:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for raw, ok := range map[string]bool{
		"https://api.example.com/agents/x/": true, "https://api.example.com:443/": true, "http://api.example.com/": false,
		"https://api.example.com:8443/": false, "http://127.0.0.1:8080/a/": true, "http://127.0.0.1/": false,
	} {
		u, _ := url.Parse(raw)
		if err := rules.CheckURL(u); (err == nil) != ok {
			t.Errorf("CheckURL(%s) = %v, want allowed %v", raw, err, ok)
		}
	}
}
