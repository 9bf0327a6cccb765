package wasip2

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// HTTPRequest is one outgoing request, whole: the same record capsulegate:http/outgoing
// carries, so both imports go out through one policy.
type HTTPRequest = abi.HTTPRequest

// HTTPResponse is the head of the answer to an HTTPRequest; its body is read as it
// arrives.
type HTTPResponse struct {
	Status  uint16
	Headers [][2]string
	// Body is read by the host as the guest reads the incoming-body's stream, and closed
	// when the guest lets go of it (or the request's context ends).
	Body BodyReader
}

// BodyReader is a response body as it arrives from the network: Read waits for at
// least one byte and returns at most max, or an empty slice and no error once the body
// has ended. runtime/wasm/murmur's OutgoingStream is one, so both HTTP imports share its cap.
type BodyReader interface {
	Read(max int) ([]byte, error)
	Close() error
}

// HTTPSender sends one request under the capsule's network policy and returns once the
// response head has arrived (the engine adapts runtime/wasm's Outgoing.Open: rules
// checked before any connection, no redirects followed, bodies capped). The request
// lives as long as ctx: the host cancels it when the guest drops the body. A refusal by
// the policy must match ErrDenied; the guest then gets error-code HTTP-request-denied.
type HTTPSender func(ctx context.Context, req HTTPRequest) (*HTTPResponse, error)

// ErrDenied marks a request the network policy refused.
var ErrDenied = errors.New("wasip2: the network policy denied the request")

// ErrResponseBodySize marks a body read past the response body cap: the guest's stream
// fails with an error whose http-error-code is HTTP-response-body-size.
var ErrResponseBodySize = errors.New("wasip2: the response body is over its cap")

// wasi:http types.
var (
	tMethod = abi.VariantOf(abi.C("get", nil), abi.C("head", nil), abi.C("post", nil), abi.C("put", nil),
		abi.C("delete", nil), abi.C("connect", nil), abi.C("options", nil), abi.C("trace", nil),
		abi.C("patch", nil), abi.C("other", abi.String)).Named("method")
	tScheme       = abi.VariantOf(abi.C("HTTP", nil), abi.C("HTTPS", nil), abi.C("other", abi.String)).Named("scheme")
	tHeaderError  = abi.VariantOf(abi.C("invalid-syntax", nil), abi.C("forbidden", nil), abi.C("immutable", nil)).Named("header-error")
	tFieldSize    = abi.Record(abi.F("field-name", abi.OptionOf(abi.String)), abi.F("field-size", abi.OptionOf(abi.U32))).Named("field-size-payload")
	tHTTPError    = httpErrorCode()
	tFieldEntries = abi.List(abi.Tuple(abi.String.Named("field-name"), tBytes.Named("field-value")))
	tDuration     = abi.U64.Named("duration")
)

