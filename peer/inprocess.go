package peer

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"

	"github.com/capsulegate/capsulegate/netpolicy"
)

// inProcess serves requests with a handler of this process — the gateway's own HTTP
// server, routes, authentication and all — without a socket. The network policy is
// checked as the dialer would check it: the peer's host and address against the sender's
// rules.
type inProcess struct {
	h     http.Handler
	rules netpolicy.Rules
}

func (t *inProcess) RoundTrip(req *http.Request) (*http.Response, error) {
	host, portStr := req.URL.Hostname(), req.URL.Port()
	port, err := strconv.Atoi(portStr)
	if portStr == "" {
		port = 80
	} else if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip.Unmap()}
	} else {
		addrs = []netip.Addr{netip.MustParseAddr("127.0.0.1")} // a name this process serves on loopback
	}
	if _, err := t.rules.Check("", host, port, addrs); err != nil {
		return nil, err
	}
	if n, ok := netpolicy.NarrowingOf(req.Context()); ok {
		if err := netpolicy.CheckNarrowed(n, "", host, port, addrs); err != nil {
			return nil, err
		}
	}
	in := req.Clone(req.Context())
	in.RequestURI = req.URL.RequestURI()
	in.Host = req.URL.Host
	in.RemoteAddr = "127.0.0.1:0"
	if in.Body == nil {
		in.Body = http.NoBody
	}
	// The local address a server would give the request: Caddy's placeholders read it.
	local := &net.TCPAddr{IP: net.IP(addrs[0].AsSlice()), Port: port}
	in = in.WithContext(context.WithValue(in.Context(), http.LocalAddrContextKey, net.Addr(local)))
	pr, pw := io.Pipe()
	w := &pipeResponse{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
			pw.Close()
		}()
		t.h.ServeHTTP(w, in)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	return &http.Response{Status: strconv.Itoa(w.status) + " " + http.StatusText(w.status), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: w.header.Clone(), Body: pr, ContentLength: -1, Request: req}, nil
}

// pipeResponse is a ResponseWriter whose body is read from the other end of a pipe, as
// the handler writes it: streams arrive as they are flushed.
type pipeResponse struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	status int
	ready  chan struct{}
}

func (w *pipeResponse) Header() http.Header { return w.header }

func (w *pipeResponse) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		close(w.ready)
	})
}

func (w *pipeResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush has nothing to do: every write is already handed to the reader.
func (w *pipeResponse) Flush() {}
