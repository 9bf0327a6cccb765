package murmur

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

type staticResolver map[string][]netip.Addr

func (s staticResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return s[host], nil
}

func TestHTTPHostSend(t *testing.T) {
	var gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data", http.StatusFound)
		case "/big":
			w.Write([]byte(strings.Repeat("x", 2048)))
		default:
			gotAuth = r.Header.Get("X-Api-Key")
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Echo", "1")
			w.Write(append([]byte(r.Method+" "), body...))
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port := u.Port()
	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + port, "api.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := wasm.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	var denials []string
	h := &Outgoing{Capsule: "cap", Rules: rules, Metrics: m, MaxRequestBody: 1024, MaxResponseBody: 1024,
		Resolver:    staticResolver{"api.example.com": {netip.MustParseAddr("127.0.0.1")}},
		Credentials: []Credential{{Endpoint: srv.URL + "/v1", Headers: [][2]string{{"X-Api-Key", "sk-sentinel"}}}},
		OnDeny:      func(who, host string, port int, err error) { denials = append(denials, who+" "+host) }}
	h.Init()
	ctx := context.Background()

	tests := []struct {
		name, method, url string
		body              string
		wantErr           string // substring; "" = success
		wantStatus        uint16
		wantBody          string
		denied            bool
	}{
		{"allowed", "POST", srv.URL + "/v1/messages", "hi", "", 200, "POST hi", false},
		{"allowed, no credential outside endpoint", "GET", srv.URL + "/other", "", "", 200, "GET ", false},
		{"redirect not followed", "GET", srv.URL + "/redirect", "", "", 302, "", false},
		{"host not allowed", "GET", "http://evil.example.com/", "", "network policy: evil.example.com:80 not in capabilities.network.allow", 0, "", true},
		{"loopback other port", "GET", "http://127.0.0.1:1/", "", "network policy: 127.0.0.1:1 not in", 0, "", true},
		{"metadata", "GET", "http://169.254.169.254/latest", "", "network policy: 169.254.169.254:80 not in", 0, "", true},
		{"mapped v6 loopback", "GET", "http://[::ffff:127.0.0.1]:1/", "", "network policy: 127.0.0.1:1 not in", 0, "", true},
		{"hex loopback", "GET", "http://0x7f000001:1/", "", "not in capabilities.network.allow", 0, "", true},
		{"decimal loopback", "GET", "http://2130706433:1/", "", "not in capabilities.network.allow", 0, "", true},
		{"allowed name resolving to loopback", "GET", "https://api.example.com/", "", "127.0.0.1", 0, "", true},
		{"request body cap", "POST", srv.URL + "/", strings.Repeat("b", 1025), "over the 1024-byte cap", 0, "", false},
		{"response body cap", "GET", srv.URL + "/big", "", "over the 1024-byte cap", 0, "", false},
		{"not a url", "GET", "ftp://x/", "", "invalid url", 0, "", false},
		{"userinfo", "GET", "http://u:p@127.0.0.1:" + port + "/", "", "userinfo", 0, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := testutil.ToFloat64(m.Denied.WithLabelValues("cap", "guest"))
			resp, err := h.Send(ctx, "tool-x", OutgoingRequest{Method: tt.method, URL: tt.url, Body: []byte(tt.body)})
			after := testutil.ToFloat64(m.Denied.WithLabelValues("cap", "guest"))
			if tt.denied != (after == before+1) {
				t.Errorf("denied counter went %v → %v", before, after)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if resp.Status != tt.wantStatus || (tt.wantBody != "" && string(resp.Body) != tt.wantBody) {
				t.Fatalf("resp = %d %q", resp.Status, resp.Body)
			}
		})
	}
	if gotAuth != "" {
		t.Errorf("credential leaked outside its endpoint: %q", gotAuth)
	}
	if len(denials) != 7 {
		t.Errorf("OnDeny calls = %v", denials)
	}
	// The credential reached the endpoint it is for.
	if _, err := h.Send(ctx, "d", OutgoingRequest{Method: "GET", URL: srv.URL + "/v1/x"}); err != nil || gotAuth != "sk-sentinel" {
		t.Errorf("credential not added: %q %v", gotAuth, err)
	}
}

