package murmur

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// Default body caps of capsulegate:http/outgoing (docs/reference/guest-abi.md "Limits").
const (
	DefaultMaxRequestBody  = 16 << 20
	DefaultMaxResponseBody = 64 << 20
)

// OutgoingRequest is capsulegate:http/outgoing's request record.
type OutgoingRequest struct {
	Method  string
	URL     string
	Headers [][2]string
	Body    []byte
}

// OutgoingResponse is capsulegate:http/outgoing's response record.
type OutgoingResponse struct {
	Status  uint16
	Headers [][2]string
	Body    []byte
}

// Credential adds a gateway's secret to requests for one endpoint; the guest never sees
// it (docs/reference/guest-abi.md "Gateway keys and retries").
type Credential struct {
	// Endpoint is the base URL the credential is for; requests below it get the headers.
	Endpoint string
	// Headers are added (replacing any the guest set of the same name); none for a
	// gateway endpoint that takes no key, which is still a provider's (it gets the
	// task's trace context).
	Headers [][2]string
}

// Outgoing serves capsulegate:http/outgoing for one capsule: every request is checked
// against the capsule's network rules before a connection is made, redirects are not
// followed, and bodies are capped.
type Outgoing struct {
	Capsule  string
	Rules    netpolicy.Rules
	Resolver netpolicy.Resolver // nil: the system resolver
	// Traffic counts the bytes of the connections the host makes (nil: not counted).
	Traffic         *netpolicy.Traffic
	MaxRequestBody  int64 // 0: DefaultMaxRequestBody
	MaxResponseBody int64 // 0: DefaultMaxResponseBody
	Credentials     []Credential
	Metrics         *wasm.Metrics
	// OnDeny is told of every refusal, after it is counted (for the trace and logs).
	OnDeny func(who, host string, port int, err error)

	// Sleep waits between provider retries; nil waits on a timer (tests pass a fake clock).
	Sleep func(ctx context.Context, d time.Duration) error

	client *http.Client
}

// ProviderTries is how many times a request to a credentialed provider endpoint is sent
// when it answers 429 or 5xx.
const ProviderTries = 3

// backoff is the wait before retry number try+1: 0.5 s doubling, ±50 % jitter, capped at
// 8 s; a Retry-After in seconds (up to 30) wins.
func backoff(try int, retryAfter string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(retryAfter)); err == nil && n >= 0 && n <= 30 {
		return time.Duration(n) * time.Second
	}
	base := min(500*time.Millisecond<<(try-1), 8*time.Second)
	return base/2 + time.Duration(rand.Int64N(int64(base)))
}

