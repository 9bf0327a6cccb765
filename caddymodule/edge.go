package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// The edge of a capsule route (docs/operators.md "Authentication", "Limits", "Policy"):
// JWTs and client certificates beside bearer tokens, per-principal limits, a CEL policy,
// and the gateway-wide overload shedding of the capsule app.

// JWTAuth verifies bearer tokens that are JWTs against their issuer's keys.
type JWTAuth struct {
	// Issuer is the iss every token must carry.
	Issuer string `json:"issuer"`
	// Audiences holds the aud values accepted: a token must name one of them.
	Audiences []string `json:"audiences"`
	// JWKSURL is where the issuer's keys are fetched, through a network policy that
	// allows that URL's host and port alone; JWKSFile reads them from disk instead.
	JWKSURL  string `json:"jwks_url,omitempty"`
	JWKSFile string `json:"jwks_file,omitempty"`
	// Claim names the principal (default sub).
	Claim string `json:"claim,omitempty"`
	// Algorithms are the signature algorithms accepted (default: every asymmetric one).
	Algorithms []string `json:"algorithms,omitempty"`
	// Skew is the clock skew allowed on exp, nbf and iat (default 60s).
	Skew caddy.Duration `json:"skew,omitempty"`
	// MinRefresh is how often, at most, a token with a key id the JWKS lacks fetches
	// it again (default 30s): a rotated key is picked up within it.
	MinRefresh caddy.Duration `json:"min_refresh,omitempty"`
}

// Limits bound what one principal may ask of the capsule (a2a.Limits).
type Limits struct {
	// Rate is requests per second per principal, on this gateway; Burst the bucket.
	Rate  float64 `json:"rate,omitempty"`
	Burst int     `json:"burst,omitempty"`
	// Concurrent is a principal's unfinished tasks at once, on this gateway.
	Concurrent int `json:"concurrent,omitempty"`
	// Tokens is a principal's model tokens per Window (default 24h), shared by the
	// gateways of one task store.
	Tokens int64          `json:"tokens,omitempty"`
	Window caddy.Duration `json:"window,omitempty"`
}

// Policy is the route's CEL policy (edgepolicy.Config).
type Policy struct {
	// Allow must be true for a request to be served.
	Allow string `json:"allow,omitempty"`
	// Egress lists the network rules a principal's tasks are narrowed to.
	Egress string `json:"egress,omitempty"`
}

// Shed is the capsule app's overload shedding (a2a.ShedBounds).
type Shed struct {
	// MaxQueued is how many admitted tasks may wait for a slot across every capsule.
	MaxQueued int `json:"max_queued,omitempty"`
	// MaxMemory is the heap in use (bytes) above which new tasks are refused.
	MaxMemory uint64 `json:"max_memory,omitempty"`
	// RetryAfter is what refused clients are told to wait (default 5s).
	RetryAfter caddy.Duration `json:"retry_after,omitempty"`
}

// gatewayShed is the one Shedder of this process: it counts waiting tasks across every
// capsule and outlives reloads, which change its bounds only.
var gatewayShed = new(a2a.Shedder)

// shedder applies the app's bounds and returns the Shedder capsules share; nil when the
// app sheds nothing.
func (a *App) shedder() *a2a.Shedder {
	if a.Shed == nil {
		gatewayShed.Set(a2a.ShedBounds{})
		return nil
	}
	gatewayShed.Set(a2a.ShedBounds{MaxQueued: a.Shed.MaxQueued, MaxMemory: a.Shed.MaxMemory, RetryAfter: time.Duration(a.Shed.RetryAfter)})
	return gatewayShed
}

// limits is the handler's Limits for the A2A layer.
func (h *Handler) limits() a2a.Limits {
	if h.Limits == nil {
		return a2a.Limits{}
	}
	l := h.Limits
	return a2a.Limits{Rate: l.Rate, Burst: l.Burst, Concurrent: l.Concurrent, Tokens: l.Tokens, Window: time.Duration(l.Window)}
}

