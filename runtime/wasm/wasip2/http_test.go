package wasip2_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// HTTP error-code cases the tests expect.
const (
	heConnectionLimitReached = 11
	heRequestDenied          = 15
	heResponseBodySize       = 28
)

func httpGuest(t *testing.T) (*guest, string) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Test"))
		w.WriteHeader(201)
		w.Write(append([]byte(r.Method+" "+r.URL.RequestURI()+" "), body...))
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return newGuest(t, "testdata/http.wat", wasip2.Env{HTTP: allowOnly(u.Host)}), u.Host
}

// allowOnly is a sender that reaches hostport alone and refuses every other authority
// with wasip2.ErrDenied, as a network policy does; the gateway's own sender, with the
// capsule's rules, is tested in runtime/wasm/murmur.
func allowOnly(hostport string) wasip2.HTTPSender {
	return func(ctx context.Context, req wasip2.HTTPRequest) (*wasip2.HTTPResponse, error) {
		u, err := url.Parse(req.URL)
		if err != nil {
			return nil, err
		}
		if u.Host != hostport {
			return nil, fmt.Errorf("%w: %s is not allowed", wasip2.ErrDenied, u.Host)
		}
		r, err := http.NewRequestWithContext(ctx, req.Method, req.URL, bytes.NewReader(req.Body))
		if err != nil {
			return nil, err
		}
		for _, h := range req.Headers {
			r.Header.Add(h[0], h[1])
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return nil, err
		}
		var hs [][2]string
		for k, vs := range resp.Header {
			for _, v := range vs {
				hs = append(hs, [2]string{strings.ToLower(k), v})
			}
		}
		return &wasip2.HTTPResponse{Status: uint16(resp.StatusCode), Headers: hs, Body: readerBody{resp.Body}}, nil
	}
}

// readerBody is an http.Response body as a WASI 0.2 response body (BodyReader).
type readerBody struct{ rc io.ReadCloser }

func (b readerBody) Read(max int) ([]byte, error) {
	p := make([]byte, max)
	n, err := b.rc.Read(p)
	if errors.Is(err, io.EOF) {
		err = nil // the end is an empty read
	}
	return p[:n], err
}

func (b readerBody) Close() error { return b.rc.Close() }

// request builds an outgoing request (POST, http, authority, /echo?q=1, header X-Test)
// and returns its handle.
func (g *guest) request(authority string) uint64 {
	g.t.Helper()
	f := g.handle("fields-new")
	n, nl := g.str(data, "X-Test")
	v, vl := g.str(data+64, "yes")
	g.must("fields-append", f, n, nl, v, vl, ret)
	if g.u8(ret) != 0 {
		g.t.Fatalf("fields.append: %d %d", g.u8(ret), g.u8(ret+1))
	}
	req := g.handle("request-new", f)
	if g.must("set-method", req, 2, 0, 0)[0] != 0 {
		g.t.Fatal("set-method")
	}
	if g.must("set-scheme", req, 1, 0, 0, 0)[0] != 0 {
		g.t.Fatal("set-scheme")
	}
	p, l := g.str(data, authority)
	if g.must("set-authority", req, 1, p, l)[0] != 0 {
		g.t.Fatal("set-authority")
	}
	p, l = g.str(data, "/echo?q=1")
	if g.must("set-path-with-query", req, 1, p, l)[0] != 0 {
		g.t.Fatal("set-path-with-query")
	}
	return req
}

// await blocks on the future and returns get's option<result<result<response, code>>>
// read at ret: option case at +0, outer result at +8, inner at +16, payload at +24.
func (g *guest) await(fut uint64) {
	g.t.Helper()
	pl := g.handle("future-subscribe", fut)
	g.must("block", pl)
	g.must("drop-pollable", pl)
	g.must("future-get", fut, ret)
	if g.u8(ret) != 1 || g.u8(ret+8) != 0 {
		g.t.Fatalf("future.get after block: option %d, result %d", g.u8(ret), g.u8(ret+8))
	}
}

