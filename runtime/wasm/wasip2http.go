package wasm

import (
	"context"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// WASIP2 returns h as the outgoing HTTP of a WASI 0.2 host (wasi:http/outgoing-handler)
// for the artifact who: the same rules, redirects left unfollowed, body caps and
// credentials as capsulegate:http/outgoing; a policy refusal matches wasip2.ErrDenied.
func (h *Outgoing) WASIP2(who string) wasip2.HTTPSender {
	return func(ctx context.Context, req wasip2.HTTPRequest) (*wasip2.HTTPResponse, error) {
		resp, err := h.Send(ctx, who, OutgoingRequest{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body})
		if err != nil {
			if errors.Is(err, ErrDenied) {
				return nil, fmt.Errorf("%w: %w", wasip2.ErrDenied, err)
			}
			return nil, err
		}
		return &wasip2.HTTPResponse{Status: resp.Status, Headers: resp.Headers, Body: resp.Body}, nil
	}
}