// edgeRoute builds the route's JWT verifier and policy.
func (h *Handler) edgeRoute(ctx context.Context) (*edgeauth.JWT, string, *edgepolicy.Policy, error) {
	var (
		jwt  *edgeauth.JWT
		cert string
		pol  *edgepolicy.Policy
		err  error
	)
	if a := h.Auth; a != nil {
		cert = a.MTLS
		if j := a.JWT; j != nil {
			if jwt, err = newJWT(ctx, j); err != nil {
				return nil, "", nil, err
			}
		}
	}
	if h.Policy != nil {
		if pol, err = edgepolicy.Compile(edgepolicy.Config{Allow: h.Policy.Allow, Egress: h.Policy.Egress}); err != nil {
			return nil, "", nil, err
		}
	}
	return jwt, cert, pol, nil
}

// newJWT builds the verifier of j: its JWKS is fetched through a network policy that
// allows the JWKS URL's scheme, host and port and nothing else, so a misconfigured URL
// cannot make the gateway reach a host it was not told to.
func newJWT(ctx context.Context, j *JWTAuth) (*edgeauth.JWT, error) {
	cfg := edgeauth.JWTConfig{Issuer: j.Issuer, Audiences: j.Audiences, JWKSURL: j.JWKSURL, JWKSFile: j.JWKSFile, Claim: j.Claim,
		Algorithms: j.Algorithms, Skew: time.Duration(j.Skew), MinRefresh: time.Duration(j.MinRefresh)}
	if j.JWKSURL != "" {
		u, err := url.Parse(j.JWKSURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errs.New(edgeauth.CodeConfig, "caddy", fmt.Sprintf("auth jwt: jwks_url %q is not an http(s) URL", j.JWKSURL),
				"write the issuer's JWKS URL, such as https://issuer.example.com/.well-known/jwks.json")
		}
		rules, err := netpolicy.ParseRules([]string{u.Scheme + "://" + u.Host})
		if err != nil {
			return nil, errs.Wrap(err, edgeauth.CodeConfig, "caddy", fmt.Sprintf("auth jwt: jwks_url %q names a host the network policy cannot allow", j.JWKSURL),
				"write the issuer's JWKS URL by a host name or address the gateway may reach")
		}
		cfg.Client = &http.Client{Transport: netpolicy.NewTransport(&netpolicy.Dialer{Rules: rules}),
			// A redirect would reach a host the rule above never named.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return edgeauth.NewJWT(ctx, cfg)
}

// unmarshalJWT reads `auth jwt { issuer … audience … jwks_url … | jwks_file … claim …
// algorithms … skew … }`.
func (h *Handler) unmarshalJWT(d *caddyfile.Dispenser) error {
	j := &JWTAuth{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.Errf("auth jwt: %s needs a value", key)
		}
		one := func() error {
			if len(args) != 1 {
				return d.Errf("auth jwt: %s takes one value", key)
			}
			return nil
		}
		switch key {
		case "issuer":
			if err := one(); err != nil {
				return err
			}
			j.Issuer = args[0]
		case "audience":
			j.Audiences = append(j.Audiences, args...)
		case "jwks_url":
			if err := one(); err != nil {
				return err
			}
			j.JWKSURL = args[0]
		case "jwks_file":
			if err := one(); err != nil {
				return err
			}
			j.JWKSFile = args[0]
		case "claim":
			if err := one(); err != nil {
				return err
			}
			j.Claim = args[0]
		case "algorithms":
			j.Algorithms = append(j.Algorithms, args...)
		case "skew", "min_refresh":
			if err := one(); err != nil {
				return err
			}
			dur, err := caddy.ParseDuration(args[0])
			if err != nil || dur < 0 {
				return d.Errf("auth jwt: %s %q: want a duration such as 60s", key, args[0])
			}
			if key == "skew" {
				j.Skew = caddy.Duration(dur)
			} else {
				j.MinRefresh = caddy.Duration(dur)
			}
		default:
			return d.Errf("auth jwt: unknown setting %q (known: issuer, audience, jwks_url, jwks_file, claim, algorithms, skew, min_refresh)", key)
		}
	}
	if h.Auth == nil {
		h.Auth = &Auth{}
	}
	if h.Auth.JWT != nil {
		return d.Errf("auth jwt is given twice; one route verifies one issuer")
	}
	h.Auth.JWT = j
	return nil
}

// unmarshalLimits reads `limits { rate <n>[/s] burst <n> concurrent <n> tokens <n>
// window <duration> }`.
func (h *Handler) unmarshalLimits(d *caddyfile.Dispenser) error {
	l := &Limits{}
	if d.NextArg() {
		return d.Errf("limits takes a block: limits { rate 10/s  burst 20  concurrent 4  tokens 200000  window 24h }")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		if !d.NextArg() {
			return d.Errf("limits: %s needs a value", key)
		}
		v := d.Val()
		if d.NextArg() {
			return d.Errf("limits: %s takes one value", key)
		}
		switch key {
		case "rate":
			n, err := strconv.ParseFloat(strings.TrimSuffix(v, "/s"), 64)
			if err != nil || n <= 0 {
				return d.Errf("limits: rate %q: want requests per second > 0, such as 10/s", v)
			}
			l.Rate = n
		case "burst", "concurrent":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("limits: %s %q: want an integer > 0", key, v)
			}
			if key == "burst" {
				l.Burst = n
			} else {
				l.Concurrent = n
			}
		case "tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return d.Errf("limits: tokens %q: want model tokens per window > 0, such as 200000", v)
			}
			l.Tokens = n
		case "window":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < time.Second {
				return d.Errf("limits: window %q: want a duration of at least 1s, such as 24h", v)
			}
			l.Window = caddy.Duration(dur)
		default:
			return d.Errf("limits: unknown setting %q (known: rate, burst, concurrent, tokens, window)", key)
		}
	}
	h.Limits = l
	return nil
}

