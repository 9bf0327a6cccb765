package netpolicy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// Proxy limits: the request header size, how long a CONNECT may take to reach its host,
// and the copy buffer.
const (
	maxHeaderBytes = 64 << 10
	connectTimeout = 30 * time.Second
	copyBuffer     = 32 << 10
)

// ProxyConfig configures a session's HTTP forward proxy.
type ProxyConfig struct {
	Rules    Rules
	Resolver Resolver     // normally the session's *PinningResolver; nil: net.DefaultResolver (unpinned)
	OnDeny   func(Denial) // told of every refusal; must be safe for concurrent use
	Traffic  *Traffic     // counts what the proxy exchanges with the hosts it reaches; nil: not counted
	Logger   *slog.Logger // nil: discard
}

// Proxy is a session's HTTP forward proxy (docs/sandbox.md "Network"): the subprocess's
// HTTP_PROXY and HTTPS_PROXY point at it. It forwards absolute-form http requests and
// opens CONNECT tunnels, each only to what the rules allow, at addresses the Dialer
// checked (through the pinning resolver, the same addresses the subprocess's DNS
// answers).
//
// It never follows redirects (a 3xx goes back to the client, whose next request is checked
// like any other), strips hop-by-hop headers and Proxy-Authorization, never uses a proxy
// from its own environment, and refuses requests addressed to itself. A refusal is a 403
// whose text/plain body is the error: the host:port, the code and the fix.
type Proxy struct {
	rules     Rules
	dialer    *Dialer
	transport *http.Transport
	server    *http.Server
	onDeny    func(Denial)
	log       *slog.Logger

	mu      sync.Mutex
	closed  bool
	own     map[netip.AddrPort]struct{} // addresses the proxy is reached at
	tunnels map[net.Conn]struct{}       // both ends of every open tunnel
	// narrow is the running task's narrowing of the session's reach (SetNarrowing).
	narrow atomic.Pointer[Rules]
	wg     sync.WaitGroup // open tunnels
}

// NewProxy returns a proxy for one session.
func NewProxy(cfg ProxyConfig) (*Proxy, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Proxy{
		rules:   cfg.Rules,
		dialer:  &Dialer{Rules: cfg.Rules, Resolver: cfg.Resolver, Traffic: cfg.Traffic},
		onDeny:  cfg.OnDeny,
		log:     log,
		own:     map[netip.AddrPort]struct{}{},
		tunnels: map[net.Conn]struct{}{},
	}
	p.transport = NewTransport(p.dialer)
	p.transport.DialContext = p.dial
	p.transport.DisableCompression = true // pass bodies through as the origin sent them
	p.transport.ForceAttemptHTTP2 = false
	p.server = &http.Server{
		Handler:           p,
		MaxHeaderBytes:    maxHeaderBytes,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	return p, nil
}

// Serve accepts proxy connections on l until Close; it returns nil after Close.
func (p *Proxy) Serve(l net.Listener) error {
	p.addOwn(l.Addr())
	err := p.server.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close closes the listeners, the connections being served and every open tunnel, and
// waits for the tunnels to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	err := p.server.Close()
	p.transport.CloseIdleConnections()
	p.wg.Wait()
	return err
}

// ServeHTTP handles one proxy request; it works under any http.Server.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		p.addOwn(a)
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r)
		return
	}
	p.forward(w, r)
}