func (h *Outgoing) sleep(ctx context.Context, d time.Duration) error {
	if h.Sleep != nil {
		return h.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Init builds the host's HTTP client; call it once before Send.
func (h *Outgoing) Init() {
	d := &netpolicy.Dialer{Rules: h.Rules, Resolver: h.Resolver, Traffic: h.Traffic}
	h.client = &http.Client{
		Transport: netpolicy.NewTransport(d),
		// A redirect is answered to the guest as it is; following it would reach a
		// host the policy check never saw.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Send performs req for the artifact who. A refusal or failure is the error string the
// guest receives in result::err.
func (h *Outgoing) Send(ctx context.Context, who string, req OutgoingRequest) (*OutgoingResponse, error) {
	resp, u, err := h.start(ctx, who, req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return h.readResponse(resp, u.Host)
}

// start checks req against the URL rules, the network policy and the request body cap,
// and sends it; the caller closes the response body.
func (h *Outgoing) start(ctx context.Context, who string, req OutgoingRequest) (*http.Response, *url.URL, error) {
	u, host, port, err := parseOutgoingURL(req.URL)
	if err != nil {
		return nil, nil, err
	}
	// The name is checked here with the scheme; the dialer checks the addresses it
	// resolves against the rule for host:port.
	if _, err := h.Rules.Check(u.Scheme, host, port, nil); err != nil {
		return nil, nil, h.deny(who, host, port, err)
	}
	if n, ok := netpolicy.NarrowingOf(ctx); ok {
		if _, provider := h.credentialsFor(u); provider {
			// The driver's own provider endpoint is the capsule's model, not a host of
			// network.allow: a caller's narrowing narrows the latter only.
			ctx = netpolicy.Unnarrowed(ctx)
		} else if err := netpolicy.CheckNarrowed(n, u.Scheme, host, port, nil); err != nil {
			return nil, nil, h.deny(who, host, port, err)
		}
	}
	maxReq := h.MaxRequestBody
	if maxReq <= 0 {
		maxReq = DefaultMaxRequestBody
	}
	if int64(len(req.Body)) > maxReq {
		return nil, nil, fmt.Errorf("request body is %d bytes, over the %d-byte cap", len(req.Body), maxReq)
	}
	resp, err := h.exchange(ctx, who, u, host, port, req)
	if err != nil {
		return nil, nil, err
	}
	return resp, u, nil
}

// OutgoingStream is a response whose body the guest reads as it arrives
// (capsulegate:http/outgoing@0.2.0 open): the same rules as Send, the same body cap
// over everything read.
type OutgoingStream struct {
	Status   uint16
	Headers  [][2]string
	body     io.ReadCloser
	left     int64 // bytes the cap still allows
	max      int64 // the cap, for messages
	hostport string
	done     bool
}

// Open performs req like Send but returns once the response head has arrived; the
// caller reads the body with Read and must Close it.
func (h *Outgoing) Open(ctx context.Context, who string, req OutgoingRequest) (*OutgoingStream, error) {
	resp, u, err := h.start(ctx, who, req)
	if err != nil {
		return nil, err
	}
	maxResp := h.MaxResponseBody
	if maxResp <= 0 {
		maxResp = DefaultMaxResponseBody
	}
	s := &OutgoingStream{Status: uint16(resp.StatusCode), Headers: lowerHeaders(resp.Header), body: resp.Body, left: maxResp, max: maxResp, hostport: u.Host}
	return s, nil
}

// MaxRead bounds one Read of an OutgoingStream, whatever the guest asks for.
const MaxRead = 1 << 20

// Read waits for body bytes and returns at most max of them (MaxRead at most): at least
// one, or none once the body has ended. Past the response body cap it fails.
func (s *OutgoingStream) Read(max int) ([]byte, error) {
	if s.done {
		return []byte{}, nil
	}
	max = min(max, MaxRead)
	if max <= 0 {
		return nil, fmt.Errorf("read-body of %d bytes: ask for at least one", max)
	}
	// One byte past the cap is asked for, so a body exactly at the cap still ends cleanly.
	buf := make([]byte, min(int64(max), s.left+1))
	for {
		n, err := s.body.Read(buf)
		if int64(n) > s.left {
			s.done = true
			return nil, &overCapError{fmt.Sprintf("response body from %s is over the %d-byte cap", s.hostport, s.max)}
		}
		s.left -= int64(n)
		if n > 0 {
			return buf[:n], nil
		}
		if errors.Is(err, io.EOF) {
			s.done = true
			return []byte{}, nil
		}
		if err != nil {
			s.done = true
			return nil, fmt.Errorf("reading the response from %s failed: %v", s.hostport, err)
		}
	}
}

// Close releases the body; the connection is not reused when it was not read to the end.
func (s *OutgoingStream) Close() error {
	s.done = true
	return s.body.Close()
}

func lowerHeaders(hs http.Header) [][2]string {
	var out [][2]string
	for k, vs := range hs {
		for _, v := range vs {
			out = append(out, [2]string{strings.ToLower(k), v})
		}
	}
	return out
}

// parseOutgoingURL accepts only an absolute http or https URL without userinfo, and
// returns it with the host and port (defaulted from the scheme) the policy checks.
func parseOutgoingURL(raw string) (u *url.URL, host string, port int, err error) {
	u, err = url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, "", 0, fmt.Errorf("invalid url %q: want an absolute http or https URL", clip.String(raw, 200))
	}
	if u.User != nil {
		return nil, "", 0, fmt.Errorf("invalid url %q: userinfo is not allowed; send credentials in headers", clip.String(raw, 200))
	}
	host = u.Hostname()
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return nil, "", 0, fmt.Errorf("invalid url %q: bad port", clip.String(raw, 200))
		}
	}
	if port == 0 {
		port = 443
		if u.Scheme == "http" {
			port = 80
		}
	}
	return u, host, port, nil
}

// credentialsFor returns the headers of every credential whose endpoint is u or lies
// above it, in configuration order.
func (h *Outgoing) credentialsFor(u *url.URL) (creds [][2]string, provider bool) {
	for _, c := range h.Credentials {
		if strings.HasPrefix(u.String(), strings.TrimSuffix(c.Endpoint, "/")+"/") || u.String() == c.Endpoint {
			creds, provider = append(creds, c.Headers...), true
		}
	}
	return creds, provider
}

// exchange sends req to u and returns the response whose body the caller must close,
// retrying a credentialed provider that sheds load; a refusal by the dialer is counted as
// a denial of host:port.
func (h *Outgoing) exchange(ctx context.Context, who string, u *url.URL, host string, port int, req OutgoingRequest) (*http.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	creds, provider := h.credentialsFor(u)
	// A provider behind a credentialed endpoint may shed load: 429 and 5xx are retried
	// with jittered backoff before the guest sees the error (docs/reference/guest-abi.md
	// "Gateway keys and retries").
	tries := 1
	if len(creds) > 0 {
		tries = ProviderTries
	}
	var resp *http.Response
	for try := 1; ; try++ {
		hr, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(req.Body))
		if err != nil {
			return nil, fmt.Errorf("invalid request: %v", err)
		}
		for _, kv := range req.Headers {
			hr.Header.Add(kv[0], kv[1])
		}
		for _, kv := range creds {
			hr.Header.Set(kv[0], kv[1])
		}
		if provider {
			// A provider request (a gateway endpoint) carries the task's trace context;
			// other hosts a guest reaches learn nothing of it.
			propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(hr.Header))
		}
		resp, err = h.client.Do(hr)
		if err != nil {
			if e := errs.Find(err, netpolicy.CodeRestricted); e != nil {
				return nil, h.deny(who, host, port, e)
			}
			if e := errs.Find(err, netpolicy.CodeNotAllowed); e != nil {
				return nil, h.deny(who, host, port, e)
			}
			return nil, fmt.Errorf("request to %s failed: %v", u.Host, unwrapURLError(err))
		}
		if try >= tries || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500) {
			return resp, nil
		}
		wait := backoff(try, resp.Header.Get("Retry-After"))
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err := h.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("request to %s: %v while waiting to retry after status %d", u.Host, err, resp.StatusCode)
		}
	}
}

