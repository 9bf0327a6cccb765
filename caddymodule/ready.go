package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/capsulegate/capsulegate/taskstore"
)

func init() {
	caddy.RegisterModule(Ready{})
	httpcaddyfile.RegisterHandlerDirective("capsule_ready", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		r := new(Ready)
		err := r.UnmarshalCaddyfile(h.Dispenser)
		return r, err
	})
	httpcaddyfile.RegisterDirectiveOrder("capsule_ready", httpcaddyfile.Before, "respond")
}

// Ready is the HTTP handler http.handlers.capsule_ready: the gateway's readiness, for
// load balancers and Kubernetes probes (docs/operators.md "Readiness"). It answers 200
// {"ready":true} while the gateway can take tasks, and 503 with the reasons while it
// cannot: the task store's database does not answer, or the gateway is draining (Caddy's
// shutdown_delay has begun, or the process is exiting; a reload, which stops the old
// config's apps, is not draining).
type Ready struct {
	app *App
}

// CaddyModule returns the Caddy module information.
func (Ready) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.capsule_ready", New: func() caddy.Module { return new(Ready) }}
}

// Provision finds the capsule app, whose task store the handler asks.
func (r *Ready) Provision(ctx caddy.Context) error {
	app, err := ctx.App("capsule")
	if err != nil {
		return err
	}
	r.app = app.(*App)
	return nil
}

// readyPing bounds the store's round trip of one readiness request: a probe that waits
// longer than a load balancer's timeout is as good as a refusal.
const readyPing = 2 * time.Second

// ServeHTTP answers the probe; it never calls next.
func (r *Ready) ServeHTTP(w http.ResponseWriter, req *http.Request, _ caddyhttp.Handler) error {
	var reasons []string
	if draining(req) || caddy.Exiting() {
		reasons = append(reasons, "draining: the gateway is shutting down")
	}
	if hs, ok := r.app.store.(taskstore.Health); ok {
		ctx, cancel := context.WithTimeout(req.Context(), readyPing)
		err := hs.Ping(ctx)
		cancel()
		if err != nil {
			reasons = append(reasons, "task store: "+err.Error())
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	status, body := http.StatusOK, map[string]any{"ready": true}
	if len(reasons) > 0 {
		w.Header().Set("Retry-After", "1")
		status, body = http.StatusServiceUnavailable, map[string]any{"ready": false, "reasons": reasons}
	}
	w.WriteHeader(status)
	if req.Method != http.MethodHead {
		return json.NewEncoder(w).Encode(body)
	}
	return nil
}

// draining reports whether Caddy's HTTP server is in its shutdown delay.
func draining(req *http.Request) bool {
	repl, ok := req.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return false
	}
	v, _ := repl.Get("http.shutting_down")
	b, _ := v.(bool)
	return b
}

// UnmarshalCaddyfile reads `capsule_ready`, which takes no arguments nor block.
func (r *Ready) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(d.Nesting()) {
		return d.Err("capsule_ready takes no block")
	}
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Ready)(nil)
	_ caddyhttp.MiddlewareHandler = (*Ready)(nil)
	_ caddyfile.Unmarshaler       = (*Ready)(nil)
)