func TestHTTPAllowed(t *testing.T) {
	g, hostport := httpGuest(t)
	req := g.request(hostport)
	g.must("request-body", req, ret)
	body := uint64(g.u32(ret + 4))
	g.must("body-write", body, ret)
	bs := uint64(g.u32(ret + 4))
	g.must("handle", req, 0, 0, ret)
	if g.u8(ret) != 0 {
		t.Fatalf("handle: error-code %d", g.u8(ret+8))
	}
	fut := uint64(g.u32(ret + 8))
	p, n := g.str(data, "hello body")
	g.must("blocking-write-and-flush", bs, p, n, ret)
	// finish while the body's stream lives traps: it is the body's child.
	_, err := g.call("body-finish", body, 0, 0, ret)
	wantTrap(t, err, wasip2.CodeChildren)
	g.must("drop-output-stream", bs)
	g.must("body-finish", body, 0, 0, ret)
	if g.u8(ret) != 0 {
		t.Fatalf("finish: %d", g.u8(ret))
	}
	g.await(fut)
	if g.u8(ret+16) != 0 {
		t.Fatalf("response error-code %d", g.u8(ret+24))
	}
	resp := uint64(g.u32(ret + 24))
	if s := g.must("status", resp)[0]; s != 201 {
		t.Errorf("status %d", s)
	}
	hs := g.handle("response-headers", resp)
	n2, l2 := g.str(data, "x-echo")
	g.must("fields-get", hs, n2, l2, ret)
	if vals, cnt := g.u32(ret), g.u32(ret+4); cnt != 1 || string(g.list(vals)) != "yes" {
		t.Errorf("x-echo: %d values", cnt)
	}
	g.must("drop-fields", hs)
	g.must("consume", resp, ret)
	ib := uint64(g.u32(ret + 4))
	g.must("incoming-body-stream", ib, ret)
	is := uint64(g.u32(ret + 4))
	g.must("blocking-read", is, 1000, ret)
	if got := string(g.list(ret + 4)); got != "POST /echo?q=1 hello body" {
		t.Errorf("body %q", got)
	}
	_, err = g.call("drop-incoming-body", ib)
	wantTrap(t, err, wasip2.CodeChildren)
	g.must("drop-input-stream", is)
	tr := g.handle("incoming-body-finish", ib)
	g.must("drop-trailers", tr)
	g.must("drop-response", resp)
	g.must("drop-future", fut)
	if n := g.h.Handles(); n != 0 {
		t.Errorf("%d handles left", n)
	}
}

func TestHTTPDenied(t *testing.T) {
	g, _ := httpGuest(t)
	for _, authority := range []string{"evil.example.com", "127.0.0.1:1", "169.254.169.254"} {
		t.Run(authority, func(t *testing.T) {
			req := g.request(authority)
			g.must("handle", req, 0, 0, ret)
			if g.u8(ret) != 0 {
				t.Fatalf("handle: error-code %d", g.u8(ret+8))
			}
			fut := uint64(g.u32(ret + 8))
			g.await(fut)
			if g.u8(ret+16) != 1 || g.u8(ret+24) != heRequestDenied {
				t.Errorf("inner result %d, error-code %d; want HTTP-request-denied", g.u8(ret+16), g.u8(ret+24))
			}
			g.must("drop-future", fut)
		})
	}

	// Without an HTTP grant handle refuses at once.
	g2 := newGuest(t, "testdata/http.wat", wasip2.Env{})
	req := g2.request("example.com")
	g2.must("handle", req, 0, 0, ret)
	if g2.u8(ret) != 1 || g2.u8(ret+8) != heRequestDenied {
		t.Errorf("handle without a grant: %d %d", g2.u8(ret), g2.u8(ret+8))
	}
}

