package netpolicy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/syncbuf"
)

// lockedBuffer is a bytes.Buffer safe for the proxy's concurrent log writes.
type lockedBuffer = syncbuf.Buffer

// proxyFixture is a proxy serving on 127.0.0.1 with a pinning resolver over a fake upstream.
type proxyFixture struct {
	p       *Proxy
	addr    string   // host:port of the proxy
	url     *url.URL // http://addr
	denied  *denials
	log     *lockedBuffer
	traffic *Traffic // what the proxy exchanged with the hosts it reached
}

// startProxy serves a proxy until the test ends. In rules, "{proxy}" stands for the
// proxy's port, and each key of vars for its value; zone is what upstream DNS knows.
func startProxy(t testing.TB, zone []string, vars map[string]string, rules ...string) *proxyFixture {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pairs := []string{"{proxy}", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)}
	for k, v := range vars {
		pairs = append(pairs, k, v)
	}
	rep := strings.NewReplacer(pairs...)
	for i := range rules {
		rules[i] = rep.Replace(rules[i])
	}
	up := startFakeDNS(t, zoneScript(zone))
	f := &proxyFixture{addr: l.Addr().String(), denied: &denials{}, log: &lockedBuffer{}, traffic: &Traffic{}}
	f.url = &url.URL{Scheme: "http", Host: f.addr}
	res, err := NewResolver(ResolverConfig{Rules: mustRules(t, rules...), Upstream: up.addr})
	if err != nil {
		t.Fatal(err)
	}
	res.timeout = 2 * time.Second
	f.p, err = NewProxy(ProxyConfig{
		Rules:    mustRules(t, rules...),
		Resolver: res,
		OnDeny:   f.denied.add,
		Traffic:  f.traffic,
		Logger:   slog.New(slog.NewTextHandler(f.log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.p.Serve(l) }()
	t.Cleanup(func() {
		if err := f.p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return f
}

// client returns an HTTP client using the proxy, trusting roots, never following redirects.
func (f *proxyFixture) client(t testing.TB, roots *x509.CertPool, serverName string) *http.Client {
	tr := &http.Transport{
		Proxy:           http.ProxyURL(f.url),
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       30 * time.Second,
	}
}

// raw sends a request written by hand to the proxy and returns the response, its body,
// and the connection with its reader, for tunnels.
func (f *proxyFixture) raw(t testing.TB, req string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodConnect && resp.StatusCode == http.StatusOK {
		return resp, "", c, br // the rest of the stream is the tunnel
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body), c, br
}

// checkDenial checks that the proxy told OnDeny and the log of exactly one refusal.
func (f *proxyFixture) checkDenial(t testing.TB, host string, port int, code string) {
	t.Helper()
	dl := f.denied.get()
	if len(dl) != 1 {
		t.Fatalf("%d denials, want 1: %v", len(dl), dl)
	}
	d := dl[0]
	var e *errs.Error
	if d.Source != SourceProxy || d.Host != host || d.Port != port || !errors.As(d.Err, &e) || e.Code != code {
		t.Errorf("denial %+v, want proxy %s:%d %s", d, host, port, code)
	}
	if log := f.log.String(); !strings.Contains(log, "network denied") || !strings.Contains(log, code) {
		t.Errorf("refusal not logged: %q", log)
	}
}

// origin is a test server recording the headers it got.
type origin struct {
	*httptest.Server
	port string

	mu     sync.Mutex
	header http.Header
	hits   int
}

func startOrigin(t testing.TB) *origin {
	o := &origin{}
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://elsewhere.invalid/next", http.StatusFound)
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(w, r.Body)
	})
	mux.HandleFunc("/hop", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-Kept", "1")
		io.WriteString(w, "ok")
	})
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.header, o.hits = r.Header.Clone(), o.hits+1
		o.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(o.Close)
	o.port = o.URL[strings.LastIndexByte(o.URL, ':')+1:]
	return o
}

func (o *origin) got() (http.Header, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.header, o.hits
}

// closedPort returns a 127.0.0.1 port nothing listens on.
func closedPort(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func TestProxyForward(t *testing.T) {
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1") // the proxy must not use it
	o := startOrigin(t)
	zone := []string{"api.test. 60 IN A 127.0.0.1", "meta.test. 60 IN A 169.254.169.254"}
	tests := []struct {
		name     string
		rules    []string
		method   string
		url      string
		send     string // request body
		status   int
		body     string // a substring of the response body
		code     string // refusal code; "" for none
		denyHost string // host told to OnDeny; "" = the URL's
		hits     int    // requests the origin must have seen
	}{
		{name: "localhost rule", rules: []string{"localhost:{origin}"}, url: "http://localhost:{origin}/hello",
			status: 200, body: "hello from localhost:{origin}", hits: 1},
		{name: "http rule with port", rules: []string{"http://LOCALHOST:{origin}/"}, url: "http://localhost:{origin}/hello",
			status: 200, body: "hello from", hits: 1},
		{name: "ip rule", rules: []string{"127.0.0.1:{origin}"}, url: "http://127.0.0.1:{origin}/hello",
			status: 200, body: "hello from 127.0.0.1:{origin}", hits: 1},
		{name: "ip in decimal spelling", rules: []string{"127.0.0.1:{origin}"}, url: "http://2130706433:{origin}/hello",
			status: 200, body: "hello from 2130706433:{origin}", hits: 1},
		{name: "POST body", rules: []string{"localhost:{origin}"}, method: "POST", url: "http://localhost:{origin}/echo", send: "the payload",
			status: 200, body: "the payload", hits: 1},
		{name: "redirect passed through, not followed", rules: []string{"localhost:{origin}"}, url: "http://localhost:{origin}/redirect",
			status: 302, hits: 1},
		{name: "host no rule names", rules: []string{"localhost:{origin}"}, url: "http://other.test:{origin}/hello",
			status: 403, body: "other.test:{origin}", code: CodeNotAllowed},
		{name: "port no rule names", rules: []string{"localhost:{origin}"}, url: "http://localhost:{closed}/hello",
			status: 403, body: "localhost:{closed}", code: CodeNotAllowed},
		{name: "https rule does not admit http", rules: []string{"https://localhost:{origin}"}, url: "http://localhost:{origin}/hello",
			status: 403, body: "localhost:{origin}", code: CodeNotAllowed},
		{name: "name pinned to loopback", rules: []string{"http://api.test:{origin}", "127.0.0.1:{origin}"}, url: "http://api.test:{origin}/hello",
			status: 403, body: "127.0.0.1", code: CodeRestricted},
		{name: "name pinned to metadata", rules: []string{"meta.test"}, url: "http://meta.test/latest/meta-data/",
			status: 403, body: "169.254.169.254", code: CodeRestricted},
		{name: "the proxy by address", rules: []string{"127.0.0.1"}, url: "http://127.0.0.1:{proxy}/hello",
			status: 403, body: "proxy itself", code: CodeProxyLoop},
		{name: "the proxy by name", rules: []string{"localhost"}, url: "http://localhost:{proxy}/hello",
			status: 403, body: "proxy itself", code: CodeProxyLoop},
		{name: "allowed host down", rules: []string{"127.0.0.1:{closed}"}, url: "http://127.0.0.1:{closed}/",
			status: 502, body: CodeBadGateway},
		{name: "allowed name that does not exist", rules: []string{"gone.test"}, url: "http://gone.test/",
			status: 502, body: CodeBadGateway},
	}
	closed := closedPort(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startProxy(t, zone, map[string]string{"{origin}": o.port, "{closed}": closed}, tt.rules...)
			rep := strings.NewReplacer("{origin}", o.port, "{closed}", closed, "{proxy}", f.url.Port())
			_, before := o.got()
			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, rep.Replace(tt.url), strings.NewReader(tt.send))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := f.client(t, nil, "").Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d; body %q", resp.StatusCode, tt.status, body)
			}
			if want := rep.Replace(tt.body); !strings.Contains(string(body), want) {
				t.Errorf("body %q lacks %q", body, want)
			}
			if resp.StatusCode == http.StatusFound && resp.Header.Get("Location") != "http://elsewhere.invalid/next" {
				t.Errorf("Location %q", resp.Header.Get("Location"))
			}
			if _, after := o.got(); after-before != tt.hits {
				t.Errorf("origin saw %d requests, want %d", after-before, tt.hits)
			}
			if tt.code == "" {
				if dl := f.denied.get(); len(dl) != 0 {
					t.Errorf("unexpected denials %v", dl)
				}
				return
			}
			for _, want := range []string{tt.code, "fix:"} {
				if !strings.Contains(string(body), want) {
					t.Errorf("body %q lacks %q", body, want)
				}
			}
			u, _ := url.Parse(rep.Replace(tt.url))
			port, _ := strconv.Atoi(u.Port())
			if port == 0 {
				port = 80
			}
			f.checkDenial(t, u.Hostname(), port, tt.code)
		})
	}
}

