package caddymodule

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// TestEdgeCaddyfile: the auth, limits and policy subdirectives and the app's shed
// option read into the JSON config the way docs/operators.md writes them.
func TestEdgeCaddyfile(t *testing.T) {
	var h Handler
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("capsule hello/murmur.yaml {\n" +
		"\tauth bearer {\n\t\tci CI_TOKEN\n\t}\n" +
		"\tauth jwt {\n\t\tissuer https://login.example.com/\n\t\taudience capsulegate other\n\t\tjwks_url https://login.example.com/jwks.json\n" +
		"\t\tclaim email\n\t\talgorithms ES256 RS256\n\t\tskew 30s\n\t\tmin_refresh 5s\n\t}\n" +
		"\tauth mtls uri\n" +
		"\tlimits {\n\t\trate 2.5/s\n\t\tburst 10\n\t\tconcurrent 4\n\t\ttokens 200000\n\t\twindow 1h\n\t}\n" +
		"\tpolicy {\n\t\tallow `principal == \"ci\" || method == \"GetTask\"`\n\t\tegress `[\"api.example.com\"]`\n\t}\n}"))
	if err != nil {
		t.Fatal(err)
	}
	want := Handler{Manifest: "hello/murmur.yaml",
		Auth: &Auth{Tokens: []NamedToken{{Principal: "ci", Env: "CI_TOKEN"}}, MTLS: "uri",
			JWT: &JWTAuth{Issuer: "https://login.example.com/", Audiences: []string{"capsulegate", "other"}, JWKSURL: "https://login.example.com/jwks.json",
				Claim: "email", Algorithms: []string{"ES256", "RS256"}, Skew: caddy.Duration(30 * time.Second), MinRefresh: caddy.Duration(5 * time.Second)}},
		Limits: &Limits{Rate: 2.5, Burst: 10, Concurrent: 4, Tokens: 200000, Window: caddy.Duration(time.Hour)},
		Policy: &Policy{Allow: `principal == "ci" || method == "GetTask"`, Egress: `["api.example.com"]`}}
	got, _ := json.Marshal(h)
	exp, _ := json.Marshal(want)
	if string(got) != string(exp) {
		t.Errorf("handler:\n%s\nwant\n%s", got, exp)
	}
	if err := h.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	var a App
	if err := a.UnmarshalCaddyfile(caddyfile.NewTestDispenser("capsule {\n\tshed {\n\t\tmax_queued 200\n\t\tmax_memory 3GiB\n\t\tretry_after 10s\n\t}\n}")); err != nil {
		t.Fatal(err)
	}
	if s := a.Shed; s == nil || s.MaxQueued != 200 || s.MaxMemory != 3<<30 || time.Duration(s.RetryAfter) != 10*time.Second {
		t.Errorf("shed: %+v", a.Shed)
	}
}