func TestHTTPHostile(t *testing.T) {
	g, hostport := httpGuest(t)
	f := g.handle("fields-new")
	for _, tt := range []struct{ name, value string }{{"bad name", "v"}, {"x-ok", "bad\r\nvalue"}, {"Host", "evil"}, {"Transfer-Encoding", "chunked"}} {
		n, nl := g.str(data, tt.name)
		v, vl := g.str(data+64, tt.value)
		g.must("fields-append", f, n, nl, v, vl, ret)
		if g.u8(ret) != 1 {
			t.Errorf("fields.append(%q, %q) accepted", tt.name, tt.value)
		}
	}
	req := g.handle("request-new", f)
	_, err := g.call("fields-entries", f, ret)
	wantTrap(t, err, wasip2.CodeHandle) // given to the request: gone
	hs := g.handle("request-headers", req)
	n, nl := g.str(data, "x-a")
	g.must("fields-append", hs, n, nl, n, nl, ret)
	if g.u8(ret) != 1 || g.u8(ret+1) != 2 {
		t.Errorf("append to a request's headers: %d %d, want immutable", g.u8(ret), g.u8(ret+1))
	}
	p, l := g.str(data, "bad path")
	if g.must("set-path-with-query", req, 1, p, l)[0] != 1 {
		t.Error("a path with a space was accepted")
	}
	p, l = g.str(data, "user@"+hostport)
	if g.must("set-authority", req, 1, p, l)[0] != 1 {
		t.Error("an authority with userinfo was accepted")
	}
	_, err = g.call("handle", 7777, 0, 0, ret)
	wantTrap(t, err, wasip2.CodeHandle)
	_, err = g.call("fields-from-list", data, 1<<20, ret)
	wantTrap(t, err, wasip2.CodeLimit)

	// A future dropped while its request waits for a body that never comes.
	req2 := g.request(hostport)
	g.must("request-body", req2, ret)
	body := uint64(g.u32(ret + 4))
	g.must("handle", req2, 0, 0, ret)
	fut := uint64(g.u32(ret + 8))
	g.must("drop-future", fut)
	g.must("drop-body", body)

	// A body dropped unfinished fails its request.
	req3 := g.request(hostport)
	g.must("request-body", req3, ret)
	body = uint64(g.u32(ret + 4))
	g.must("handle", req3, 0, 0, ret)
	fut = uint64(g.u32(ret + 8))
	g.must("drop-body", body)
	g.await(fut)
	if g.u8(ret+16) != 1 || g.u8(ret+24) != 38 {
		t.Errorf("dropped body: inner %d code %d, want internal-error", g.u8(ret+16), g.u8(ret+24))
	}
}

// chanBody is a response body the test feeds chunk by chunk: Read waits for the next
// one or for the request's context to end; Close is reported on closed.
type chanBody struct {
	ctx    context.Context
	chunks chan bodyChunk
	closed chan struct{}
	once   sync.Once
}

type bodyChunk struct {
	p   []byte
	err error
}

func (b *chanBody) Read(int) ([]byte, error) {
	select {
	case c := <-b.chunks:
		return c.p, c.err
	case <-b.ctx.Done():
		return nil, b.ctx.Err()
	}
}