// TestProviderRetries: a credentialed provider endpoint answering 429/5xx is retried with
// backoff (on a fake clock: no real sleeps); other hosts are not retried.
func TestProviderRetries(t *testing.T) {
	var (
		mu       sync.Mutex
		hits     int
		statuses []int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		st := statuses[min(hits, len(statuses)-1)]
		hits++
		mu.Unlock()
		if st == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "2")
		}
		w.WriteHeader(st)
		io.WriteString(w, http.StatusText(st))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, _ := netpolicy.ParseRules([]string{"127.0.0.1:" + u.Port()})
	tests := []struct {
		name     string
		statuses []int
		path     string
		want     uint16
		hits     int
		waits    int
	}{
		{"500 three times fails after the retries", []int{500}, "/v1/messages", 500, 3, 2},
		{"one 429 then success", []int{429, 200}, "/v1/messages", 200, 2, 1},
		{"503 then 502 then success", []int{503, 502, 200}, "/v1/messages", 200, 3, 2},
		{"4xx is not retried", []int{400}, "/v1/messages", 400, 1, 0},
		{"no retries outside the provider endpoint", []int{500}, "/elsewhere", 500, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			hits, statuses = 0, tt.statuses
			mu.Unlock()
			var waits []time.Duration
			h := &Outgoing{Capsule: "cap", Rules: rules,
				Credentials: []Credential{{Endpoint: srv.URL + "/v1", Headers: [][2]string{{"x-api-key", "k"}}}},
				Sleep:       func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
			h.Init()
			resp, err := h.Send(context.Background(), "driver", OutgoingRequest{Method: "POST", URL: srv.URL + tt.path, Body: []byte("{}")})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			got := hits
			mu.Unlock()
			if resp.Status != tt.want || got != tt.hits || len(waits) != tt.waits {
				t.Fatalf("status %d after %d hits and waits %v", resp.Status, got, waits)
			}
			for i, w := range waits {
				if tt.statuses[min(i, len(tt.statuses)-1)] == http.StatusTooManyRequests {
					if w != 2*time.Second {
						t.Errorf("Retry-After not honoured: %v", w)
					}
				} else if lo, hi := 250*time.Millisecond<<i, 750*time.Millisecond<<i; w < lo || w > hi {
					t.Errorf("wait %d = %v, want within [%v, %v]", i, w, lo, hi)
				}
			}
		})
	}
}

// TestHTTPHostOpen reads a body as it arrives: the first bytes come back while the server
// still holds the rest; the body cap counts everything read; Open keeps Send's policy.
func TestHTTPHostOpen(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		switch r.URL.Path {
		case "/held":
			w.Write([]byte("first"))
			w.(http.Flusher).Flush()
			<-release
			w.Write([]byte("second"))
		case "/big":
			w.Write([]byte(strings.Repeat("x", 20)))
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	h := &Outgoing{Capsule: "cap", Rules: rules, MaxResponseBody: 16}
	h.Init()
	ctx := context.Background()

	s, err := h.Open(ctx, "drv", OutgoingRequest{URL: srv.URL + "/held"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Status != 200 || !slicesContain(s.Headers, [2]string{"content-type", "text/event-stream"}) {
		t.Errorf("head %d %v", s.Status, s.Headers)
	}
	if b, err := s.Read(100); err != nil || string(b) != "first" {
		t.Fatalf("first read %q %v", b, err)
	}
	close(release)
	var rest []byte
	for {
		b, err := s.Read(100)
		if err != nil {
			t.Fatalf("reading: %v (after %q)", err, rest)
		}
		if len(b) == 0 {
			break
		}
		rest = append(rest, b...)
	}
	if string(rest) != "second" {
		t.Errorf("the rest %q", rest)
	}
	s.Close()

	for _, tt := range []struct{ name, url, want string }{
		{"over the cap", srv.URL + "/big", "over the 16-byte cap"},
		{"denied", "http://example.com/", "network policy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := h.Open(ctx, "drv", OutgoingRequest{URL: tt.url})
			for err == nil {
				var b []byte
				if b, err = s.Read(3); err == nil && len(b) == 0 {
					t.Fatal("the body ended without an error")
				}
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func slicesContain(hs [][2]string, kv [2]string) bool {
	for _, h := range hs {
		if h == kv {
			return true
		}
	}
	return false
}
