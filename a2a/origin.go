package a2a

import (
	"net/http"
	"net/url"
	"strings"
)

// RequestOrigin returns the URL a client sent r to, before any proxy or route changed
// it: the scheme (TLS or not), the Host header and orig's path, where orig is the
// request's URL as the server first received it (r.URL when nothing rewrote it).
//
// When trusted — the immediate peer is a proxy the operator trusts — X-Forwarded-Proto,
// X-Forwarded-Host and X-Forwarded-Prefix replace the scheme, the host and prepend to the
// path; otherwise they are ignored, since any client can send them
// (docs/operators.md, "Behind a proxy").
func RequestOrigin(r *http.Request, orig *url.URL, trusted bool) *url.URL {
	if orig == nil {
		orig = r.URL
	}
	u := &url.URL{Scheme: "http", Host: r.Host, Path: orig.Path, RawPath: orig.RawPath}
	if r.TLS != nil {
		u.Scheme = "https"
	}
	if !trusted {
		return u
	}
	if p := strings.ToLower(firstForwarded(r, "X-Forwarded-Proto")); p == "http" || p == "https" {
		u.Scheme = p
	}
	if h := firstForwarded(r, "X-Forwarded-Host"); validHost(h) {
		u.Host = h
	}
	if p := firstForwarded(r, "X-Forwarded-Prefix"); p != "" {
		if pu, err := url.Parse(p); err == nil && pu.Scheme == "" && pu.Host == "" && pu.RawQuery == "" && pu.Fragment == "" &&
			strings.HasPrefix(pu.Path, "/") && !strings.HasPrefix(pu.Path, "//") {
			prefix := strings.TrimSuffix(pu.EscapedPath(), "/")
			joined, err := url.Parse(prefix + u.EscapedPath())
			if err == nil {
				u.Path, u.RawPath = joined.Path, joined.RawPath
			}
		}
	}
	return u
}

// firstForwarded returns the first, left-most value of a forwarded header: the one the
// first proxy wrote, nearest the client.
func firstForwarded(r *http.Request, name string) string {
	v, _, _ := strings.Cut(r.Header.Get(name), ",")
	return strings.TrimSpace(v)
}

// validHost accepts a host[:port] as a Host header may carry it, nothing else (no
// userinfo, path or spaces), so a forwarded host cannot smuggle a different URL.
func validHost(h string) bool {
	if h == "" || len(h) > 255 {
		return false
	}
	u, err := url.Parse("http://" + h)
	return err == nil && u.Host == h && u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" &&
		!strings.ContainsAny(h, " \t\\\"'<>")
}

// endpoint is the public URL of the capsule's JSON-RPC endpoint for r: the operator's
// fixed public URL, else the path the client used (the card's location without the
// well-known suffix, an HTTP+JSON route's path without the route, or the POST path
// itself) on the client's scheme and host.
func (h *Handler) endpoint(r *http.Request, cfg Config) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	var o *url.URL
	if cfg.Origin != nil {
		o = cfg.Origin(r)
	}
	if o == nil {
		o = RequestOrigin(r, nil, false)
	}
	path := o.EscapedPath()
	if _, isCard := cardPrefix(r.URL.EscapedPath()); isCard {
		prefix, ok := cardPrefix(path)
		if !ok {
			// A route rewrote some other path to the card's: where the client would
			// post is unknown, so name the endpoint as this handler sees it.
			prefix, _ = cardPrefix(r.URL.EscapedPath())
		}
		path = prefix
	} else if i := strings.Index(path, grpcServicePath); i >= 0 {
		// A gRPC call: its path is the service's method, after the route's prefix if a
		// proxy gave it one; the endpoint is what comes before.
		path = path[:i]
	} else if _, isREST := restBase(r.URL.EscapedPath()); isREST {
		// An HTTP+JSON request: the endpoint is its route's base, as for JSON-RPC.
		if base, ok := restBase(path); ok {
			path = base
		} else {
			path, _ = restBase(r.URL.EscapedPath())
		}
	}
	return o.Scheme + "://" + o.Host + strings.TrimSuffix(path, "/") + "/"
}
