package netpolicy

import (
	"testing"
)

func mustRules(t testing.TB, entries ...string) Rules {
	t.Helper()
	rs, err := ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestMatch(t *testing.T) {
	type req struct {
		scheme, host string
		port         int
		want         bool
	}
	tests := []struct {
		rule string
		reqs []req
	}{
		{"https://api.example.com", []req{
			{"https", "api.example.com", 443, true},
			{"https", "api.example.com", 0, true}, // default port
			{"HTTPS", "API.EXAMPLE.COM.", 443, true},
			{"", "api.example.com", 443, true}, // CONNECT: host and port only
			{"http", "api.example.com", 443, false},
			{"http", "api.example.com", 80, false},
			{"https", "api.example.com", 8443, false},
			{"", "api.example.com", 80, false},
			{"https", "example.com", 443, false},
			{"https", "x.api.example.com", 443, false},
			{"https", "api.example.com.evil.com", 443, false},
			{"ftp", "api.example.com", 443, false},
			{"", "api.example.com", 0, false}, // no scheme, no port: nothing to match
			{"https", "api.example.com", 70000, false},
			{"https", "api.example.com", -1, false},
		}},
		{"http://api.example.com", []req{
			{"http", "api.example.com", 80, true},
			{"http", "api.example.com", 0, true},
			{"", "api.example.com", 80, true},
			{"https", "api.example.com", 80, false},
			{"https", "api.example.com", 443, false},
		}},
		{"api.example.com", []req{ // no scheme, no port: both schemes, any port
			{"https", "api.example.com", 443, true},
			{"http", "api.example.com", 80, true},
			{"http", "api.example.com", 8080, true},
			{"", "api.example.com", 22, true},
			{"https", "api.example.com", 0, true},
			{"ftp", "api.example.com", 21, false},
			{"https", "www.example.com", 443, false},
		}},
		{"api.example.com:8443", []req{
			{"https", "api.example.com", 8443, true},
			{"http", "api.example.com", 8443, true},
			{"", "api.example.com", 8443, true},
			{"https", "api.example.com", 443, false},
			{"https", "api.example.com", 0, false},
		}},
		{"*.example.com", []req{
			{"https", "a.example.com", 443, true},
			{"https", "a.b.example.com", 443, true},
			{"http", "A.Example.Com.", 8080, true},
			{"https", "example.com", 443, false}, // never the suffix itself
			{"https", "aexample.com", 443, false},
			{"https", ".example.com", 443, false},
			{"https", "example.com.evil.com", 443, false},
			{"https", "a.example.com.evil.com", 443, false},
		}},
		{"https://*.bücher.example", []req{
			{"https", "www.xn--bcher-kva.example", 443, true},
			{"https", "WWW.BÜCHER.example", 443, true},
			{"https", "xn--bcher-kva.example", 443, false},
		}},
		{"xn--bcher-kva.example", []req{
			{"https", "BÜCHER.example", 443, true},
			{"https", "bücher.example", 443, true},
			{"https", "bucher.example", 443, false},
		}},
		{"127.0.0.1:8080", []req{
			{"http", "127.0.0.1", 8080, true},
			{"http", "127.1", 8080, true},
			{"http", "2130706433", 8080, true},
			{"http", "0x7f000001", 8080, true},
			{"http", "0177.0.0.1", 8080, true},
			{"http", "::ffff:127.0.0.1", 8080, true},
			{"http", "[::ffff:7f00:1]", 8080, true},
			{"http", "１２７．０．０．１", 8080, true},
			{"http", "127.0.0.2", 8080, false},
			{"http", "localhost", 8080, false},
			{"http", "127.0.0.1", 80, false},
		}},
		{"0x7f.1", []req{ // rules are canonicalised the same way
			{"http", "127.0.0.1", 80, true},
		}},
		{"https://[2001:db8::1]", []req{
			{"https", "2001:db8::1", 443, true},
			{"https", "[2001:DB8:0:0::1]", 443, true},
			{"https", "2001:db8::2", 443, false},
			{"https", "fe80::1%eth0", 443, false},
		}},
		{"localhost", []req{
			{"http", "localhost", 3000, true},
			{"http", "LOCALHOST.", 3000, true},
			{"http", "127.0.0.1", 3000, false},
			{"http", "a.localhost", 3000, false},
		}},
	}
	for _, tt := range tests {
		rs := mustRules(t, tt.rule)
		for _, r := range tt.reqs {
			got, ok := rs.match(r.scheme, r.host, r.port)
			if ok != r.want {
				t.Errorf("rule %q: match(%q, %q, %d) = %v, want %v", tt.rule, r.scheme, r.host, r.port, ok, r.want)
			}
			if ok && got.Raw != tt.rule {
				t.Errorf("rule %q: match returned %+v", tt.rule, got)
			}
		}
	}
}

func TestMatchWildcardNeverMatchesIP(t *testing.T) {
	// ParseRule refuses such a rule; matching must not depend on that.
	rs := Rules{{Host: "2.3.4", Wildcard: true}}
	if _, ok := rs.match("https", "1.2.3.4", 443); ok {
		t.Error("wildcard matched an IP")
	}
}

func TestMatchOrder(t *testing.T) {
	rs := mustRules(t, "https://*.example.com", "api.example.com")
	got, ok := rs.match("https", "api.example.com", 443)
	if !ok || got.Raw != "https://*.example.com" {
		t.Errorf("match = %+v, %v; want the first rule", got, ok)
	}
	got, ok = rs.match("http", "api.example.com", 80)
	if !ok || got.Raw != "api.example.com" {
		t.Errorf("match = %+v, %v; want the second rule", got, ok)
	}
}

func TestEmptyRulesAllowNothing(t *testing.T) {
	rs := mustRules(t)
	if _, ok := rs.match("https", "example.com", 443); ok {
		t.Error("empty rules matched")
	}
	if _, err := rs.Check("https", "example.com", 443, nil); err == nil {
		t.Error("empty rules allowed a request")
	}
}

func TestParseRules(t *testing.T) {
	rs, err := ParseRules([]string{"https://a.example", "b.example:8080"})
	if err != nil || len(rs) != 2 {
		t.Fatalf("ParseRules = %v, %v", rs, err)
	}
	rs, err = ParseRules([]string{"ok.example", "ftp://x", "ok2.example", "", "*"})
	if rs != nil {
		t.Errorf("rules returned beside errors: %v", rs)
	}
	list, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T is not a list", err)
	}
	want := []struct{ path, code string }{{"[1]", CodeScheme}, {"[3]", CodeEmpty}, {"[4]", CodeTooBroad}}
	got := list.Unwrap()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d: %v", len(got), len(want), err)
	}
	for i, w := range want {
		assertCode(t, got[i], w.code)
		if p := errPath(got[i]); p != w.path {
			t.Errorf("error %d path %q, want %q", i, p, w.path)
		}
	}
	if rs, err := ParseRules(nil); err != nil || len(rs) != 0 {
		t.Errorf("ParseRules(nil) = %v, %v", rs, err)
	}
}

func TestMatchHost(t *testing.T) {
	rs := mustRules(t, "https://api.example.com:8443", "*.cdn.example.net", "http://10.0.0.5", "[2001:db8::1]:53")
	tests := []struct {
		host string
		want bool
	}{
		{"api.example.com", true},
		{"API.EXAMPLE.COM.", true},
		{"x.cdn.example.net", true},
		{"cdn.example.net", false},
		{"10.0.0.5", true},
		{"012.0.0.5", true},
		{"2001:db8::1", true},
		{"[2001:db8:0::1]", true},
		{"example.com", false},
		{"a_b.example.com", false},
	}
	for _, tt := range tests {
		if _, ok := rs.MatchHost(tt.host); ok != tt.want {
			t.Errorf("MatchHost(%q) = %v, want %v", tt.host, ok, tt.want)
		}
	}
}
