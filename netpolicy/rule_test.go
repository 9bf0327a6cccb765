package netpolicy

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

func TestParseRuleValid(t *testing.T) {
	v4 := netip.MustParseAddr
	tests := []struct {
		in   string
		want Rule
		str  string
	}{
		{"https://api.example.com", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"http://api.example.com", Rule{Scheme: "http", Host: "api.example.com", Port: 80}, "http://api.example.com"},
		{"https://api.example.com:8443", Rule{Scheme: "https", Host: "api.example.com", Port: 8443}, "https://api.example.com:8443"},
		{"http://api.example.com:443", Rule{Scheme: "http", Host: "api.example.com", Port: 443}, "http://api.example.com:443"},
		{"https://api.example.com:443", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"https://api.example.com:00443", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"api.example.com", Rule{Host: "api.example.com"}, "api.example.com"},
		{"api.example.com:8080", Rule{Host: "api.example.com", Port: 8080}, "api.example.com:8080"},
		{"HTTPS://API.Example.COM", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"https://api.example.com/", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"api.example.com/", Rule{Host: "api.example.com"}, "api.example.com"},
		{"https://api.example.com.", Rule{Scheme: "https", Host: "api.example.com", Port: 443}, "https://api.example.com"},
		{"localhost", Rule{Host: "localhost"}, "localhost"},
		{"localhost:1", Rule{Host: "localhost", Port: 1}, "localhost:1"},
		{"localhost:65535", Rule{Host: "localhost", Port: 65535}, "localhost:65535"},
		{"http:8080", Rule{Host: "http", Port: 8080}, "http:8080"}, // a host named "http"
		{"*.example.com", Rule{Host: "example.com", Wildcard: true}, "*.example.com"},
		{"https://*.example.com:8443", Rule{Scheme: "https", Host: "example.com", Wildcard: true, Port: 8443}, "https://*.example.com:8443"},
		{"*.github.io", Rule{Host: "github.io", Wildcard: true}, "*.github.io"}, // private-section suffix: allowed
		{"*.example.co.uk", Rule{Host: "example.co.uk", Wildcard: true}, "*.example.co.uk"},
		{"BÜCHER.example", Rule{Host: "xn--bcher-kva.example"}, "xn--bcher-kva.example"},
		{"https://*.bücher.example", Rule{Scheme: "https", Host: "xn--bcher-kva.example", Wildcard: true, Port: 443}, "https://*.xn--bcher-kva.example"},
		{"192.0.2.10", Rule{Host: "192.0.2.10", IP: v4("192.0.2.10")}, "192.0.2.10"},
		{"https://127.1:8443", Rule{Scheme: "https", Host: "127.0.0.1", IP: v4("127.0.0.1"), Port: 8443}, "https://127.0.0.1:8443"},
		{"0x7f000001:80", Rule{Host: "127.0.0.1", IP: v4("127.0.0.1"), Port: 80}, "127.0.0.1:80"},
		{"[::1]", Rule{Host: "::1", IP: v4("::1")}, "[::1]"},
		{"[::1]:8443", Rule{Host: "::1", IP: v4("::1"), Port: 8443}, "[::1]:8443"},
		{"https://[2001:DB8::0:1]", Rule{Scheme: "https", Host: "2001:db8::1", IP: v4("2001:db8::1"), Port: 443}, "https://[2001:db8::1]"},
		{"[::ffff:127.0.0.1]:80", Rule{Host: "127.0.0.1", IP: v4("127.0.0.1"), Port: 80}, "127.0.0.1:80"},
		{"http://[::ffff:7f00:1]", Rule{Scheme: "http", Host: "127.0.0.1", IP: v4("127.0.0.1"), Port: 80}, "http://127.0.0.1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRule(tt.in)
			if err != nil {
				t.Fatalf("ParseRule(%q): %v", tt.in, err)
			}
			tt.want.Raw = tt.in
			if got != tt.want {
				t.Errorf("ParseRule(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.str {
				t.Errorf("String() = %q, want %q", s, tt.str)
			}
		})
	}
}

