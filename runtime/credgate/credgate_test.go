package credgate

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

const sentinel = "sk-sentinel-only-the-provider-sees-this"

// provider is a stand-in model provider on 127.0.0.1 that records what reaches it and
// streams its answer in two parts, the second only once release is closed.
type provider struct {
	srv     *httptest.Server
	mu      sync.Mutex
	seen    []http.Header
	paths   []string
	release chan struct{}
}

func newProvider(t *testing.T) *provider {
	p := &provider{release: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		p.paths = append(p.paths, r.URL.RequestURI())
		p.mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: first\ndata: {}\n\n")
		w.(http.Flusher).Flush()
		<-p.release
		io.WriteString(w, "event: last\ndata: {}\n\n")
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// gateway starts a gateway for p whose outgoing rules allow p's port only when allow.
func gateway(t *testing.T, p *provider, allow bool) *Server {
	t.Helper()
	u, _ := url.Parse(p.srv.URL)
	rule := "127.0.0.1:1"
	if allow {
		rule = "127.0.0.1:" + u.Port()
	}
	rules, err := netpolicy.ParseRules([]string{rule})
	if err != nil {
		t.Fatal(err)
	}
	out := &murmur.Outgoing{Capsule: "cap", Rules: rules,
		Credentials: []murmur.Credential{{Endpoint: p.srv.URL, Headers: [][2]string{{"X-Api-Key", sentinel}}}}}
	out.Init()
	s, err := Start(Config{Endpoint: p.srv.URL, Out: out, Who: "claude-code", MaxBody: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestGatewayForwardsWithTheKey: a harness request carrying the run's placeholder
// reaches the provider with the real key in its place and nothing of the placeholder,
// and the answer streams back part by part.
func TestGatewayForwardsWithTheKey(t *testing.T) {
	p := newProvider(t)
	s := gateway(t, p, true)
	req, _ := http.NewRequest("POST", s.URL()+"/v1/messages?beta=true", strings.NewReader(`{"stream":true}`))
	req.Header.Set("X-Api-Key", s.Placeholder())
	req.Header.Set("Authorization", "Bearer "+s.Placeholder())
	req.Header.Set("X-Smuggled", "key="+s.Placeholder())
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	first, err := r.ReadString('\n')
	if err != nil || first != "event: first\n" {
		t.Fatalf("first line %q, %v", first, err)
	}
	close(p.release) // the provider sends the rest only now: the first part came alone
	rest, _ := io.ReadAll(r)
	if !strings.Contains(string(rest), "event: last") {
		t.Errorf("rest %q", rest)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.seen) != 1 || p.paths[0] != "/v1/messages?beta=true" {
		t.Fatalf("provider saw %v", p.paths)
	}
	h := p.seen[0]
	if h.Get("X-Api-Key") != sentinel || h.Get("Authorization") != "" || h.Get("X-Smuggled") != "" || h.Get("Anthropic-Version") != "2023-06-01" {
		t.Errorf("provider headers %v", h)
	}
	for k, vs := range h {
		for _, v := range vs {
			if strings.Contains(v, s.Placeholder()) {
				t.Errorf("the placeholder reached the provider in %s", k)
			}
		}
	}
}

// TestGatewayRefuses: what is not a request of this run's harness to its provider is
// answered by the gateway itself, and the provider never hears of it.
func TestGatewayRefuses(t *testing.T) {
	tests := []struct {
		name, method, path, key, body string
		allow                         bool
		status                        int
	}{
		{"no key", "POST", "/v1/messages", "", "{}", true, http.StatusUnauthorized},
		{"another key", "POST", "/v1/messages", "sk-guess", "{}", true, http.StatusUnauthorized},
		{"a path climbing out", "POST", "/v1/../admin", "placeholder", "{}", true, http.StatusBadRequest},
		{"a method not forwarded", "DELETE", "/v1/messages", "placeholder", "", true, http.StatusMethodNotAllowed},
		{"a body over the cap", "POST", "/v1/messages", "placeholder", strings.Repeat("x", 2<<10), true, http.StatusRequestEntityTooLarge},
		{"an endpoint the rules deny", "POST", "/v1/messages", "placeholder", "{}", false, http.StatusBadGateway},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newProvider(t)
			close(p.release)
			s := gateway(t, p, tt.allow)
			key := tt.key
			if key == "placeholder" {
				key = s.Placeholder()
			}
			// Written by hand: an HTTP client would clean the path first.
			c, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.method+" "+tt.path+" HTTP/1.1\r\nHost: x\r\nX-Api-Key: "+key+"\r\nContent-Length: "+strconv.Itoa(len(tt.body))+"\r\nConnection: close\r\n\r\n"+tt.body)
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			msg, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(string(msg), "capsulegate_gateway_error") {
				t.Errorf("status %d %s, want %d", resp.StatusCode, msg, tt.status)
			}
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.seen) != 0 {
				t.Errorf("the provider was called: %v", p.paths)
			}
		})
	}
}