func (b *chanBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// waitClosed fails the test unless b is closed in good time (a guard, not a pause: it
// returns as soon as the host closes the body).
func waitClosed(t *testing.T, b *chanBody) {
	t.Helper()
	select {
	case <-b.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the response body was never closed")
	}
}

// TestHTTPBodyStreams: an incoming-body's stream hands the guest each chunk as the
// sender's body yields it: read answers nothing while none has arrived and the stream's
// pollable is ready exactly while bytes are held; skip and blocking-read take what came;
// blocking-read traps when its call's deadline passes first; a body over its cap fails
// the stream with HTTP-response-body-size, and so does the body's future-trailers. A
// request counts in flight until its response is let go, which cancels the request and
// closes its body.
func TestHTTPBodyStreams(t *testing.T) {
	bodies := make(chan *chanBody, 4)
	send := func(ctx context.Context, req wasip2.HTTPRequest) (*wasip2.HTTPResponse, error) {
		b := &chanBody{ctx: ctx, chunks: make(chan bodyChunk), closed: make(chan struct{})}
		bodies <- b
		return &wasip2.HTTPResponse{Status: 200, Body: b}, nil
	}
	g := newGuest(t, "testdata/http.wat", wasip2.Env{HTTP: send, MaxInFlight: 1})
	get := func() (fut, resp uint64) {
		t.Helper()
		g.must("handle", g.request("example.com"), 0, 0, ret)
		if g.u8(ret) != 0 {
			t.Fatalf("handle: error-code %d", g.u8(ret+8))
		}
		fut = uint64(g.u32(ret + 8))
		g.await(fut)
		if g.u8(ret+16) != 0 {
			t.Fatalf("response error-code %d", g.u8(ret+24))
		}
		return fut, uint64(g.u32(ret + 24))
	}
	read := func(fn string, is, n uint64) string {
		t.Helper()
		g.must(fn, is, n, ret)
		if g.u8(ret) != 0 {
			t.Fatalf("%s: stream-error %d", fn, g.u8(ret+4))
		}
		return string(g.list(ret + 4))
	}

	fut, resp := get()
	b := <-bodies
	g.must("consume", resp, ret)
	ib := uint64(g.u32(ret + 4))
	g.must("incoming-body-stream", ib, ret)
	is := uint64(g.u32(ret + 4))
	pl := g.handle("input-subscribe", is)
	if got := read("read", is, 10); got != "" || g.handle("ready", pl) != 0 {
		t.Fatalf("before any chunk: read %q, ready %d", got, g.handle("ready", pl))
	}
	b.chunks <- bodyChunk{p: []byte("abc")}
	g.must("block", pl)
	if got := read("read", is, 2); got != "ab" || g.handle("ready", pl) != 1 {
		t.Fatalf("first read %q, ready %d; want \"ab\" and ready", got, g.handle("ready", pl))
	}
	if got := read("read", is, 10); got != "c" || g.handle("ready", pl) != 0 {
		t.Fatalf("second read %q, ready %d; want \"c\" and not ready", got, g.handle("ready", pl))
	}
	b.chunks <- bodyChunk{p: []byte("defg")}
	g.must("block", pl)
	if g.must("skip", is, 2, ret); g.u8(ret) != 0 || g.u64(ret+8) != 2 {
		t.Fatalf("skip: %d, %d", g.u8(ret), g.u64(ret+8))
	}
	if got := read("blocking-read", is, 10); got != "fg" {
		t.Fatalf("blocking-read %q", got)
	}

	// Nothing comes: blocking-read ends with its call's deadline, the stream lives on.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := g.callCtx(ctx, "blocking-read", is, 10, ret)
	cancel()
	wantTrap(t, err, wasip2.CodeContext)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("%v does not match context.DeadlineExceeded", err)
	}

	b.chunks <- bodyChunk{err: fmt.Errorf("%w: 70 bytes over 64", wasip2.ErrResponseBodySize)}
	if g.must("blocking-read", is, 10, ret); g.u8(ret) != 1 || g.u8(ret+4) != 0 {
		t.Fatalf("over the cap: result %d, stream-error %d; want last-operation-failed", g.u8(ret), g.u8(ret+4))
	}
	e := uint64(g.u32(ret + 8))
	if g.must("http-error-code", e, ret); g.u8(ret) != 1 || g.u8(ret+8) != heResponseBodySize {
		t.Errorf("http-error-code: option %d, case %d; want HTTP-response-body-size", g.u8(ret), g.u8(ret+8))
	}
	g.must("drop-error", e)
	if g.must("read", is, 10, ret); g.u8(ret) != 1 || g.u8(ret+4) != 1 {
		t.Errorf("read after the failure: %d %d, want closed", g.u8(ret), g.u8(ret+4))
	}
	waitClosed(t, b)
	g.must("drop-pollable", pl)
	g.must("drop-input-stream", is)
	tr := g.handle("incoming-body-finish", ib)
	if g.must("trailers-get", tr, ret); g.u8(ret) != 1 || g.u8(ret+8) != 0 || g.u8(ret+16) != 1 || g.u8(ret+24) != heResponseBodySize {
		t.Errorf("trailers: %d %d %d %d, want the body's error-code", g.u8(ret), g.u8(ret+8), g.u8(ret+16), g.u8(ret+24))
	}
	g.must("drop-trailers", tr)
	g.must("drop-response", resp)
	g.must("drop-future", fut)

	// MaxInFlight 1: a response not let go holds its request, so the next is refused;
	// dropping it unread cancels the request, closes the body and frees the place.
	fut2, resp2 := get()
	b2 := <-bodies
	g.must("handle", g.request("example.com"), 0, 0, ret)
	if g.u8(ret) != 1 || g.u8(ret+8) != heConnectionLimitReached {
		t.Fatalf("handle while a body is open: %d %d, want connection-limit-reached", g.u8(ret), g.u8(ret+8))
	}
	g.must("drop-response", resp2)
	g.must("drop-future", fut2)
	waitClosed(t, b2)
	if b2.ctx.Err() == nil {
		t.Error("the dropped response's request was not canceled")
	}
	fut3, resp3 := get()
	<-bodies
	g.must("drop-response", resp3)
	g.must("drop-future", fut3)
	if n := g.h.Handles(); n != 0 {
		t.Errorf("%d handles left", n)
	}
}