func TestProxyHopByHopHeaders(t *testing.T) {
	o := startOrigin(t)
	f := startProxy(t, nil, map[string]string{"{origin}": o.port}, "localhost:{origin}")
	resp, body, _, _ := f.raw(t, "GET http://localhost:"+o.port+"/hop HTTP/1.1\r\n"+
		"Host: localhost:"+o.port+"\r\n"+
		"Connection: keep-alive, X-Hop\r\n"+
		"X-Hop: secret\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Authorization: Basic dXNlcjpwYXNz\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"Te: trailers\r\n"+
		"X-End-To-End: kept\r\n\r\n")
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	h, _ := o.got()
	for _, name := range []string{"X-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Connection"} {
		if v, ok := h[name]; ok {
			t.Errorf("origin got hop-by-hop %s: %q", name, v)
		}
	}
	if h.Get("X-End-To-End") != "kept" {
		t.Errorf("origin lost X-End-To-End: %v", h)
	}
	if _, ok := h["Accept-Encoding"]; ok {
		t.Errorf("the proxy asked for compression the client did not: %q", h.Get("Accept-Encoding"))
	}
	if _, ok := h["User-Agent"]; ok {
		t.Errorf("the proxy added a User-Agent: %q", h.Get("User-Agent"))
	}
	for _, name := range []string{"X-Resp-Hop", "Keep-Alive", "Proxy-Authenticate"} {
		if v, ok := resp.Header[name]; ok {
			t.Errorf("client got hop-by-hop %s: %q", name, v)
		}
	}
	if resp.Header.Get("X-Kept") != "1" {
		t.Errorf("client lost X-Kept: %v", resp.Header)
	}
}

