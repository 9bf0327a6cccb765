package murmur

import (
	"context"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// WASIP2 returns h as the outgoing HTTP of a WASI 0.2 host (wasi:http/outgoing-handler)
// for the artifact who: the same rules, redirects left unfollowed, body caps and
// credentials as capsulegate:http/outgoing, and the response body streamed as
// capsulegate:http/outgoing@0.2.0's open streams it (one OutgoingStream, one client); a
// policy refusal matches wasip2.ErrDenied, a body over the cap wasip2.ErrResponseBodySize.
func (h *Outgoing) WASIP2(who string) wasip2.HTTPSender {
	return func(ctx context.Context, req wasip2.HTTPRequest) (*wasip2.HTTPResponse, error) {
		s, err := h.Open(ctx, who, OutgoingRequest{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body})
		if err != nil {
			if errors.Is(err, ErrDenied) {
				return nil, fmt.Errorf("%w: %w", wasip2.ErrDenied, err)
			}
			return nil, err
		}
		return &wasip2.HTTPResponse{Status: s.Status, Headers: s.Headers, Body: wasip2Body{s}}, nil
	}
}

// wasip2Body is an OutgoingStream as a WASI 0.2 response body: the cap's refusal is
// marked so the guest's stream error carries HTTP-response-body-size.
type wasip2Body struct{ s *OutgoingStream }

func (b wasip2Body) Read(max int) ([]byte, error) {
	p, err := b.s.Read(max)
	if errors.Is(err, errOverCap) {
		return nil, fmt.Errorf("%w: %w", wasip2.ErrResponseBodySize, err)
	}
	return p, err
}

func (b wasip2Body) Close() error { return b.s.Close() }

// WASIP2Check returns the policy check of a WASI 0.2 host's outgoing-handler.handle for
// the artifact who: a URL whose scheme, host and port the rules refuse is denied (and
// counted) before any future exists; the addresses a name resolves to are still checked
// when the request is sent.
func (h *Outgoing) WASIP2Check(who string) func(url string) error {
	return func(raw string) error {
		u, host, port, err := parseOutgoingURL(raw)
		if err != nil {
			return nil // refused when sent, with the reason
		}
		if _, err := h.Rules.Check(u.Scheme, host, port, nil); err != nil {
			return fmt.Errorf("%w: %w", wasip2.ErrDenied, h.deny(who, host, port, err))
		}
		return nil
	}
}
