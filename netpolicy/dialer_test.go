package netpolicy

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// fakeResolver answers from a table, as a DNS server under an attacker's control might.
type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := f[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "not found", Name: host, IsNotFound: true}
}

func TestDialer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	res := fakeResolver{
		"api.example.com":   {netip.MustParseAddr("127.0.0.1")},                                       // public name, private answer
		"mixed.example.com": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("127.0.0.1")}, // one bad answer poisons all
		"localhost":         {netip.MustParseAddr("127.0.0.1")},
	}
	tests := []struct {
		name  string
		rules []string
		host  string
		code  string // "" = connects
	}{
		{"ip rule names the loopback address", []string{"127.0.0.1:" + port}, "127.0.0.1", ""},
		{"localhost rule reaches loopback", []string{"localhost:" + port}, "localhost", ""},
		{"no rule", []string{"other.example.com"}, "127.0.0.1", CodeNotAllowed},
		{"wrong port", []string{"127.0.0.1:1"}, "127.0.0.1", CodeNotAllowed},
		{"name resolving to loopback", []string{"api.example.com"}, "api.example.com", CodeRestricted},
		{"one restricted answer among public ones", []string{"mixed.example.com"}, "mixed.example.com", CodeRestricted},
		{"metadata literal", []string{"api.example.com"}, "169.254.169.254", CodeNotAllowed},
		{"hex spelling of loopback without a rule", []string{"api.example.com"}, "0x7f000001", CodeNotAllowed},
		{"decimal spelling matches the ip rule", []string{"127.0.0.1:" + port}, "2130706433", ""},
		{"mapped v6 matches the ip rule", []string{"127.0.0.1:" + port}, "[::ffff:127.0.0.1]", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := ParseRules(tt.rules)
			if err != nil {
				t.Fatal(err)
			}
			d := &Dialer{Rules: rules, Resolver: res}
			host := strings.Trim(tt.host, "[]")
			if strings.Contains(host, ":") {
				host = "[" + host + "]"
			}
			c, err := d.DialContext(context.Background(), "tcp", host+":"+port)
			if tt.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				c.Close()
				return
			}
			if errs.Code(err) != tt.code {
				t.Fatalf("want %s, got %v", tt.code, err)
			}
		})
	}
}

func TestTransportIgnoresEnvironmentProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "direct") }))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	u, _ := url.Parse(srv.URL)
	rules, _ := ParseRules([]string{"127.0.0.1:" + u.Port()})
	client := &http.Client{Transport: NewTransport(&Dialer{Rules: rules})}
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "direct" {
		t.Fatalf("body = %q", body)
	}
	_, err = client.Get(fmt.Sprintf("http://127.0.0.2:%s/", u.Port()))
	if errs.Code(err) != CodeNotAllowed {
		t.Fatalf("want %s through the transport, got %v", CodeNotAllowed, err)
	}
}

func TestDialerCountsTraffic(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d", len(b))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		body int
	}{{"empty body", 0}, {"one kilobyte", 1 << 10}, {"a megabyte", 1 << 20}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := &Traffic{}
			client := &http.Client{Transport: NewTransport(&Dialer{Rules: rules, Traffic: tr})}
			defer client.CloseIdleConnections()
			resp, err := client.Post(srv.URL, "text/plain", strings.NewReader(strings.Repeat("x", tt.body)))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(got) != fmt.Sprint(tt.body) {
				t.Fatalf("answer %q", got)
			}
			// The request line, headers and body went out; the status, headers and body came back.
			if tr.Sent() <= int64(tt.body) || tr.Received() <= int64(len(got)) {
				t.Errorf("sent %d, received %d: want more than the body (%d) and the answer (%d)", tr.Sent(), tr.Received(), tt.body, len(got))
			}
			if tr.Sent() > int64(tt.body)+4096 || tr.Received() > 4096 {
				t.Errorf("sent %d, received %d: far more than one request and its answer", tr.Sent(), tr.Received())
			}
		})
	}
}