func TestProxyRefusesNonProxyRequests(t *testing.T) {
	o := startOrigin(t)
	f := startProxy(t, nil, map[string]string{"{origin}": o.port}, "localhost:{origin}")
	tests := []struct {
		name, req string
		status    int
		code      string
	}{
		{"origin form", "GET /hello HTTP/1.1\r\nHost: localhost:" + o.port + "\r\n\r\n", 400, CodeNotProxyRequest},
		{"https in absolute form", "GET https://localhost:" + o.port + "/hello HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, CodeProxyScheme},
		{"ftp in absolute form", "GET ftp://localhost:" + o.port + "/ HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, CodeProxyScheme},
		{"CONNECT without a port", "CONNECT localhost HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, CodeNotProxyRequest},
		{"CONNECT to port 0", "CONNECT localhost:0 HTTP/1.1\r\nHost: localhost:0\r\n\r\n", 400, CodeNotProxyRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body, _, _ := f.raw(t, tt.req)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.code) {
				t.Errorf("%d %q, want %d with %s", resp.StatusCode, body, tt.status, tt.code)
			}
		})
	}
	if _, hits := o.got(); hits != 0 {
		t.Errorf("origin saw %d requests", hits)
	}
	if dl := f.denied.get(); len(dl) != 0 {
		t.Errorf("malformed requests are not policy denials: %v", dl)
	}
}

func TestProxyConnect(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure hello")
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	tlsPort := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	zone := []string{"api.test. 60 IN A 127.0.0.1"}
	tests := []struct {
		name       string
		rules      []string
		url        string
		serverName string // the name the client checks the certificate for
		code       string // "" = the request succeeds
	}{
		// httptest's certificate names 127.0.0.1, ::1 and example.com, not localhost.
		{name: "by address", rules: []string{"127.0.0.1:{tls}"}, url: "https://127.0.0.1:{tls}/"},
		{name: "by localhost", rules: []string{"localhost:{tls}"}, url: "https://localhost:{tls}/", serverName: "example.com"},
		{name: "https rule admits CONNECT to its port", rules: []string{"https://localhost:{tls}"}, url: "https://localhost:{tls}/", serverName: "example.com"},
		{name: "port no rule names", rules: []string{"127.0.0.1:1"}, url: "https://127.0.0.1:{tls}/", code: CodeNotAllowed},
		{name: "host no rule names", rules: []string{"localhost:{tls}"}, url: "https://other.test:{tls}/", code: CodeNotAllowed},
		{name: "name pinned to loopback", rules: []string{"api.test:{tls}"}, url: "https://api.test:{tls}/", code: CodeRestricted},
		{name: "the proxy itself", rules: []string{"localhost"}, url: "https://localhost:{proxy}/", code: CodeProxyLoop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := startProxy(t, zone, map[string]string{"{tls}": tlsPort}, tt.rules...)
			target := strings.NewReplacer("{tls}", tlsPort, "{proxy}", f.url.Port()).Replace(tt.url)
			resp, err := f.client(t, roots, tt.serverName).Get(target)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != "secure hello" {
					t.Fatalf("body %q", body)
				}
				if dl := f.denied.get(); len(dl) != 0 {
					t.Errorf("unexpected denials %v", dl)
				}
				return
			}
			if err == nil {
				resp.Body.Close()
				t.Fatalf("a refused CONNECT answered %d", resp.StatusCode)
			}
			u, _ := url.Parse(target)
			port, _ := strconv.Atoi(u.Port())
			f.checkDenial(t, u.Hostname(), port, tt.code)
			// The client only reports the status; a raw CONNECT shows the body.
			hostport := u.Host
			resp, body, _, _ := f.raw(t, "CONNECT "+hostport+" HTTP/1.1\r\nHost: "+hostport+"\r\n\r\n")
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d", resp.StatusCode)
			}
			for _, want := range []string{tt.code, hostport, "fix:"} {
				if !strings.Contains(body, want) {
					t.Errorf("403 body %q lacks %q", body, want)
				}
			}
		})
	}
}