var methodNames = []string{"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}

func httpErrorCode() *abi.Type {
	dns := abi.Record(abi.F("rcode", abi.OptionOf(abi.String)), abi.F("info-code", abi.OptionOf(abi.U16))).Named("DNS-error-payload")
	tls := abi.Record(abi.F("alert-id", abi.OptionOf(abi.U8)), abi.F("alert-message", abi.OptionOf(abi.String))).Named("TLS-alert-received-payload")
	ou32, ou64, ostr := abi.OptionOf(abi.U32), abi.OptionOf(abi.U64), abi.OptionOf(abi.String)
	c := abi.C
	return abi.VariantOf(
		c("DNS-timeout", nil), c("DNS-error", dns), c("destination-not-found", nil), c("destination-unavailable", nil),
		c("destination-IP-prohibited", nil), c("destination-IP-unroutable", nil), c("connection-refused", nil),
		c("connection-terminated", nil), c("connection-timeout", nil), c("connection-read-timeout", nil),
		c("connection-write-timeout", nil), c("connection-limit-reached", nil), c("TLS-protocol-error", nil),
		c("TLS-certificate-error", nil), c("TLS-alert-received", tls), c("HTTP-request-denied", nil),
		c("HTTP-request-length-required", nil), c("HTTP-request-body-size", ou64), c("HTTP-request-method-invalid", nil),
		c("HTTP-request-URI-invalid", nil), c("HTTP-request-URI-too-long", nil), c("HTTP-request-header-section-size", ou32),
		c("HTTP-request-header-size", abi.OptionOf(tFieldSize)), c("HTTP-request-trailer-section-size", ou32),
		c("HTTP-request-trailer-size", tFieldSize), c("HTTP-response-incomplete", nil),
		c("HTTP-response-header-section-size", ou32), c("HTTP-response-header-size", tFieldSize),
		c("HTTP-response-body-size", ou64), c("HTTP-response-trailer-section-size", ou32),
		c("HTTP-response-trailer-size", tFieldSize), c("HTTP-response-transfer-coding", ostr),
		c("HTTP-response-content-coding", ostr), c("HTTP-response-timeout", nil), c("HTTP-upgrade-failed", nil),
		c("HTTP-protocol-error", nil), c("loop-detected", nil), c("configuration-error", nil), c("internal-error", ostr),
	).Named("error-code")
}

// Cases of the HTTP error-code used here.
const (
	heConnectionRefused      = 6
	heConnectionLimitReached = 11
	heRequestDenied          = 15
	heRequestBodySize        = 17
	heRequestMethodInvalid   = 18
	heRequestURIInvalid      = 19
	heResponseIncomplete     = 25
	heResponseBodySize       = 28
	heInternalError          = 38
)

func internalError(msg string) abi.Variant {
	if len(msg) > 1000 {
		msg = msg[:1000]
	}
	return abi.Variant{Case: heInternalError, Value: some(validUTF8(msg))}
}

// Header errors.
var (
	hdrInvalid   = fail(abi.Variant{Case: 0})
	hdrForbidden = fail(abi.Variant{Case: 1})
	hdrImmutable = fail(abi.Variant{Case: 2})
)

// forbiddenHeaders are the fields a guest may not set: hop-by-hop fields and Host, which
// the transport owns.
var forbiddenHeaders = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "proxy-authenticate": true,
	"proxy-authorization": true, "transfer-encoding": true, "upgrade": true, "host": true,
	"http2-settings": true, "te": true,
}

// fields is a fields resource: entries in order, names lower-cased, charged to the
// host's buffer budget.
type fields struct {
	h         *Host
	names     []string
	values    [][]byte
	immutable bool
	bytes     int64
}

func (f *fields) close() { f.h.release(f.bytes); f.bytes = 0 }