// readResponse reads resp under the response body cap into the guest's record, with
// header names lower-cased; hostport names the server in errors.
func (h *Outgoing) readResponse(resp *http.Response, hostport string) (*OutgoingResponse, error) {
	maxResp := h.MaxResponseBody
	if maxResp <= 0 {
		maxResp = DefaultMaxResponseBody
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResp+1))
	if err != nil {
		return nil, fmt.Errorf("reading the response from %s failed: %v", hostport, err)
	}
	if int64(len(body)) > maxResp {
		return nil, fmt.Errorf("response body from %s is over the %d-byte cap", hostport, maxResp)
	}
	return &OutgoingResponse{Status: uint16(resp.StatusCode), Headers: lowerHeaders(resp.Header), Body: body}, nil
}

// deny counts a refusal and returns the guest-facing error (docs/reference/guest-abi.md
// "Outgoing HTTP").
func (h *Outgoing) deny(who, host string, port int, cause error) error {
	if h.Metrics != nil {
		h.Metrics.Denied.WithLabelValues(h.Capsule, "guest").Inc()
	}
	if h.OnDeny != nil {
		h.OnDeny(who, host, port, cause)
	}
	// Name the host as the policy saw it: 0x7f000001 and [::ffff:127.0.0.1] are 127.0.0.1.
	target := clip.String(host, 200)
	if name, ip, err := netpolicy.CanonicalHost(host); err == nil {
		target = name
		if ip.IsValid() {
			target = ip.String()
		}
	}
	msg := fmt.Sprintf("network policy: %s not in capabilities.network.allow", net.JoinHostPort(target, strconv.Itoa(port)))
	if e := errs.Find(cause, netpolicy.CodeRestricted); e != nil {
		msg = e.Msg // names the address and the rule: more useful than "not allowed"
	}
	if e := errs.Find(cause, netpolicy.CodeNarrowed); e != nil {
		// Granted to the capsule, not to this task's caller: say so, with the code.
		msg = fmt.Sprintf("network policy: %s is outside what the route's policy lets this task's caller reach (%s)",
			net.JoinHostPort(target, strconv.Itoa(port)), netpolicy.CodeNarrowed)
	}
	return &deniedError{msg: msg}
}

// errOverCap matches a response body read past its cap (OutgoingStream.Read).
var errOverCap = errors.New("response body over its cap")

// overCapError is the cap's refusal: its text is exactly what the guest reads.
type overCapError struct{ msg string }

func (e *overCapError) Error() string { return e.msg }

// Is makes errors.Is match errOverCap.
func (e *overCapError) Is(target error) bool { return target == errOverCap }

// ErrDenied matches every refusal of Send by the network policy, so a caller can tell it
// from a failed exchange (WASI 0.2 answers it with its own error code).
var ErrDenied = errors.New("network policy: request denied")

// deniedError is a refusal: its text is exactly what the guest reads.
type deniedError struct{ msg string }

func (e *deniedError) Error() string { return e.msg }

// Is makes errors.Is match ErrDenied.
func (e *deniedError) Is(target error) bool { return target == ErrDenied }

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// clip shortens a guest-supplied value quoted in a message.