// startTCP serves each accepted connection with handle until the test ends.
func startTCP(t testing.TB, handle func(net.Conn)) (port string, conns chan net.Conn) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	conns = make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns <- c
			go handle(c)
		}
	}()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), conns
}

func TestProxyTunnelHalfClose(t *testing.T) {
	// The server reads to the end, then answers: it needs the client's half-close passed on.
	port, _ := startTCP(t, func(c net.Conn) {
		defer c.Close()
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %d bytes", len(b))
	})
	f := startProxy(t, nil, map[string]string{"{port}": port}, "127.0.0.1:{port}")
	resp, _, c, br := f.raw(t, "CONNECT 127.0.0.1:"+port+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\n")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	payload := strings.Repeat("x", 100_000)
	if _, err := io.WriteString(c, payload); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a wait
	got, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("got %d bytes", len(payload))
	if string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	// The tunnel's bytes are counted on the host's side, through the half-close.
	if sent, recv := f.traffic.Sent(), f.traffic.Received(); sent != int64(len(payload)) || recv != int64(len(want)) {
		t.Errorf("traffic: sent %d, received %d; want %d, %d", sent, recv, len(payload), len(want))
	}
}

func TestProxyCloseEndsTunnels(t *testing.T) {
	port, conns := startTCP(t, func(c net.Conn) { io.Copy(c, c); c.Close() })
	f := startProxy(t, nil, map[string]string{"{port}": port}, "127.0.0.1:{port}")
	resp, _, c, br := f.raw(t, "CONNECT 127.0.0.1:"+port+" HTTP/1.1\r\nHost: 127.0.0.1:"+port+"\r\n\r\nping")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	// "ping" was sent right behind the CONNECT: the proxy must forward what it buffered.
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a wait
	buf := make([]byte, 4)
	if _, err := io.ReadFull(br, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo %q, %v", buf, err)
	}
	upstream := <-conns
	if err := f.p.Close(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a guard against a hang, not a wait
	if n, err := br.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the tunnel is still open after Close: read %d, %v", n, err)
	}
	upstream.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := upstream.Read(buf); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the upstream side is still open after Close: %v", err)
	}
	// A proxy closed is closed: a new CONNECT does not get through.
	if c, err := net.Dial("tcp", f.addr); err == nil {
		c.Close()
		t.Errorf("the listener still accepts after Close")
	}
}