// forward relays one absolute-form http request.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request) {
	if !r.URL.IsAbs() || r.URL.Host == "" {
		p.refuse(w, http.StatusBadRequest, errs.New(CodeNotProxyRequest, Part,
			fmt.Sprintf("proxy: %s %q is not a proxy request (the target must be an absolute URL)", r.Method, short(r.RequestURI)),
			"send requests through the proxy by setting HTTP_PROXY and HTTPS_PROXY, not to it"))
		return
	}
	if r.URL.Scheme != "http" {
		p.refuse(w, http.StatusBadRequest, errs.New(CodeProxyScheme, Part,
			fmt.Sprintf("proxy: %s %s://%s: the proxy forwards only http URLs", r.Method, short(r.URL.Scheme), short(r.URL.Host)),
			"for https, let the client open a CONNECT tunnel (set HTTPS_PROXY to the proxy)"))
		return
	}
	host, port, ok := splitTarget(r.URL.Host, 80)
	if !ok {
		p.refuse(w, http.StatusBadRequest, errs.New(CodeNotProxyRequest, Part,
			fmt.Sprintf("proxy: %q is not a valid host[:port]", short(r.URL.Host)), "request a URL such as http://host:8080/path"))
		return
	}
	// The scheme is known here, so check it: the dialer sees host:port only.
	if _, err := p.rules.Check("http", host, port, nil); err != nil {
		p.deny(w, r, host, port, err)
		return
	}
	if err := p.checkNarrowed("http", host, port); err != nil {
		p.deny(w, r, host, port, err)
		return
	}

	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Host = r.URL.Host
	out.URL.User = nil // never turn URL userinfo into an Authorization header
	out.Close = false
	if r.ContentLength == 0 {
		out.Body = nil // lets the transport retry an idempotent request on a stale connection
	}
	removeHopHeaders(out.Header)
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // no Go default added in the client's name
	}

	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		p.fail(w, r, host, port, err)
		return
	}
	defer resp.Body.Close()
	removeHopHeaders(resp.Header)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	if len(resp.Trailer) > 0 {
		names := make([]string, 0, len(resp.Trailer))
		for k := range resp.Trailer {
			names = append(names, k)
		}
		h["Trailer"] = []string{strings.Join(names, ", ")}
	}
	w.WriteHeader(resp.StatusCode)
	if err := copyFlushing(w, resp.Body); err != nil {
		// The status is out; aborting tells the client the body is incomplete.
		p.log.Debug("proxy: response body cut short", "target", net.JoinHostPort(host, strconv.Itoa(port)), "err", err)
		panic(http.ErrAbortHandler)
	}
	for k, v := range resp.Trailer {
		h[http.TrailerPrefix+k] = v
	}
}

// connect opens a tunnel to the CONNECT target.
func (p *Proxy) connect(w http.ResponseWriter, r *http.Request) {
	host, port, ok := splitTarget(r.Host, 0)
	if !ok {
		p.refuse(w, http.StatusBadRequest, errs.New(CodeNotProxyRequest, Part,
			fmt.Sprintf("proxy: CONNECT %q: the target must be host:port", short(r.Host)), "CONNECT to host:port, e.g. api.example.com:443"))
		return
	}
	if _, err := p.rules.Check("", host, port, nil); err != nil {
		p.deny(w, r, host, port, err)
		return
	}
	if err := p.checkNarrowed("", host, port); err != nil {
		p.deny(w, r, host, port, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), connectTimeout)
	up, err := p.dial(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	cancel()
	if err != nil {
		p.fail(w, r, host, port, err)
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		p.log.Warn("proxy: CONNECT cannot take over the connection", "err", err)
		http.Error(w, "netpolicy: proxy: CONNECT is not supported over this protocol; use HTTP/1.1", http.StatusHTTPVersionNotSupported)
		return
	}
	if !p.track(client, up) {
		client.Close()
		up.Close()
		return
	}
	defer p.untrack(client, up)
	_ = client.SetDeadline(time.Time{})
	if _, err := fmt.Fprintf(client, "HTTP/%d.%d 200 Connection established\r\n\r\n", r.ProtoMajor, r.ProtoMinor); err != nil {
		return
	}
	// Bytes the client sent right after its CONNECT (a pipelined TLS hello) are buffered.
	if n := buf.Reader.Buffered(); n > 0 {
		b, _ := buf.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	splice(client, up)
}

// splice copies both ways until both directions ended; an end of input is passed on as a
// half-close, so a client that shuts down its sending side still reads the reply.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() { pipe(b, a) })
	pipe(a, b)
	wg.Wait()
}

// pipe copies src to dst, then half-closes dst; on a broken connection it closes both, so
// the other direction ends too.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
}

// dial connects through the policy dialer and refuses a connection that reached the
// proxy itself, whatever name or spelling led there.
func (p *Proxy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if n := p.narrow.Load(); n != nil {
		ctx = Narrow(ctx, *n) // the dialer checks the addresses against it too
	}
	c, err := p.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if p.isOwn(c) {
		c.Close()
		return nil, errs.New(CodeProxyLoop, Part,
			fmt.Sprintf("proxy: %s is the proxy itself", short(addr)),
			"address the real destination; the proxy only forwards to other hosts")
	}
	return c, nil
}

// isOwn reports whether c leads back to an address the proxy is reached at.
func (p *Proxy) isOwn(c net.Conn) bool {
	remote, ok := addrPort(c.RemoteAddr())
	if !ok {
		return false
	}
	local, _ := addrPort(c.LocalAddr())
	p.mu.Lock()
	defer p.mu.Unlock()
	for own := range p.own {
		if own.Port() != remote.Port() {
			continue
		}
		// A wildcard listener is reached at any of this host's addresses.
		if own.Addr() == remote.Addr() || own.Addr().IsUnspecified() && (remote.Addr().IsLoopback() || remote.Addr() == local.Addr()) {
			return true
		}
	}
	return false
}

