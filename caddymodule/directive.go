package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// registerPathDirective registers a handler directive whose one required argument is a
// path, read the way Caddy's own `root` reads it: one argument is the path (so an
// absolute path is not taken for a path matcher), two are a matcher and the path.
func registerPathDirective(name string, parse func(httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error)) {
	httpcaddyfile.RegisterDirective(name, func(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
		h.Next() // the directive's name
		var matcher caddy.ModuleMap
		if h.CountRemainingArgs() >= 2 {
			m, err := h.ExtractMatcherSet()
			if err != nil {
				return nil, err
			}
			matcher = m
		} else {
			h.Reset()
		}
		handler, err := parse(h)
		if err != nil {
			return nil, err
		}
		return h.NewRoute(matcher, handler), nil
	})
}