func TestProxyUnderHTTPTestServer(t *testing.T) {
	o := startOrigin(t)
	var d denials
	rules := mustRules(t, "localhost:"+o.port, "127.0.0.1")
	res, err := NewResolver(ResolverConfig{Rules: rules, Upstream: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(ProxyConfig{Rules: rules, Resolver: res, OnDeny: d.add})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	defer srv.Close()
	defer p.Close()
	pu, _ := url.Parse(srv.URL)
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}

	resp, err := c.Get("http://localhost:" + o.port + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "hello") {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	// The proxy learns its address from the requests it serves, and refuses loops to it.
	resp, err = c.Get(srv.URL + "/again")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), CodeProxyLoop) {
		t.Fatalf("loop: %d %q", resp.StatusCode, body)
	}
}

func TestProxyStreamsResponses(t *testing.T) {
	step := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		<-step // the second event only after the client read the first
		io.WriteString(w, "data: two\n\n")
	}))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	f := startProxy(t, nil, map[string]string{"{port}": port}, "localhost:{port}")
	resp, err := f.client(t, nil, "").Get("http://localhost:" + port + "/events")
	if err != nil {
		close(step)
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	close(step)
	if err != nil || line != "data: one\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Errorf("rest %q", rest)
	}
}

func TestProxyHeaderLimit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProxy(ProxyConfig{Rules: mustRules(t, "localhost")})
	if err != nil {
		t.Fatal(err)
	}
	p.server.MaxHeaderBytes = 1024
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	defer func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://localhost:1/ HTTP/1.1\r\nHost: localhost:1\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", 64<<10))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d, want 431", resp.StatusCode)
	}
}

func TestSplitTarget(t *testing.T) {
	tests := []struct {
		in   string
		def  int
		host string
		port int
		ok   bool
	}{
		{"example.com", 80, "example.com", 80, true},
		{"example.com:8080", 80, "example.com", 8080, true},
		{"example.com:", 80, "example.com", 80, true},
		{"[::1]", 80, "::1", 80, true},
		{"[::1]:443", 0, "::1", 443, true},
		{"example.com", 0, "", 0, false},
		{"example.com:0", 0, "", 0, false},
		{"example.com:65536", 0, "", 0, false},
		{"example.com:https", 0, "", 0, false},
		{":443", 0, "", 0, false},
		{"", 80, "", 0, false},
	}
	for _, tt := range tests {
		host, port, ok := splitTarget(tt.in, tt.def)
		if ok != tt.ok || ok && (host != tt.host || port != tt.port) {
			t.Errorf("splitTarget(%q, %d) = %q, %d, %v; want %q, %d, %v", tt.in, tt.def, host, port, ok, tt.host, tt.port, tt.ok)
		}
	}
}

func BenchmarkProxyGET(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	port := srv.URL[strings.LastIndexByte(srv.URL, ':')+1:]
	f := startProxy(b, nil, map[string]string{"{port}": port}, "localhost:{port}")
	c := f.client(b, nil, "")
	target := "http://localhost:" + port + "/"
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Get(target)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
