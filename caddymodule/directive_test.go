package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestPathDirectives adapts each form of the capsule and capsule_replay directives: one
// argument is the path (absolute ones included, as Caddy's root reads them), two are a
// matcher and the path; every mistake is one row.
func TestPathDirectives(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		matcher    string // the route's matcher as JSON ("" = none)
		handler    string // the handler's JSON
		err        string // a substring of the adapter's error
	}{
		{name: "absolute path alone", body: "capsule /srv/capsules/hello/murmur.yaml",
			handler: `{"handler":"capsule","manifest":"/srv/capsules/hello/murmur.yaml"}`},
		{name: "relative path alone", body: "capsule capsules/hello/murmur.yaml",
			handler: `{"handler":"capsule","manifest":"capsules/hello/murmur.yaml"}`},
		{name: "wildcard and absolute path", body: "capsule * /srv/hello/murmur.yaml",
			handler: `{"handler":"capsule","manifest":"/srv/hello/murmur.yaml"}`},
		{name: "path matcher and path", body: "capsule /agents/hello/* /srv/hello/murmur.yaml",
			matcher: `[{"path":["/agents/hello/*"]}]`, handler: `{"handler":"capsule","manifest":"/srv/hello/murmur.yaml"}`},
		{name: "named matcher and path", body: "@api path /api/*\ncapsule @api hello/murmur.yaml",
			matcher: `[{"path":["/api/*"]}]`, handler: `{"handler":"capsule","manifest":"hello/murmur.yaml"}`},
		{name: "options", body: "capsule /srv/hello/murmur.yaml {\n\tpublic_url https://agents.example.com/hello/\n\tcard 1.0\n\tqueue_depth 3\n}",
			handler: `{"card":"1.0","handler":"capsule","manifest":"/srv/hello/murmur.yaml","public_url":"https://agents.example.com/hello/","queue_depth":3}`},
		{name: "replay absolute", body: "capsule_replay /srv/cassettes",
			handler: `{"cassettes":"/srv/cassettes","handler":"capsule_replay"}`},
		{name: "replay with matcher", body: "capsule_replay /v1/* /srv/cassettes",
			matcher: `[{"path":["/v1/*"]}]`, handler: `{"cassettes":"/srv/cassettes","handler":"capsule_replay"}`},

		{name: "no path", body: "capsule", err: "wrong argument count"},
		{name: "three arguments", body: "capsule /a/* b c", err: "wrong argument count"},
		{name: "two paths, no matcher", body: "capsule a.yaml b.yaml", err: "wrong argument count"},
		{name: "card other than 1.0", body: "capsule a.yaml {\n\tcard 0.3\n}", err: "card takes 1.0"},
		{name: "public_url without a value", body: "capsule a.yaml {\n\tpublic_url\n}", err: "wrong argument count"},
		{name: "unknown subdirective", body: "capsule a.yaml {\n\tfrobnicate\n}", err: `unknown capsule subdirective "frobnicate"`},
		{name: "replay without a folder", body: "capsule_replay", err: "wrong argument count"},
		{name: "replay with three arguments", body: "capsule_replay /a/* b c", err: "wrong argument count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:8080 {\n"+tc.body+"\n}\n"), nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			matcher, handler := ourRoute(t, out)
			if matcher != tc.matcher || handler != tc.handler {
				t.Errorf("adapted to matcher %s handler %s, want %s %s\n%s", matcher, handler, tc.matcher, tc.handler, out)
			}
		})
	}
}

// ourRoute finds the route holding a capsule or capsule_replay handler in an adapted
// config (the site's own host matcher wraps it in a subroute).
func ourRoute(t *testing.T, cfg []byte) (matcher, handler string) {
	t.Helper()
	type route struct {
		Match  json.RawMessage   `json:"match"`
		Handle []json.RawMessage `json:"handle"`
	}
	var walk func(routes []route) bool
	walk = func(routes []route) bool {
		for _, r := range routes {
			for _, h := range r.Handle {
				var head struct {
					Handler string  `json:"handler"`
					Routes  []route `json:"routes"`
				}
				json.Unmarshal(h, &head)
				if head.Handler == "capsule" || head.Handler == "capsule_replay" {
					matcher, handler = string(r.Match), string(h)
					return true
				}
				if walk(head.Routes) {
					return true
				}
			}
		}
		return false
	}
	var c struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []route `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	for _, s := range c.Apps.HTTP.Servers {
		if walk(s.Routes) {
			return matcher, handler
		}
	}
	t.Fatalf("no capsule route in %s", cfg)
	return "", ""
}
