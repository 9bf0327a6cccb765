package netpolicy

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// FuzzParseRule checks that parsing never panics, refusals are well-formed, and an accepted
// rule is canonical: String round-trips, hosts are lower-case ASCII, and it matches itself.
func FuzzParseRule(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if r.Raw != s {
			t.Fatalf("Raw = %q, want %q", r.Raw, s)
		}
		checkCanonicalRule(t, r)

		str := r.String()
		r2, err := ParseRule(str)
		if err != nil {
			t.Fatalf("ParseRule(%q).String() = %q does not parse: %v", s, str, err)
		}
		r2.Raw = r.Raw
		if r2 != r {
			t.Fatalf("round trip of %q via %q: got %+v, want %+v", s, str, r2, r)
		}
		if str2 := r2.String(); str2 != str {
			t.Fatalf("String not stable: %q then %q", str, str2)
		}

		scheme, port := r.Scheme, r.Port
		if port == 0 {
			port = 12345
		}
		host := r.Host
		if r.Wildcard {
			host = "x." + host
		}
		got, ok := Rules{r}.match(scheme, host, port)
		if !ok || got != r {
			t.Fatalf("rule %q does not match its own host %q:%d", s, host, port)
		}
		if r.Wildcard {
			if _, ok := (Rules{r}).match(scheme, r.Host, port); ok {
				t.Fatalf("wildcard %q matches its own suffix", s)
			}
		}
	})
}

// FuzzCanonicalHost checks canonical hosts are fixed points, and that the ASCII fast path
// agrees with the IDNA profile.
func FuzzCanonicalHost(f *testing.F) {
	for _, s := range []string{"example.com", "EXAMPLE.com.", "BÜCHER.example", "0x7f.1", "127.1", "::ffff:7f00:1",
		"[::1]", "fe80::1%eth0", "a..b", "xn--bcher-kva.example", "ab--cd.example", "-a.example", "１２７．０．０．１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if fast, ok := fastASCII(s); ok {
			slow, err := idnaProfile.ToASCII(s)
			if err != nil || strings.TrimSuffix(slow, ".") != fast {
				t.Fatalf("fast path %q, IDNA %q, %v", fast, slow, err)
			}
		}
		name, ip, err := CanonicalHost(s)
		if err != nil {
			checkRefusal(t, err)
			if _, ok := parseIP(s); ok {
				t.Fatalf("parseIP accepts %q, CanonicalHost refuses it", s)
			}
			return
		}
		checkCanonicalHost(t, name, ip)
		name2, ip2, err := CanonicalHost(name)
		if err != nil || name2 != name || ip2 != ip {
			t.Fatalf("CanonicalHost(%q) = %q, %v; again: %q, %v, %v", s, name, ip, name2, ip2, err)
		}
		if got, ok := parseIP(s); ok != ip.IsValid() || got != ip {
			t.Fatalf("parseIP(%q) = %v, %v; CanonicalHost gave %v", s, got, ok, ip)
		}
	})
}

func checkRefusal(t *testing.T, err error) {
	t.Helper()
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T is not *errs.Error: %v", err, err)
	}
	if e.Part != Part || !strings.HasPrefix(e.Code, "E-NET-") || e.Msg == "" || e.Fix == "" {
		t.Fatalf("malformed refusal %+v", e)
	}
}

func checkCanonicalRule(t *testing.T, r Rule) {
	t.Helper()
	switch r.Scheme {
	case "":
		if r.Port < 0 || r.Port > 65535 {
			t.Fatalf("port %d", r.Port)
		}
	case "http", "https":
		if r.Port < 1 || r.Port > 65535 {
			t.Fatalf("port %d with scheme %s", r.Port, r.Scheme)
		}
	default:
		t.Fatalf("scheme %q", r.Scheme)
	}
	if r.Wildcard && r.IP.IsValid() {
		t.Fatalf("wildcard over IP %v", r.IP)
	}
	checkCanonicalHost(t, r.Host, r.IP)
}

func checkCanonicalHost(t *testing.T, name string, ip netip.Addr) {
	t.Helper()
	if name == "" {
		t.Fatal("empty canonical host")
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 0x80 || c >= 'A' && c <= 'Z' {
			t.Fatalf("canonical host %q is not lower-case ASCII", name)
		}
	}
	if ip.IsValid() {
		if ip.Zone() != "" || ip.Is4In6() || name != ip.String() {
			t.Fatalf("canonical host %q for IP %v", name, ip)
		}
		return
	}
	if strings.HasSuffix(name, ".") || len(name) > maxName || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-.") != "" {
		t.Fatalf("canonical name %q", name)
	}
}
