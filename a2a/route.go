package a2a

import (
	"context"
	"net/http"
	"time"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
)

// Route holds the settings a host applies per route rather than per handler: one capsule
// (one Handler, one task registry) may be served on two routes with different auth,
// public URLs or card versions, and each route's requests must be judged by its own
// (docs/reference/a2a.md "Routes"). Attach it with WithRoute; a request without one uses
// the Handler's Config.
type Route struct {
	Bearer      string
	Tokens      []Token
	PublicURL   string
	CardVersion string
	MaxBody     int64 // 0 = DefaultMaxBody
	// GRPC is the gRPC target the route's card lists (Config.GRPC): two routes serving
	// one capsule list their own.
	GRPC string
	// JWT, ClientCert, Policy and Limits are the route's, as Config's fields of those
	// names (a principal's rate buckets and counts are the capsule's, whichever route
	// its requests take).
	JWT        *edgeauth.JWT
	ClientCert string
	Policy     *edgepolicy.Policy
	Limits     Limits
}

type routeKey struct{}

// WithRoute returns ctx carrying rt, for a request the Handler serves.
func WithRoute(ctx context.Context, rt *Route) context.Context {
	return context.WithValue(ctx, routeKey{}, rt)
}

// CheckRoute validates rt as NewHandler validates the same fields of a Config, and returns
// it normalised (a public URL's empty path becomes "/").
func CheckRoute(rt Route) (Route, error) {
	cfg, err := normalize(Config{Card: Card{Name: "route"}, Executor: noExecutor{}, Bearer: rt.Bearer, Tokens: rt.Tokens,
		PublicURL: rt.PublicURL, CardVersion: rt.CardVersion, MaxBody: rt.MaxBody, ClientCert: rt.ClientCert, Limits: rt.Limits})
	if err != nil {
		return rt, err
	}
	rt.PublicURL, rt.MaxBody = cfg.PublicURL, cfg.MaxBody
	return rt, nil
}

// noExecutor stands in for the executor CheckRoute does not check.
type noExecutor struct{}

func (noExecutor) Execute(context.Context, *Job) Outcome { return Outcome{} }

// configFor returns the configuration that applies to r — the Handler's, with r's route
// settings over it — and when the card last changed.
func (h *Handler) configFor(r *http.Request) (Config, time.Time) {
	cfg, modified := h.cardConfig()
	if rt, ok := r.Context().Value(routeKey{}).(*Route); ok && rt != nil {
		cfg.Bearer, cfg.Tokens, cfg.PublicURL, cfg.CardVersion, cfg.GRPC = rt.Bearer, rt.Tokens, rt.PublicURL, rt.CardVersion, rt.GRPC
		cfg.MaxBody = rt.MaxBody
		cfg.JWT, cfg.ClientCert, cfg.Policy, cfg.Limits = rt.JWT, rt.ClientCert, rt.Policy, rt.Limits
		if cfg.MaxBody == 0 {
			cfg.MaxBody = DefaultMaxBody
		}
	}
	// A capsule that takes files takes bodies that hold them (Inputs.MaxMessageBytes).
	cfg.MaxBody += cfg.Inputs.bodyAllowance()
	return cfg, modified
}