func validFieldName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func validFieldValue(v []byte) bool {
	for _, c := range v {
		if c == '\r' || c == '\n' || c == 0 || (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// add appends one entry, checking name, value, the entry bound and the budget.
func (f *fields) add(name string, value []byte) *abi.Result {
	if !validFieldName(name) || !validFieldValue(value) {
		return &hdrInvalid
	}
	name = strings.ToLower(name)
	if forbiddenHeaders[name] {
		return &hdrForbidden
	}
	if len(f.names) >= MaxFieldEntries {
		return &hdrInvalid
	}
	n := int64(len(name) + len(value))
	if !f.h.charge(n) {
		return &hdrInvalid
	}
	f.bytes += n
	f.names = append(f.names, name)
	f.values = append(f.values, append([]byte(nil), value...))
	return nil
}

func (f *fields) remove(name string) {
	name = strings.ToLower(name)
	j := 0
	for i, n := range f.names {
		if n == name {
			sz := int64(len(n) + len(f.values[i]))
			f.h.release(sz)
			f.bytes -= sz
			continue
		}
		f.names[j], f.values[j] = n, f.values[i]
		j++
	}
	f.names, f.values = f.names[:j], f.values[:j]
}

// clone copies f, charged anew; nil when the budget is out.
func (f *fields) clone(immutable bool) *fields {
	if !f.h.charge(f.bytes) {
		return nil
	}
	c := &fields{h: f.h, immutable: immutable, bytes: f.bytes,
		names: append([]string(nil), f.names...), values: make([][]byte, len(f.values))}
	for i, v := range f.values {
		c.values[i] = append([]byte(nil), v...)
	}
	return c
}

func (f *fields) pairs() [][2]string {
	out := make([][2]string, len(f.names))
	for i := range f.names {
		out[i] = [2]string{f.names[i], string(f.values[i])}
	}
	return out
}

type outRequest struct {
	method    string
	pathQuery abi.Option
	scheme    abi.Option
	authority abi.Option
	headers   *fields
	body      *outBody // set by body(); the body is a handle of its own
}

func (r *outRequest) close() { r.headers.close() }

// outBody is an outgoing-body: bytes written through its stream, until finish or drop.
type outBody struct {
	h           *Host
	mu          sync.Mutex
	buf         []byte
	over        bool // the body went over its cap or the budget
	streamTaken bool
	ended       bool
	finished    bool
	done        chan struct{} // closed at finish or drop
}

// end closes the body once, finished or abandoned.
func (b *outBody) end(finished bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return
	}
	b.ended, b.finished = true, finished
	close(b.done)
}

// close is the drop of an unfinished body: the request it belongs to fails.
func (b *outBody) close() {
	b.end(false)
	b.mu.Lock()
	if !b.finished {
		b.h.release(int64(len(b.buf)))
		b.buf = nil
	}
	b.mu.Unlock()
}

// bodySink is the output-stream of an outgoing-body.
type bodySink struct{ b *outBody }

func (s bodySink) write(p []byte) error {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ended {
		return errors.New("the outgoing body is finished")
	}
	if int64(len(b.buf)+len(p)) > b.h.env.MaxRequestBody || !b.h.charge(int64(len(p))) {
		b.over = true
		return errors.New("the outgoing body is over its cap")
	}
	b.buf = append(b.buf, p...)
	return nil
}

type inResponse struct {
	status   uint16
	headers  [][2]string
	body     *netBody
	consumed bool
}

func (r *inResponse) close() {
	if !r.consumed {
		r.body.unref()
	}
}

type inBody struct {
	body        *netBody
	streamTaken bool
}

func (b *inBody) close() { b.body.unref() }

// future is a future-incoming-response: the request runs in its own goroutine.
type future struct {
	h      *Host
	done   chan struct{}
	cancel context.CancelFunc
	mu     sync.Mutex
	resp   *HTTPResponse
	held   *netBody
	errc   *abi.Variant
	taken  bool
	drop   bool
}

// close is the drop of the future: a request not yet answered is abandoned, an answer
// never taken is released; one taken lives on in its incoming-response.
func (f *future) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drop = true
	if f.taken {
		return
	}
	f.cancel()
	if f.held != nil {
		f.held.unref()
		f.held = nil
	}
}

// futureTrailers is ready at once: incoming-body.finish ends the body, and its result is
// the body's failure, if it failed (trailers are not passed on).
type futureTrailers struct {
	taken bool
	code  *abi.Variant
}

type requestOptions struct{ timeouts [3]abi.Option }

const httpTypes = "wasi:http/types"

func httpSpecs() []*spec {
	m := func(k kind, name string, params []param, result *abi.Type, impl func(c *call, a []any) (any, error)) *spec {
		return fn(httpTypes, "[method]"+k.String()+"."+name, append(ps(self(k)), params...), result, impl)
	}
	fieldName := pr("name", abi.String.Named("field-name"))
	reqGet := func(get func(r *outRequest) any) func(c *call, a []any) (any, error) {
		return func(c *call, a []any) (any, error) {
			r, err := borrowed[*outRequest](c, a[0], kOutgoingRequest)
			if err != nil {
				return nil, err
			}
			return get(r), nil
		}
	}
	reqSet := func(set func(r *outRequest, v any) bool) func(c *call, a []any) (any, error) {
		return func(c *call, a []any) (any, error) {
			r, err := borrowed[*outRequest](c, a[0], kOutgoingRequest)
			if err != nil {
				return nil, err
			}
			if !set(r, a[1]) {
				return fail(nil), nil
			}
			return ok(nil), nil
		}
	}
	unit := abi.ResultOf(nil, nil)
	specs := []*spec{
		drop(httpTypes, kFields),
		drop(httpTypes, kOutgoingRequest),
		drop(httpTypes, kOutgoingBody),
		drop(httpTypes, kRequestOptions),
		drop(httpTypes, kFutureIncomingResponse),
		drop(httpTypes, kIncomingResponse),
		drop(httpTypes, kIncomingBody),
		drop(httpTypes, kFutureTrailers),

		fn(httpTypes, "[constructor]fields", nil, own(kFields), func(c *call, _ []any) (any, error) {
			return c.h.tab.add(kFields, &fields{h: c.h}, 0)
		}),
		{iface: httpTypes, name: "[static]fields.from-list", params: ps(pr("entries", tFieldEntries)),
			result: abi.ResultOf(own(kFields), tHeaderError), pre: preFieldList, impl: func(c *call, a []any) (any, error) {
				f := &fields{h: c.h}
				for _, e := range a[0].([]any) {
					kv := e.([]any)
					if r := f.add(kv[0].(string), kv[1].([]byte)); r != nil {
						f.close()
						return *r, nil
					}
				}
				h, err := c.h.tab.add(kFields, f, 0)
				if err != nil {
					f.close()
					return nil, err
				}
				return ok(h), nil
			}},
		m(kFields, "get", ps(fieldName), abi.List(tBytes), func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			name := strings.ToLower(a[1].(string))
			out := []any{}
			for i, n := range f.names {
				if n == name {
					out = append(out, f.values[i])
				}
			}
			return out, nil
		}),
		m(kFields, "has", ps(fieldName), abi.Bool, func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			name := strings.ToLower(a[1].(string))
			for _, n := range f.names {
				if n == name {
					return true, nil
				}
			}
			return false, nil
		}),
		m(kFields, "set", ps(fieldName, pr("value", abi.List(tBytes))), abi.ResultOf(nil, tHeaderError), func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			if f.immutable {
				return hdrImmutable, nil
			}
			name := a[1].(string)
			if !validFieldName(name) {
				return hdrInvalid, nil
			}
			f.remove(name)
			for _, v := range a[2].([]any) {
				if r := f.add(name, v.([]byte)); r != nil {
					return *r, nil
				}
			}
			return ok(nil), nil
		}),
		m(kFields, "delete", ps(fieldName), abi.ResultOf(nil, tHeaderError), func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			if f.immutable {
				return hdrImmutable, nil
			}
			if !validFieldName(a[1].(string)) {
				return hdrInvalid, nil
			}
			f.remove(a[1].(string))
			return ok(nil), nil
		}),
		m(kFields, "append", ps(fieldName, pr("value", tBytes.Named("field-value"))), abi.ResultOf(nil, tHeaderError), func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			if f.immutable {
				return hdrImmutable, nil
			}
			if r := f.add(a[1].(string), a[2].([]byte)); r != nil {
				return *r, nil
			}
			return ok(nil), nil
		}),
		m(kFields, "entries", nil, tFieldEntries, func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			out := make([]any, len(f.names))
			for i := range f.names {
				out[i] = []any{f.names[i], f.values[i]}
			}
			return out, nil
		}),
		m(kFields, "clone", nil, own(kFields), func(c *call, a []any) (any, error) {
			f, err := borrowed[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			return c.addFields(f, false)
		}),

		fn(httpTypes, "[constructor]outgoing-request", ps(pr("headers", own(kFields))), own(kOutgoingRequest), func(c *call, a []any) (any, error) {
			f, err := taken[*fields](c, a[0], kFields)
			if err != nil {
				return nil, err
			}
			f.immutable = true
			return c.h.tab.add(kOutgoingRequest, &outRequest{method: "GET", headers: f}, 0)
		}),
		m(kOutgoingRequest, "body", nil, abi.ResultOf(own(kOutgoingBody), nil), func(c *call, a []any) (any, error) {
			r, err := borrowed[*outRequest](c, a[0], kOutgoingRequest)
			if err != nil {
				return nil, err
			}
			if r.body != nil {
				return fail(nil), nil
			}
			b := &outBody{h: c.h, done: make(chan struct{})}
			h, err := c.h.tab.add(kOutgoingBody, b, 0)
			if err != nil {
				return nil, err
			}
			r.body = b
			return ok(h), nil
		}),
		m(kOutgoingRequest, "method", nil, tMethod, reqGet(func(r *outRequest) any { return methodValue(r.method) })),
		m(kOutgoingRequest, "set-method", ps(pr("method", tMethod)), unit, reqSet(func(r *outRequest, v any) bool {
			m := v.(abi.Variant)
			if m.Case < uint32(len(methodNames)) {
				r.method = methodNames[m.Case]
				return true
			}
			s := m.Value.(string)
			if !validFieldName(s) { // a method is a token, as a field name is
				return false
			}
			r.method = s
			return true
		})),
		m(kOutgoingRequest, "path-with-query", nil, abi.OptionOf(abi.String), reqGet(func(r *outRequest) any { return r.pathQuery })),
		m(kOutgoingRequest, "set-path-with-query", ps(pr("path-with-query", abi.OptionOf(abi.String))), unit, reqSet(func(r *outRequest, v any) bool {
			o := v.(abi.Option)
			if o.Some && !validURIPart(o.Value.(string), true) {
				return false
			}
			r.pathQuery = o
			return true
		})),
		m(kOutgoingRequest, "scheme", nil, abi.OptionOf(tScheme), reqGet(func(r *outRequest) any { return r.scheme })),
		m(kOutgoingRequest, "set-scheme", ps(pr("scheme", abi.OptionOf(tScheme))), unit, reqSet(func(r *outRequest, v any) bool {
			o := v.(abi.Option)
			if o.Some {
				s := o.Value.(abi.Variant)
				if s.Case == 2 && !validScheme(s.Value.(string)) {
					return false
				}
			}
			r.scheme = o
			return true
		})),
		m(kOutgoingRequest, "authority", nil, abi.OptionOf(abi.String), reqGet(func(r *outRequest) any { return r.authority })),
		m(kOutgoingRequest, "set-authority", ps(pr("authority", abi.OptionOf(abi.String))), unit, reqSet(func(r *outRequest, v any) bool {
			o := v.(abi.Option)
			if o.Some && !validURIPart(o.Value.(string), false) {
				return false
			}
			r.authority = o
			return true
		})),
		m(kOutgoingRequest, "headers", nil, own(kFields), func(c *call, a []any) (any, error) {
			r, err := borrowed[*outRequest](c, a[0], kOutgoingRequest)
			if err != nil {
				return nil, err
			}
			return c.addFields(r.headers, true)
		}),

		m(kOutgoingBody, "write", nil, abi.ResultOf(own(kOutputStream), nil), func(c *call, a []any) (any, error) {
			b, err := borrowed[*outBody](c, a[0], kOutgoingBody)
			if err != nil {
				return nil, err
			}
			if b.streamTaken {
				return fail(nil), nil
			}
			h, err := c.h.tab.add(kOutputStream, &outputStream{sink: bodySink{b}}, a[0].(uint32))
			if err != nil {
				return nil, err
			}
			b.streamTaken = true
			return ok(h), nil
		}),
		fn(httpTypes, "[static]outgoing-body.finish", ps(pr("this", own(kOutgoingBody)), pr("trailers", abi.OptionOf(own(kFields)))), abi.ResultOf(nil, tHTTPError), func(c *call, a []any) (any, error) {
			b, err := taken[*outBody](c, a[0], kOutgoingBody)
			if err != nil {
				return nil, err
			}
			if t := a[1].(abi.Option); t.Some {
				// Trailers cannot go out through the policy's transport: taken and dropped.
				if err := c.h.tab.drop(t.Value.(uint32), kFields); err != nil {
					b.close()
					return nil, err
				}
			}
			b.mu.Lock()
			over, size := b.over, len(b.buf)
			b.mu.Unlock()
			if over {
				b.close()
				return fail(abi.Variant{Case: heRequestBodySize, Value: some(uint64(size))}), nil
			}
			b.end(true)
			return ok(nil), nil
		}),

		fn(httpTypes, "[constructor]request-options", nil, own(kRequestOptions), func(c *call, _ []any) (any, error) {
			return c.h.tab.add(kRequestOptions, &requestOptions{}, 0)
		}),
		fn("wasi:http/outgoing-handler", "handle", ps(pr("request", own(kOutgoingRequest)), pr("options", abi.OptionOf(own(kRequestOptions)))),
			abi.ResultOf(own(kFutureIncomingResponse), tHTTPError), handle),

		m(kFutureIncomingResponse, "subscribe", nil, own(kPollable), func(c *call, a []any) (any, error) {
			f, err := borrowed[*future](c, a[0], kFutureIncomingResponse)
			if err != nil {
				return nil, err
			}
			return c.subscribe(a[0], kFutureIncomingResponse, f.done)
		}),
		m(kFutureIncomingResponse, "get", nil, abi.OptionOf(abi.ResultOf(abi.ResultOf(own(kIncomingResponse), tHTTPError), nil)), futureGet),

		m(kIncomingResponse, "status", nil, abi.U16.Named("status-code"), func(c *call, a []any) (any, error) {
			r, err := borrowed[*inResponse](c, a[0], kIncomingResponse)
			if err != nil {
				return nil, err
			}
			return r.status, nil
		}),
		m(kIncomingResponse, "headers", nil, own(kFields), func(c *call, a []any) (any, error) {
			r, err := borrowed[*inResponse](c, a[0], kIncomingResponse)
			if err != nil {
				return nil, err
			}
			f := &fields{h: c.h, immutable: true}
			for _, kv := range r.headers {
				if validFieldName(kv[0]) && validFieldValue([]byte(kv[1])) && len(f.names) < MaxFieldEntries {
					n := int64(len(kv[0]) + len(kv[1]))
					if !c.h.charge(n) {
						f.close()
						return nil, trap(CodeLimit, "the host's buffer budget is spent: the response headers were refused", false)
					}
					f.bytes += n
					f.names = append(f.names, strings.ToLower(kv[0]))
					f.values = append(f.values, []byte(kv[1]))
				}
			}
			h, err := c.h.tab.add(kFields, f, 0)
			if err != nil {
				f.close()
				return nil, err
			}
			return h, nil
		}),
		m(kIncomingResponse, "consume", nil, abi.ResultOf(own(kIncomingBody), nil), func(c *call, a []any) (any, error) {
			r, err := borrowed[*inResponse](c, a[0], kIncomingResponse)
			if err != nil {
				return nil, err
			}
			if r.consumed {
				return fail(nil), nil
			}
			h, err := c.h.tab.add(kIncomingBody, &inBody{body: r.body}, 0)
			if err != nil {
				return nil, err
			}
			r.consumed = true
			return ok(h), nil
		}),
		m(kIncomingBody, "stream", nil, abi.ResultOf(own(kInputStream), nil), func(c *call, a []any) (any, error) {
			b, err := borrowed[*inBody](c, a[0], kIncomingBody)
			if err != nil {
				return nil, err
			}
			if b.streamTaken {
				return fail(nil), nil
			}
			b.body.ref()
			s := &inputStream{src: b.body, onDrop: b.body.unref}
			h, err := c.h.tab.add(kInputStream, s, a[0].(uint32))
			if err != nil {
				b.body.unref()
				return nil, err
			}
			b.streamTaken = true
			return ok(h), nil
		}),
		fn(httpTypes, "[static]incoming-body.finish", ps(pr("this", own(kIncomingBody))), own(kFutureTrailers), func(c *call, a []any) (any, error) {
			b, err := taken[*inBody](c, a[0], kIncomingBody)
			if err != nil {
				return nil, err
			}
			code := b.body.failure()
			b.close()
			return c.h.tab.add(kFutureTrailers, &futureTrailers{code: code}, 0)
		}),
		m(kFutureTrailers, "subscribe", nil, own(kPollable), func(c *call, a []any) (any, error) {
			return c.subscribe(a[0], kFutureTrailers, nil)
		}),
		m(kFutureTrailers, "get", nil, abi.OptionOf(abi.ResultOf(abi.ResultOf(abi.OptionOf(own(kFields)), tHTTPError), nil)), func(c *call, a []any) (any, error) {
			t, err := borrowed[*futureTrailers](c, a[0], kFutureTrailers)
			if err != nil {
				return nil, err
			}
			if t.taken {
				return some(fail(nil)), nil
			}
			t.taken = true
			if t.code != nil {
				return some(ok(fail(*t.code))), nil
			}
			return some(ok(ok(none))), nil // trailers are not passed on
		}),
		fn(httpTypes, "http-error-code", ps(pr("err", abi.Borrow("io-error"))), abi.OptionOf(tHTTPError), func(c *call, a []any) (any, error) {
			e, err := borrowed[*ioError](c, a[0], kError)
			if err != nil {
				return nil, err
			}
			if !e.isHTTP {
				return none, nil
			}
			return some(e.httpErr), nil
		}),
	}
	for i, name := range []string{"connect-timeout", "first-byte-timeout", "between-bytes-timeout"} {
		specs = append(specs,
			m(kRequestOptions, name, nil, abi.OptionOf(tDuration), func(c *call, a []any) (any, error) {
				o, err := borrowed[*requestOptions](c, a[0], kRequestOptions)
				if err != nil {
					return nil, err
				}
				return o.timeouts[i], nil
			}),
			m(kRequestOptions, "set-"+name, ps(pr("duration", abi.OptionOf(tDuration))), unit, func(c *call, a []any) (any, error) {
				o, err := borrowed[*requestOptions](c, a[0], kRequestOptions)
				if err != nil {
					return nil, err
				}
				o.timeouts[i] = a[1].(abi.Option)
				return ok(nil), nil
			}))
	}
	return specs
}