// addOwn records an address the proxy is reached at.
func (p *Proxy) addOwn(a net.Addr) {
	ap, ok := addrPort(a)
	if !ok {
		return
	}
	p.mu.Lock()
	p.own[ap] = struct{}{}
	p.mu.Unlock()
}

// addrPort returns a TCP address as an unmapped netip.AddrPort.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	ap := t.AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}

// track registers a tunnel's connections so Close can end them; false once closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range conns {
		p.tunnels[c] = struct{}{}
	}
	p.wg.Add(1)
	return true
}

// untrack closes and forgets a tunnel's connections.
func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	for _, c := range conns {
		c.Close()
		delete(p.tunnels, c)
	}
	p.mu.Unlock()
	p.wg.Done()
}

// fail answers a failed dial or round trip: 403 for a policy refusal, 502 otherwise.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, host string, port int, err error) {
	if code := errs.Code(err); code != "" && code != CodeUpstreamDNS {
		p.deny(w, r, host, port, err)
		return
	}
	if r.Context().Err() != nil {
		return // the client went away
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	e := errs.Wrap(err, CodeBadGateway, Part, fmt.Sprintf("proxy: could not reach %s", short(target)),
		"check that the host is up and serves that port; the network rules allowed it")
	p.log.Info("proxy: upstream failed", "target", target, "code", CodeBadGateway, "err", err)
	p.refuse(w, http.StatusBadGateway, e)
}

// deny answers a policy refusal with 403, logs it and tells OnDeny.
func (p *Proxy) deny(w http.ResponseWriter, r *http.Request, host string, port int, err error) {
	var e *errs.Error
	if !errors.As(err, &e) {
		e = errs.Wrap(err, CodeNotAllowed, Part, "network policy: refused", "")
	}
	if name, _, cerr := CanonicalHost(host); cerr == nil {
		host = name
	} else {
		host = short(host)
	}
	p.log.Info("network denied", "source", SourceProxy, "method", r.Method, "host", host, "port", port, "code", e.Code, "err", e.Error())
	if p.onDeny != nil {
		p.onDeny(Denial{Source: SourceProxy, Host: host, Port: port, Err: e})
	}
	p.refuse(w, http.StatusForbidden, e)
}

// refuse writes err as a text/plain answer with status.
func (p *Proxy) refuse(w http.ResponseWriter, status int, err error) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Connection", "close")
	w.WriteHeader(status)
	io.WriteString(w, err.Error()+"\n")
}

// splitTarget splits host[:port] of a request target, brackets removed; a missing port is
// def, and def 0 means the port is required.
func splitTarget(hostport string, def int) (string, int, bool) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		if def == 0 {
			return "", 0, false
		}
		host, portStr = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
	}
	port := def
	if portStr != "" {
		port, err = strconv.Atoi(portStr)
		if err != nil {
			return "", 0, false
		}
	}
	return host, port, host != "" && port >= 1 && port <= 65535
}

// hopHeaders are meaningful for one connection only (RFC 9110 §7.6.1), and
// Proxy-Authorization is for this proxy, never for the origin.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopHeaders deletes hop-by-hop headers, including those Connection names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopHeaders {
		h.Del(name)
	}
}

// copyFlushing copies body to w, flushing after every read so streamed answers (server-sent
// events from a model API) reach the client as they arrive.
func copyFlushing(w http.ResponseWriter, body io.Reader) error {
	rc := http.NewResponseController(w)
	bp := buffers.Get().(*[]byte)
	defer buffers.Put(bp)
	buf := *bp
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			if ferr := rc.Flush(); ferr != nil && !errors.Is(ferr, http.ErrNotSupported) {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// buffers recycles copy buffers across responses.
var buffers = sync.Pool{New: func() any { b := make([]byte, copyBuffer); return &b }}

var _ http.Handler = (*Proxy)(nil)

// SetNarrowing makes every request from now on pass rules as well as the session's own
// (the running task's caller's reach, Narrow); nil ends the narrowing. Idle connections
// are closed, so none dialed before is reused past the new narrowing.
func (p *Proxy) SetNarrowing(rules *Rules) {
	p.narrow.Store(rules)
	p.transport.CloseIdleConnections()
}

// checkNarrowed judges host:port against the running task's narrowing, if any.
func (p *Proxy) checkNarrowed(scheme, host string, port int) error {
	if n := p.narrow.Load(); n != nil {
		return CheckNarrowed(*n, scheme, host, port, nil)
	}
	return nil
}