// unmarshalPolicy reads `policy { allow <expr> egress <expr> }`, each expression one
// token (in backticks, which keep its quotes), compiled here so that a broken one is
// refused at its line in the Caddyfile with the column in the expression.
func (h *Handler) unmarshalPolicy(d *caddyfile.Dispenser) error {
	p := &Policy{}
	if d.NextArg() {
		return d.Errf("policy takes a block: policy { allow `<CEL expression>`  egress `<CEL expression>` }")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		args := d.RemainingArgs()
		if len(args) != 1 {
			return d.Errf("policy %s takes one CEL expression as one token: write it in backticks, such as %s `principal == \"team-a\"`", key, key)
		}
		var one edgepolicy.Config
		switch key {
		case "allow":
			p.Allow, one.Allow = args[0], args[0]
		case "egress":
			p.Egress, one.Egress = args[0], args[0]
		default:
			return d.Errf("policy: unknown setting %q (known: allow, egress)", key)
		}
		// Compiled here, so the error names this line as well as the column.
		if _, err := edgepolicy.Compile(one); err != nil {
			return d.Errf("%v", err)
		}
	}
	h.Policy = p
	return nil
}

// unmarshalShed reads the app's `shed { max_queued <n> max_memory <size> retry_after
// <duration> }`.
func (a *App) unmarshalShed(d *caddyfile.Dispenser) error {
	s := &Shed{}
	if d.NextArg() {
		return d.Errf("shed takes a block: shed { max_queued 1000  max_memory 2GiB  retry_after 5s }")
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		key := d.Val()
		if !d.NextArg() {
			return d.Errf("shed: %s needs a value", key)
		}
		v := d.Val()
		if d.NextArg() {
			return d.Errf("shed: %s takes one value", key)
		}
		switch key {
		case "max_queued":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("shed: max_queued %q: want an integer > 0", v)
			}
			s.MaxQueued = n
		case "max_memory":
			n, err := humanize.ParseBytes(v)
			if err != nil || n < 1<<20 {
				return d.Errf("shed: max_memory %q: want a size of at least 1MiB, such as 2GiB", v)
			}
			s.MaxMemory = n
		case "retry_after":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur < time.Second {
				return d.Errf("shed: retry_after %q: want a duration of at least 1s", v)
			}
			s.RetryAfter = caddy.Duration(dur)
		default:
			return d.Errf("shed: unknown setting %q (known: max_queued, max_memory, retry_after)", key)
		}
	}
	if s.MaxQueued == 0 && s.MaxMemory == 0 {
		return d.Errf("shed names no bound: give max_queued, max_memory or both")
	}
	a.Shed = s
	return nil
}