// preFieldList refuses more entries than a fields resource may hold before lifting.
func preFieldList(h *Host, flat []uint64) error {
	if n := uint32(flat[1]); n > MaxFieldEntries {
		return trapf(CodeLimit, false, "fields.from-list of %d entries: more than the %d a fields resource holds", n, MaxFieldEntries)
	}
	return nil
}

// addFields adds a copy of f as a new fields handle.
func (c *call) addFields(f *fields, immutable bool) (any, error) {
	cl := f.clone(immutable)
	if cl == nil {
		return nil, trap(CodeLimit, "the host's buffer budget is spent: a fields copy was refused", false)
	}
	h, err := c.h.tab.add(kFields, cl, 0)
	if err != nil {
		cl.close()
		return nil, err
	}
	return h, nil
}

func methodValue(m string) abi.Variant {
	for i, n := range methodNames {
		if n == m {
			return abi.Variant{Case: uint32(i)}
		}
	}
	return abi.Variant{Case: uint32(len(methodNames)), Value: m}
}

func validScheme(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// validURIPart checks a path-with-query (which must start with "/") or an authority
// (which may hold no "/", "?", "#" or userinfo): printable ASCII, no spaces.
func validURIPart(s string, path bool) bool {
	if len(s) > 8192 {
		return false
	}
	if path && s != "" && s[0] != '/' {
		return false
	}
	if !path && (s == "" || strings.ContainsAny(s, "/?#@")) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func handle(c *call, a []any) (any, error) {
	r, err := taken[*outRequest](c, a[0], kOutgoingRequest)
	if err != nil {
		return nil, err
	}
	if o := a[1].(abi.Option); o.Some {
		if err := c.h.tab.drop(o.Value.(uint32), kRequestOptions); err != nil {
			r.close()
			return nil, err
		}
	}
	req, code := buildRequest(r)
	if code != nil {
		r.close()
		return fail(*code), nil
	}
	if c.h.env.HTTP == nil {
		r.close()
		return fail(abi.Variant{Case: heRequestDenied}), nil
	}
	if check := c.h.env.HTTPCheck; check != nil {
		if err := check(req.URL); errors.Is(err, ErrDenied) {
			r.close()
			return fail(abi.Variant{Case: heRequestDenied}), nil
		}
	}
	if int(c.h.inFlight.Add(1)) > c.h.env.MaxInFlight {
		c.h.inFlight.Add(-1)
		r.close()
		return fail(abi.Variant{Case: heConnectionLimitReached}), nil
	}
	// The request lives as long as the call that made it, the host, and the future or
	// the response body that holds it; it counts as in flight until it ends.
	ctx, cancel := context.WithCancel(c.ctx)
	stopHost := context.AfterFunc(c.h.done, cancel)
	stop := sync.OnceFunc(func() {
		stopHost()
		cancel()
		c.h.inFlight.Add(-1)
	})
	f := &future{h: c.h, done: make(chan struct{}), cancel: cancel}
	h, err := c.h.tab.add(kFutureIncomingResponse, f, 0)
	if err != nil {
		stop()
		r.close()
		return nil, err
	}
	r.headers.close() // its entries were copied into req
	go func() {
		resp, code := f.run(ctx, r.body, req)
		b := f.finish(resp, code, stop)
		if b == nil {
			stop()
			return
		}
		b.pump() // the body now owns stop: it ends the request when the guest lets go
	}()
	return ok(h), nil
}

// buildRequest turns the guest's request into the sender's; a code when it cannot be sent.
func buildRequest(r *outRequest) (HTTPRequest, *abi.Variant) {
	scheme := "https"
	if r.scheme.Some {
		switch s := r.scheme.Value.(abi.Variant); s.Case {
		case 0:
			scheme = "http"
		case 1:
			scheme = "https"
		default:
			v := abi.Variant{Case: heRequestURIInvalid}
			return HTTPRequest{}, &v
		}
	}
	if !r.authority.Some {
		v := abi.Variant{Case: heRequestURIInvalid}
		return HTTPRequest{}, &v
	}
	path := "/"
	if r.pathQuery.Some && r.pathQuery.Value.(string) != "" {
		path = r.pathQuery.Value.(string)
	}
	return HTTPRequest{Method: r.method, URL: scheme + "://" + r.authority.Value.(string) + path, Headers: r.headers.pairs()}, nil
}

// run waits for the body (if the guest took one) to be finished, then sends the request.
func (f *future) run(ctx context.Context, body *outBody, req HTTPRequest) (*HTTPResponse, *abi.Variant) {
	if body != nil {
		select {
		case <-body.done:
		case <-ctx.Done():
			v := internalError("the request was abandoned before its body was finished")
			return nil, &v
		}
		body.mu.Lock()
		finished, buf := body.finished, body.buf
		body.mu.Unlock()
		if !finished {
			v := internalError("the outgoing body was dropped without outgoing-body.finish")
			return nil, &v
		}
		req.Body = buf
		defer f.h.release(int64(len(buf)))
	}
	resp, err := f.h.env.HTTP(ctx, req)
	if err != nil {
		var v abi.Variant
		switch {
		case errors.Is(err, ErrDenied):
			v = abi.Variant{Case: heRequestDenied}
		case strings.Contains(err.Error(), "connection refused"):
			v = abi.Variant{Case: heConnectionRefused}
		default:
			v = internalError(err.Error())
		}
		return nil, &v
	}
	return resp, nil
}

// finish records the outcome and makes the future ready; it returns the body the guest
// may now read, which will call stop when released, or nil (the caller stops).
func (f *future) finish(resp *HTTPResponse, code *abi.Variant, stop func()) *netBody {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer close(f.done)
	if code != nil {
		f.errc = code
		return nil
	}
	if f.drop {
		resp.Body.Close()
		return nil
	}
	f.resp = resp
	f.held = newNetBody(f.h, resp.Body, stop)
	return f.held
}

func futureGet(c *call, a []any) (any, error) {
	f, err := borrowed[*future](c, a[0], kFutureIncomingResponse)
	if err != nil {
		return nil, err
	}
	select {
	case <-f.done:
	default:
		return none, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.taken {
		return some(fail(nil)), nil
	}
	if f.errc != nil {
		f.taken = true
		return some(ok(fail(*f.errc))), nil
	}
	r := &inResponse{status: f.resp.Status, headers: f.resp.Headers, body: f.held}
	h, err := c.h.tab.add(kIncomingResponse, r, 0)
	if err != nil {
		return nil, err
	}
	f.taken = true
	return some(ok(ok(h))), nil
}
