package a2a

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestRequestOrigin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		target  string // the request as the handler sees it
		orig    string // the path the client sent ("" = none given)
		tls     bool
		headers map[string]string
		trusted bool
		want    string
	}{
		{"plain", "/agents/x/", "", false, nil, false, "http://gw.test/agents/x/"},
		{"tls", "/agents/x/", "", true, nil, false, "https://gw.test/agents/x/"},
		{"stripped route", "/", "/agents/x/", false, nil, false, "http://gw.test/agents/x/"},
		{"escaped path kept", "/", "/agents/a%2Fb/", false, nil, false, "http://gw.test/agents/a%2Fb/"},
		{"untrusted forwarded headers", "/", "/x/", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example", "X-Forwarded-Prefix": "/evil"}, false,
			"http://gw.test/x/"},
		{"trusted proxy", "/", "/x/", false,
			map[string]string{"X-Forwarded-Proto": "https", "X-Forwarded-Host": "agents.example.com", "X-Forwarded-Prefix": "/edge/"}, true,
			"https://agents.example.com/edge/x/"},
		{"first of a list", "/x/", "", false,
			map[string]string{"X-Forwarded-Proto": "https, http", "X-Forwarded-Host": "a.example:8443, b.example"}, true,
			"https://a.example:8443/x/"},
		{"bad values ignored", "/x/", "", false,
			map[string]string{"X-Forwarded-Proto": "gopher", "X-Forwarded-Host": "a.example/path", "X-Forwarded-Prefix": "no-slash"}, true,
			"http://gw.test/x/"},
		{"host with userinfo ignored", "/x/", "", false,
			map[string]string{"X-Forwarded-Host": "user@evil.example"}, true, "http://gw.test/x/"},
		{"protocol-relative prefix ignored", "/x/", "", false,
			map[string]string{"X-Forwarded-Prefix": "//evil.example"}, true, "http://gw.test/x/"},
		{"prefix with a query ignored", "/x/", "", false,
			map[string]string{"X-Forwarded-Prefix": "/p?q=1"}, true, "http://gw.test/x/"},
		{"ipv6 host", "/x/", "", false, map[string]string{"X-Forwarded-Host": "[2001:db8::1]:8443"}, true, "http://[2001:db8::1]:8443/x/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "http://gw.test"+tc.target, nil)
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			var orig *url.URL
			if tc.orig != "" {
				orig, _ = url.Parse(tc.orig)
			}
			if got := RequestOrigin(r, orig, tc.trusted).String(); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestEndpointBehindRoutes serves the handler the way a stripping route does (the
// handler sees "/…", the client sent "/agents/x/…") and checks the URLs it names.
func TestEndpointBehindRoutes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		publicURL string
		client    string // the path the client sends
		seen      string // the path the handler sees
		want      string
	}{
		{"stripped card", "", "/agents/x/.well-known/agent-card.json", "/.well-known/agent-card.json", "http://gw.test/agents/x/"},
		{"stripped old card", "", "/agents/x/.well-known/agent.json", "/.well-known/agent.json", "http://gw.test/agents/x/"},
		{"rewritten to the card", "", "/card", "/.well-known/agent-card.json", "http://gw.test/"},
		{"public URL wins", "https://agents.example.com/hello/", "/agents/x/.well-known/agent-card.json", "/.well-known/agent-card.json", "https://agents.example.com/hello/"},
		{"public URL without a path", "https://agents.example.com", "/.well-known/agent-card.json", "/.well-known/agent-card.json", "https://agents.example.com/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := tc.client
			h, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard(), PublicURL: tc.publicURL,
				Origin: func(r *http.Request) *url.URL { return RequestOrigin(r, &url.URL{Path: client}, false) }})
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "http://gw.test"+tc.seen, nil)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if !strings.Contains(w.Body.String(), `"url":"`+tc.want+`"`) {
				t.Errorf("card %s, want url %s", w.Body.String(), tc.want)
			}
		})
	}
	// Job.URL (MURMUR_CAPSULE_URL) is the POST path as the client sent it.
	exec := &echoExec{}
	h, err := NewHandler(Config{Executor: exec, Card: testCard(),
		Origin: func(r *http.Request) *url.URL { return RequestOrigin(r, &url.URL{Path: "/agents/x"}, false) }})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "http://gw.test/", strings.NewReader(string(request("message/send", map[string]any{"message": msg03("hi")}))))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	exec.mu.Lock()
	defer exec.mu.Unlock()
	if len(exec.jobs) != 1 || exec.jobs[0].URL != "http://gw.test/agents/x/" {
		t.Errorf("jobs %+v: %s", exec.jobs, w.Body)
	}
}

func TestPublicURLRefused(t *testing.T) {
	for _, bad := range []string{"agents.example.com", "ftp://x.example/", "https://x.example/?a=1", "https://u:p@x.example/", "https://x.example/#f", "https:///path"} {
		_, err := NewHandler(Config{Executor: &echoExec{}, Card: testCard(), PublicURL: bad})
		if err == nil || !strings.Contains(err.Error(), CodePublicURL) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}
