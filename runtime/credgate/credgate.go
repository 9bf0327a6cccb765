// Package credgate is the credential gateway of a process capsule's run: a loopback HTTP
// server the harness CLI uses as its provider base URL (ANTHROPIC_BASE_URL, Codex's
// provider base_url). It holds no key itself: each request is sent on through the
// driver's outgoing HTTP (runtime/wasm Outgoing), which checks the network rules and adds
// the provider key exactly as for an http driver, and the answer streams back as it
// arrives. The harness only ever holds a per-run placeholder key, which is all the
// gateway accepts (docs/reference/process-drivers.md "The credential gateway").
package credgate

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// Config is one run's gateway.
type Config struct {
	// Endpoint is the driver artifact's gateway.endpoint: requests are sent below it.
	Endpoint string
	// Out sends them: the driver's outgoing HTTP, holding the rules and the key.
	Out *murmur.Outgoing
	// Who names the driver in denial records.
	Who string
	// Listener is where the gateway serves; nil listens on 127.0.0.1:0.
	Listener net.Listener
	// MaxBody caps a request body; 0 is DefaultMaxBody.
	MaxBody int64
}

// DefaultMaxBody is the largest request a harness may send through the gateway.
const DefaultMaxBody = 16 << 20

// readChunk is how much of a response is read and flushed at a time.
const readChunk = 32 << 10

// Server is a running gateway.
type Server struct {
	cfg         Config
	base        string
	placeholder string
	ln          net.Listener
	srv         *http.Server
	cancel      context.CancelFunc
	wg          sync.WaitGroup
}

// Start serves cfg's gateway with a fresh placeholder key.
func Start(cfg Config) (*Server, error) {
	if cfg.Out == nil || cfg.Endpoint == "" {
		return nil, errors.New("credgate: no endpoint or outgoing client")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	ln := cfg.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("credgate: %w", err)
		}
	}
	b := make([]byte, 24)
	rand.Read(b)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{cfg: cfg, base: strings.TrimSuffix(cfg.Endpoint, "/"), placeholder: "capsulegate-placeholder-" + hex.EncodeToString(b),
		ln: ln, cancel: cancel}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL the harness is given.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Placeholder is the key the harness is given in place of the provider's: the only one
// the gateway accepts, worthless anywhere else.
func (s *Server) Placeholder() string { return s.placeholder }

// Close stops the gateway and ends requests in flight.
func (s *Server) Close() error {
	s.cancel()
	err := s.srv.Close()
	s.wg.Wait()
	return err
}

// credentialHeaders are where a harness puts its key; they are checked, then dropped.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization"}

// dropped are request headers never sent on: the harness's credentials (the provider
// key is added by Out), hop-by-hop headers, and what the HTTP client sets itself.
var dropped = func() map[string]bool {
	m := map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
		"Transfer-Encoding": true, "Upgrade": true, "Host": true, "Content-Length": true, "Accept-Encoding": true, "Cookie": true}
	for _, h := range credentialHeaders {
		m[h] = true
	}
	return m
}()

// holdsPlaceholder reports whether one of r's credential headers is the placeholder,
// bare or as a bearer token.
func (s *Server) holdsPlaceholder(r *http.Request) bool {
	for _, h := range credentialHeaders {
		for _, v := range r.Header.Values(h) {
			v = strings.TrimSpace(v)
			if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
				v = strings.TrimSpace(v[7:])
			}
			if subtle.ConstantTimeCompare([]byte(v), []byte(s.placeholder)) == 1 {
				return true
			}
		}
	}
	return false
}

// ServeHTTP forwards one provider request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method != http.MethodPost && r.Method != http.MethodGet:
		fail(w, http.StatusMethodNotAllowed, "credential gateway: method "+r.Method+" is not forwarded")
		return
	case !s.holdsPlaceholder(r):
		fail(w, http.StatusUnauthorized, "credential gateway: the request does not carry this run's key")
		return
	case r.URL.Path == "" || path.Clean(r.URL.Path) != r.URL.Path || strings.Contains(r.URL.Path, "//"):
		fail(w, http.StatusBadRequest, fmt.Sprintf("credential gateway: path %q is not a clean path", r.URL.Path))
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	if err != nil {
		fail(w, http.StatusBadRequest, "credential gateway: reading the request: "+err.Error())
		return
	}
	if int64(len(body)) > s.cfg.MaxBody {
		fail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("credential gateway: the request is over %d bytes", s.cfg.MaxBody))
		return
	}
	target := s.base + r.URL.Path
	if r.URL.RawQuery != "" {
		target += "?" + r.URL.RawQuery
	}
	var headers [][2]string
	for k, vs := range r.Header {
		if dropped[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			if strings.Contains(v, s.placeholder) {
				continue // the placeholder goes nowhere, in whatever header it hides
			}
			headers = append(headers, [2]string{k, v})
		}
	}
	stream, err := s.cfg.Out.Open(r.Context(), s.cfg.Who, murmur.OutgoingRequest{Method: r.Method, URL: target, Headers: headers, Body: body})
	if err != nil {
		fail(w, http.StatusBadGateway, "credential gateway: "+err.Error())
		return
	}
	defer stream.Close()
	for _, h := range stream.Headers {
		if !dropped[http.CanonicalHeaderKey(h[0])] {
			w.Header().Add(h[0], h[1])
		}
	}
	w.WriteHeader(int(stream.Status))
	flusher, _ := w.(http.Flusher)
	for {
		chunk, err := stream.Read(readChunk)
		if err != nil {
			return // the connection is cut: the harness sees an incomplete answer, as from the provider
		}
		if len(chunk) == 0 {
			return
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
	}
}

// fail answers an error in the shape providers use, so a harness reports it readably.
func fail(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": "capsulegate_gateway_error", "message": msg}})
}
