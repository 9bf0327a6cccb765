package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/capsulegate/capsulegate/a2a"
)

// parseHandlerCaddyfile builds the handler from the capsule directive; see
// UnmarshalCaddyfile.
func parseHandlerCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	c := new(Handler)
	err := c.UnmarshalCaddyfile(h.Dispenser)
	return c, err
}

// UnmarshalCaddyfile reads the directive (its matcher, if any, already taken by
// registerPathDirective)
//
//	capsule <manifest> {
//	    lock        <path>
//	    auth bearer <ENV_NAME>
//	    auth bearer {
//	        <principal> <ENV_NAME>
//	        ...
//	    }
//	    max_body    <size>
//	    queue_depth <n>
//	    concurrency <n>
//	    context_idle <duration>
//	    public_url  <url>
//	    card        1.0
//	}
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if !d.NextArg() {
		return d.ArgErr()
	}
	h.Manifest = d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		switch sub {
		case "lock":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.Lock = d.Val()
		case "auth":
			if err := h.unmarshalAuth(d); err != nil {
				return err
			}
		case "limits":
			if err := h.unmarshalLimits(d); err != nil {
				return err
			}
		case "policy":
			if err := h.unmarshalPolicy(d); err != nil {
				return err
			}
		case "max_body":
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := humanize.ParseBytes(d.Val())
			if err != nil || n == 0 || n > 1<<40 {
				return d.Errf("max_body %q: want a size such as 1MiB", d.Val())
			}
			h.MaxBody = int64(n)
		case "public_url":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.PublicURL = d.Val()
		case "grpc":
			if !d.NextArg() {
				return d.ArgErr()
			}
			h.GRPC = d.Val()
		case "card":
			if !d.NextArg() || d.Val() != a2a.CardV10 && d.Val() != a2a.CardV03 {
				return d.Errf("card takes 1.0 (the strict A2A 1.0 card to every client) or 0.3 (the mixed 0.3 + 1.0 card to clients that do not ask for 1.0); leave it out for the default")
			}
			h.Card = d.Val()
		case "queue_depth":
			if err := positiveInt(d, sub, &h.QueueDepth); err != nil {
				return err
			}
		case "concurrency":
			if err := positiveInt(d, sub, &h.Concurrency); err != nil {
				return err
			}
		case "context_idle":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("context_idle %q: want a duration such as 15m", d.Val())
			}
			h.ContextIdle = caddy.Duration(dur)
		default:
			return d.Errf("unknown capsule subdirective %q (known: lock, auth, limits, policy, max_body, queue_depth, concurrency, context_idle, public_url, grpc, card)", sub)
		}
		if err := lineDone(d, sub); err != nil {
			return err
		}
	}
	return nil
}

// positiveInt reads the subdirective's one argument, an integer > 0, into dst.
func positiveInt(d *caddyfile.Dispenser, sub string, dst *int) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(d.Val())
	if err != nil || n <= 0 {
		return d.Errf("%s %q: want an integer > 0", sub, d.Val())
	}
	*dst = n
	return nil
}

// unmarshalAuth reads `auth bearer <ENV_NAME>` (one token shared by every client) or
// `auth bearer { <principal> <ENV_NAME> ... }` (a token per principal).
func (h *Handler) unmarshalAuth(d *caddyfile.Dispenser) error {
	const usage = "auth takes `bearer <ENV_NAME>` (one shared token), `bearer { <principal> <ENV_NAME> ... }` (a token per principal), `jwt { issuer … audience … jwks_url … }` or `mtls [cn|uri|dns|email]`"
	if !d.NextArg() {
		return d.Errf(usage)
	}
	switch d.Val() {
	case "jwt":
		if d.NextArg() {
			return d.Errf("auth jwt takes a block: auth jwt { issuer <url> audience <aud> jwks_url <url> }")
		}
		return h.unmarshalJWT(d)
	case "mtls":
		field := "cn"
		if d.NextArg() {
			field = d.Val()
		}
		if d.NextArg() {
			return d.Errf("auth mtls takes at most one argument: cn, uri, dns or email")
		}
		if h.Auth == nil {
			h.Auth = &Auth{}
		}
		h.Auth.MTLS = field
		return nil
	case "bearer":
	default:
		return d.Errf(usage)
	}
	if h.Auth == nil {
		h.Auth = &Auth{}
	}
	if d.NextArg() {
		h.Auth.BearerEnv = d.Val()
		if d.NextArg() {
			return d.Errf(usage)
		}
		return nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		principal := d.Val()
		if !d.NextArg() {
			return d.Errf("auth bearer: principal %q needs the environment variable holding its token: `%s <ENV_NAME>`", principal, principal)
		}
		h.Auth.Tokens = append(h.Auth.Tokens, NamedToken{Principal: principal, Env: d.Val()})
		if d.NextArg() {
			return d.Errf("auth bearer: `%s` takes one environment variable name", principal)
		}
	}
	if len(h.Auth.Tokens) == 0 && h.Auth.BearerEnv == "" {
		return d.Errf(usage)
	}
	return nil
}