func TestParseRuleInvalid(t *testing.T) {
	tests := []struct{ in, code string }{
		{"", CodeEmpty},
		{" example.com", CodeCharacter},
		{"example.com ", CodeCharacter},
		{"exa mple.com", CodeCharacter},
		{"example.com\n", CodeCharacter},
		{"example\x00.com", CodeCharacter},
		{"example.com\u00a0", CodeCharacter},
		{"\xffexample.com", CodeCharacter},
		{"ftp://example.com", CodeScheme},
		{"ws://example.com", CodeScheme},
		{"file:///etc/passwd", CodeScheme},
		{"://example.com", CodeScheme},
		{"https:example.com", CodeScheme},
		{"https:", CodeScheme},
		{"https:443/x", CodePath},
		{"https:x/", CodeScheme},
		{"HTTP:/example.com", CodeScheme},
		{"https://user@example.com", CodeUserinfo},
		{"https://user:pass@example.com", CodeUserinfo},
		{"https://allowed.com@evil.com", CodeUserinfo},
		{"user@example.com", CodeUserinfo},
		{"https://example.com/path", CodePath},
		{"https://example.com//", CodePath},
		{"example.com/v1/", CodePath},
		{"//example.com", CodePath},
		{"/", CodeHost},
		{"https://example.com?x=1", CodeQuery},
		{"https://example.com/?x=1", CodeQuery},
		{"https://example.com#top", CodeFragment},
		{"https://example.com/#top", CodeFragment},
		{"example.com:", CodePort},
		{"example.com:0", CodePort},
		{"example.com:65536", CodePort},
		{"example.com:99999999999999999999", CodePort},
		{"example.com:-1", CodePort},
		{"example.com:+80", CodePort},
		{"example.com:0x50", CodePort},
		{"example.com:http", CodePort},
		{"https://example.com:", CodePort},
		{"[::1]:", CodePort},
		{"[::1]:0", CodePort},
		{"https://", CodeHost},
		{"https:///", CodeHost},
		{":443", CodeHost},
		{".", CodeHost},
		{"example..com", CodeHost},
		{".example.com", CodeHost},
		{"example.com..", CodeHost},
		{"exa_mple.com", CodeHost},
		{"exa%41mple.com", CodeHost},
		{"-example.com", CodeHost},
		{"example-.com", CodeHost},
		{"ex--ample.com", CodeHost},
		{"xn--zz.example", CodeHost},
		{"xn--abc.example", CodeHost},
		{"exa\u200dmple.com", CodeHost},
		{"example.com\\", CodeHost},
		{strings.Repeat("a", 64) + ".example.com", CodeHost},
		{strings.Repeat("abcdefghi.", 26) + "com", CodeHost},
		{"256.1.1.1", CodeNumericHost},
		{"1.2.3.4.5", CodeNumericHost},
		{"0x1ffffffff", CodeNumericHost},
		{"4294967296", CodeNumericHost},
		{"1.2.3.09", CodeNumericHost},
		{"1.2.65536", CodeNumericHost},
		{"1.16777216", CodeNumericHost},
		{"foo.123", CodeNumericHost},
		{"example.0x1", CodeNumericHost},
		{"1..1", CodeNumericHost},
		{"[::1", CodeIPv6},
		{"[::1]x", CodeIPv6},
		{"[::1]443", CodeIPv6},
		{"[1.2.3.4]", CodeIPv6},
		{"[example.com]", CodeIPv6},
		{"[::g]", CodeIPv6},
		{"[]", CodeIPv6},
		{"::1", CodeIPv6Brackets},
		{"2001:db8::1", CodeIPv6Brackets},
		{"https://2001:db8::1:443", CodeIPv6Brackets},
		{"[fe80::1%eth0]", CodeZone},
		{"[fe80::1%25eth0]:443", CodeZone},
		{"*example.com", CodeWildcard},
		{"a.*.example.com", CodeWildcard},
		{"*.*.example.com", CodeWildcard},
		{"**.example.com", CodeWildcard},
		{"ex*ample.com", CodeWildcard},
		{"*.", CodeWildcard},
		{"*.[::1]", CodeWildcard},
		{"*.1.2.3", CodeWildcard},
		{"*.192.0.2.1", CodeWildcard},
		{"0.0.0.0", CodeUnspecified},
		{"0", CodeUnspecified},
		{"https://0x0:443", CodeUnspecified},
		{"0.1.2.3:80", CodeUnspecified},
		{"[::]", CodeUnspecified},
		{"[::ffff:0.0.0.0]:80", CodeUnspecified},
		{"*", CodeTooBroad},
		{"*:443", CodeTooBroad},
		{"https://*", CodeTooBroad},
		{"*.com", CodeTooBroad},
		{"*.localhost", CodeTooBroad},
		{"*.co.uk", CodeTooBroad},
		{"*.CO.UK.", CodeTooBroad},
		{"https://*.公司.cn", CodeTooBroad},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseRule(tt.in)
			assertCode(t, err, tt.code)
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("network rule %q", short(tt.in))) {
				t.Errorf("error %q does not name the rule", err)
			}
		})
	}
}

// assertCode checks err is an *errs.Error of this package with the given code, a message
// and a fix.
func assertCode(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	var e *errs.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %T %v is not *errs.Error", err, err)
	}
	if e.Code != code || e.Part != Part || e.Msg == "" || e.Fix == "" {
		t.Errorf("got code %s part %q msg %q fix %q, want code %s: %v", e.Code, e.Part, e.Msg, e.Fix, code, err)
	}
}

func errPath(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Path
	}
	return ""
}
