package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// TestPathDirectives adapts each form of the capsule and capsule_replay directives: one
// argument is the path (absolute ones included, as Caddy's root reads them), two are a
// matcher and the path. Their mistakes are rows of TestDirectiveErrors.
func TestPathDirectives(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		matcher    string // the route's matcher as JSON ("" = none)
		handler    string // the handler's JSON
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
		{name: "empty block", body: "capsule a.yaml {\n}", handler: `{"handler":"capsule","manifest":"a.yaml"}`},
		{name: "options", body: "capsule /srv/hello/murmur.yaml {\n\tpublic_url https://agents.example.com/hello/\n\tcard 1.0\n\tqueue_depth 3\n}",
			handler: `{"card":"1.0","handler":"capsule","manifest":"/srv/hello/murmur.yaml","public_url":"https://agents.example.com/hello/","queue_depth":3}`},
		{name: "every option", body: "capsule hello/murmur.yaml {\n\tlock /srv/hello.lock\n\tauth bearer HELLO_TOKEN\n\tmax_body 2MiB\n\tqueue_depth 4\n\tconcurrency 8\n\tcontext_idle 30m\n\tpublic_url https://a.example/\n\tcard 1.0\n}",
			handler: `{"auth":{"bearer":"HELLO_TOKEN"},"card":"1.0","concurrency":8,"context_idle":1800000000000,"handler":"capsule","lock":"/srv/hello.lock","manifest":"hello/murmur.yaml","max_body":2097152,"public_url":"https://a.example/","queue_depth":4}`},
		{name: "named tokens", body: "capsule a.yaml {\n\tauth bearer {\n\t\tteam-a TEAM_A_TOKEN\n\t\tteam-b TEAM_B_TOKEN\n\t}\n}",
			handler: `{"auth":{"tokens":[{"env":"TEAM_A_TOKEN","principal":"team-a"},{"env":"TEAM_B_TOKEN","principal":"team-b"}]},"handler":"capsule","manifest":"a.yaml"}`},
		{name: "replay absolute", body: "capsule_replay /srv/cassettes",
			handler: `{"cassettes":"/srv/cassettes","handler":"capsule_replay"}`},
		{name: "replay with matcher", body: "capsule_replay /v1/* /srv/cassettes",
			matcher: `[{"path":["/v1/*"]}]`, handler: `{"cassettes":"/srv/cassettes","handler":"capsule_replay"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte("http://127.0.0.1:8080 {\n"+tc.body+"\n}\n"), nil)
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

// TestDirectiveErrors has one row per mistake in the global capsule option (global), the
// capsule and capsule_replay directives (site): the adapter refuses it (err is part of
// its message), or the adapted module's Validate does (err is the code).
func TestDirectiveErrors(t *testing.T) {
	type row struct{ name, global, site, err string }
	rows := []row{
		{name: "app: a block under an option", global: "capsule {\n\tregistry /r {\n\t\tx\n\t}\n}", err: "registry takes no block"},
		{name: "app: argument after capsule", global: "capsule /r {\n\tregistry /r\n}", err: "wrong argument count"},
		{name: "app: unknown option", global: "capsule {\n\tregistri /r\n}", err: `unknown capsule option "registri"`},
		{name: "app: grace_period not a duration", global: "capsule {\n\tgrace_period soon\n}", err: `grace_period "soon": want a duration`},
		{name: "app: init_snapshots without a value", global: "capsule {\n\tinit_snapshots\n}", err: "init_snapshots takes on or off"},
		{name: "app: init_snapshots neither on nor off", global: "capsule {\n\tinit_snapshots maybe\n}", err: "init_snapshots takes on or off"},
		{name: "app: init_snapshots with two values", global: "capsule {\n\tinit_snapshots on off\n}", err: "wrong argument count"},
		{name: "app: instance_reuse without a value", global: "capsule {\n\tinstance_reuse\n}", err: "instance_reuse takes on or off"},
		{name: "app: instance_reuse neither on nor off", global: "capsule {\n\tinstance_reuse yes\n}", err: "instance_reuse takes on or off"},
		{name: "app: instance_reuse with two values", global: "capsule {\n\tinstance_reuse on on\n}", err: "wrong argument count"},
		{name: "app: dns_upstream not host:port", global: "capsule {\n\tdns_upstream 10.0.0.2\n}", err: "E-NET-020"},
		{name: "app: dns_upstream without a host", global: "capsule {\n\tdns_upstream :53\n}", err: "E-NET-020"},
		{name: "app: dns_upstream port out of range", global: "capsule {\n\tdns_upstream 10.0.0.2:65536\n}", err: "E-NET-020"},
		{name: "app: push with an argument", global: "capsule {\n\tpush on\n}", err: "push takes a block"},
		{name: "app: push without rules", global: "capsule {\n\tpush {\n\t}\n}", err: "push allows no webhook URL"},
		{name: "app: push allow without a rule", global: "capsule {\n\tpush {\n\t\tallow\n\t}\n}", err: "allow takes one or more rules"},
		{name: "app: push unknown option", global: "capsule {\n\tpush {\n\t\tdeny x\n\t}\n}", err: `unknown push option "deny"`},
		{name: "app: push bad rule", global: "capsule {\n\tpush {\n\t\tallow ftp://x.example\n\t}\n}", err: "E-NET-003"},
		{name: "app: retention not a duration", global: "capsule {\n\tretention forever\n}", err: `retention "forever": want a duration`},
		{name: "app: retention zero", global: "capsule {\n\tretention 0s\n}", err: "E-RUN-020"},
		{name: "app: retention negative", global: "capsule {\n\tretention -1h\n}", err: "E-RUN-020"},
		{name: "app: max_tasks not an integer", global: "capsule {\n\tmax_tasks lots\n}", err: `max_tasks "lots": want an integer`},
		{name: "app: retention without a value", global: "capsule {\n\tretention\n}", err: "wrong argument count"},
		{name: "app: retention with two values", global: "capsule {\n\tretention 1h 2h\n}", err: "wrong argument count"},
		{name: "app: max_tasks without a value", global: "capsule {\n\tmax_tasks\n}", err: "wrong argument count"},
		{name: "app: max_tasks with two values", global: "capsule {\n\tmax_tasks 1 2\n}", err: "wrong argument count"},
		{name: "app: max_tasks zero", global: "capsule {\n\tmax_tasks 0\n}", err: "E-RUN-020"},
		{name: "app: instance_reuse without init snapshots", global: "capsule {\n\tinit_snapshots off\n\tinstance_reuse on\n}", err: "E-RUN-020"},

		{name: "app: shed with an argument", global: "capsule {\n\tshed on\n}", err: "shed takes a block"},
		{name: "app: shed without a bound", global: "capsule {\n\tshed {\n\t\tretry_after 5s\n\t}\n}", err: "shed names no bound"},
		{name: "app: shed max_memory too small", global: "capsule {\n\tshed {\n\t\tmax_memory 1KB\n\t}\n}", err: `shed: max_memory "1KB"`},
		{name: "app: shed max_queued zero", global: "capsule {\n\tshed {\n\t\tmax_queued 0\n\t}\n}", err: `shed: max_queued "0"`},
		{name: "app: shed unknown setting", global: "capsule {\n\tshed {\n\t\tmax_load 3\n\t}\n}", err: `shed: unknown setting "max_load"`},

		{name: "capsule: no path", site: "capsule", err: "wrong argument count"},
		{name: "capsule: auth jwt with an argument", site: "capsule a.yaml {\n\tauth jwt x\n}", err: "auth jwt takes a block"},
		{name: "capsule: auth jwt unknown setting", site: "capsule a.yaml {\n\tauth jwt {\n\t\tissuers x\n\t}\n}", err: `auth jwt: unknown setting "issuers"`},
		{name: "capsule: auth jwt skew not a duration", site: "capsule a.yaml {\n\tauth jwt {\n\t\tskew soon\n\t}\n}", err: `auth jwt: skew "soon"`},
		{name: "capsule: auth jwt issuer twice in a line", site: "capsule a.yaml {\n\tauth jwt {\n\t\tissuer a b\n\t}\n}", err: "auth jwt: issuer takes one value"},
		{name: "capsule: auth jwt given twice", site: "capsule a.yaml {\n\tauth jwt {\n\t\tissuer a\n\t}\n\tauth jwt {\n\t\tissuer b\n\t}\n}", err: "auth jwt is given twice"},
		{name: "capsule: auth mtls field unknown", site: "capsule a.yaml {\n\tauth mtls serial\n}", err: "E-AUTH-001"},
		{name: "capsule: auth mtls two fields", site: "capsule a.yaml {\n\tauth mtls cn uri\n}", err: "auth mtls takes at most one argument"},
		{name: "capsule: limits with an argument", site: "capsule a.yaml {\n\tlimits 10\n}", err: "limits takes a block"},
		{name: "capsule: limits rate not a number", site: "capsule a.yaml {\n\tlimits {\n\t\trate fast\n\t}\n}", err: `limits: rate "fast"`},
		{name: "capsule: limits tokens zero", site: "capsule a.yaml {\n\tlimits {\n\t\ttokens 0\n\t}\n}", err: `limits: tokens "0"`},
		{name: "capsule: limits window too short", site: "capsule a.yaml {\n\tlimits {\n\t\twindow 10ms\n\t}\n}", err: `limits: window "10ms"`},
		{name: "capsule: limits unknown setting", site: "capsule a.yaml {\n\tlimits {\n\t\tqps 3\n\t}\n}", err: `limits: unknown setting "qps"`},
		{name: "capsule: policy with an argument", site: "capsule a.yaml {\n\tpolicy x\n}", err: "policy takes a block"},
		{name: "capsule: policy expression not one token", site: "capsule a.yaml {\n\tpolicy {\n\t\tallow principal == \"a\"\n\t}\n}", err: "takes one CEL expression as one token"},
		{name: "capsule: policy does not compile", site: "capsule a.yaml {\n\tpolicy {\n\t\tallow `principal ==`\n\t}\n}", err: "E-POL-001: allow 1:"},
		{name: "capsule: policy of the wrong type", site: "capsule a.yaml {\n\tpolicy {\n\t\tallow `principal`\n\t}\n}", err: "E-POL-002"},
		{name: "capsule: policy egress rule refused", site: "capsule a.yaml {\n\tpolicy {\n\t\tegress `[\"ftp://x.example\"]`\n\t}\n}", err: "E-POL-004"},
		{name: "capsule: policy unknown setting", site: "capsule a.yaml {\n\tpolicy {\n\t\tdeny `true`\n\t}\n}", err: `policy: unknown setting "deny"`},
		{name: "capsule: three arguments", site: "capsule /a/* b c", err: "wrong argument count"},
		{name: "capsule: two paths, no matcher", site: "capsule a.yaml b.yaml", err: "wrong argument count"},
		{name: "capsule: unknown subdirective", site: "capsule a.yaml {\n\tfrobnicate\n}", err: `unknown capsule subdirective "frobnicate"`},
		{name: "capsule: a block under a subdirective", site: "capsule a.yaml {\n\tlock a.lock {\n\t\tx\n\t}\n}", err: "lock takes no block"},
		{name: "capsule: lock without a path", site: "capsule a.yaml {\n\tlock\n}", err: "wrong argument count"},
		{name: "capsule: lock with two paths", site: "capsule a.yaml {\n\tlock a b\n}", err: "wrong argument count"},
		{name: "capsule: auth without a scheme", site: "capsule a.yaml {\n\tauth\n}", err: "auth takes `bearer <ENV_NAME>`"},
		{name: "capsule: auth with another scheme", site: "capsule a.yaml {\n\tauth basic TOKEN\n}", err: "auth takes `bearer <ENV_NAME>`"},
		{name: "capsule: auth bearer without a name", site: "capsule a.yaml {\n\tauth bearer\n}", err: "auth takes `bearer <ENV_NAME>`"},
		{name: "capsule: auth bearer with two names", site: "capsule a.yaml {\n\tauth bearer A B\n}", err: "auth takes `bearer <ENV_NAME>`"},
		{name: "capsule: auth bearer principal without a variable", site: "capsule a.yaml {\n\tauth bearer {\n\t\tteam-a\n\t}\n}", err: "principal \"team-a\" needs the environment variable"},
		{name: "capsule: auth bearer principal with two variables", site: "capsule a.yaml {\n\tauth bearer {\n\t\tteam-a A B\n\t}\n}", err: "takes one environment variable name"},
		{name: "capsule: auth bearer principal named twice", site: "capsule a.yaml {\n\tauth bearer {\n\t\tteam-a A\n\t\tteam-a B\n\t}\n}", err: "E-RUN-021"},
		{name: "capsule: auth bearer principal token not a variable name", site: "capsule a.yaml {\n\tauth bearer {\n\t\tteam-a sk-live-0123\n\t}\n}", err: "E-RUN-021"},
		{name: "capsule: auth bearer not a variable name", site: "capsule a.yaml {\n\tauth bearer sk-live-0123\n}", err: "E-RUN-021"},
		{name: "capsule: max_body without a size", site: "capsule a.yaml {\n\tmax_body\n}", err: "wrong argument count"},
		{name: "capsule: max_body not a size", site: "capsule a.yaml {\n\tmax_body lots\n}", err: `max_body "lots": want a size`},
		{name: "capsule: max_body zero", site: "capsule a.yaml {\n\tmax_body 0\n}", err: `max_body "0": want a size`},
		{name: "capsule: max_body over 1 TiB", site: "capsule a.yaml {\n\tmax_body 2TiB\n}", err: `max_body "2TiB": want a size`},
		{name: "capsule: max_body with two sizes", site: "capsule a.yaml {\n\tmax_body 1MiB 2MiB\n}", err: "wrong argument count"},
		{name: "capsule: queue_depth without a value", site: "capsule a.yaml {\n\tqueue_depth\n}", err: "wrong argument count"},
		{name: "capsule: concurrency zero", site: "capsule a.yaml {\n\tconcurrency 0\n}", err: `concurrency "0": want an integer > 0`},
		{name: "capsule: concurrency without a value", site: "capsule a.yaml {\n\tconcurrency\n}", err: "wrong argument count"},
		{name: "capsule: context_idle not a duration", site: "capsule a.yaml {\n\tcontext_idle soon\n}", err: `context_idle "soon": want a duration`},
		{name: "capsule: queue_depth not an integer", site: "capsule a.yaml {\n\tqueue_depth many\n}", err: `queue_depth "many": want an integer > 0`},
		{name: "capsule: queue_depth zero", site: "capsule a.yaml {\n\tqueue_depth 0\n}", err: `queue_depth "0": want an integer > 0`},
		{name: "capsule: queue_depth negative", site: "capsule a.yaml {\n\tqueue_depth -1\n}", err: `queue_depth "-1": want an integer > 0`},
		{name: "capsule: queue_depth with two values", site: "capsule a.yaml {\n\tqueue_depth 1 2\n}", err: "wrong argument count"},
		{name: "capsule: public_url without a value", site: "capsule a.yaml {\n\tpublic_url\n}", err: "wrong argument count"},
		{name: "capsule: public_url with two values", site: "capsule a.yaml {\n\tpublic_url https://a.example/ https://b.example/\n}", err: "wrong argument count"},
		{name: "capsule: public_url not http(s)", site: "capsule a.yaml {\n\tpublic_url ftp://a.example/\n}", err: "E-A2A-007"},
		{name: "capsule: public_url with a query", site: "capsule a.yaml {\n\tpublic_url https://a.example/?x=1\n}", err: "E-A2A-007"},
		{name: "capsule: card without a version", site: "capsule a.yaml {\n\tcard\n}", err: "card takes 1.0"},
		{name: "capsule: card other than 1.0 or 0.3", site: "capsule a.yaml {\n\tcard 0.2\n}", err: "card takes 1.0"},
		{name: "capsule: card with two versions", site: "capsule a.yaml {\n\tcard 1.0 1.0\n}", err: "wrong argument count"},

		{name: "capsule_replay: no folder", site: "capsule_replay", err: "wrong argument count"},
		{name: "capsule_replay: three arguments", site: "capsule_replay /a/* b c", err: "wrong argument count"},
		{name: "capsule_replay: two folders, no matcher", site: "capsule_replay a b", err: "wrong argument count"},
		{name: "capsule_replay: a block", site: "capsule_replay a {\n\tx\n}", err: "capsule_replay takes no block"},
	}
	for _, opt := range []string{"registry", "work_root", "cache_dir", "state_dir", "dns_upstream", "sandbox_helper"} {
		rows = append(rows,
			row{name: "app: " + opt + " without a value", global: "capsule {\n\t" + opt + "\n}", err: "wrong argument count"},
			row{name: "app: " + opt + " with two values", global: "capsule {\n\t" + opt + " a:1 b:2\n}", err: "wrong argument count"})
	}
	for _, tc := range rows {
		t.Run(tc.name, func(t *testing.T) {
			err := adaptAndValidate(t, tc.global, tc.site)
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
			if strings.Contains(err.Error(), "sk-live-0123") {
				t.Errorf("the error repeats what may be a token: %v", err)
			}
		})
	}
}

// adaptAndValidate adapts a Caddyfile with global in its global options and site in a
// site block, then validates the capsule app and our handler the way Caddy loads them.
func adaptAndValidate(t *testing.T, global, site string) error {
	t.Helper()
	if site == "" {
		site = "respond 404"
	}
	cf := "{\n" + global + "\n}\nhttp://127.0.0.1:8080 {\n" + site + "\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(cf), nil)
	if err != nil {
		return err
	}
	var v caddy.Validator
	if global != "" {
		var cfg struct {
			Apps struct {
				Capsule json.RawMessage `json:"capsule"`
			} `json:"apps"`
		}
		if err := json.Unmarshal(out, &cfg); err != nil {
			t.Fatal(err)
		}
		a := new(App)
		if err := json.Unmarshal(cfg.Apps.Capsule, a); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		v = a
	} else {
		_, handler := ourRoute(t, out)
		var head struct{ Handler string }
		json.Unmarshal([]byte(handler), &head)
		v = map[string]caddy.Validator{"capsule": new(Handler), "capsule_replay": new(ReplayHandler)}[head.Handler]
		if err := json.Unmarshal([]byte(handler), v); err != nil {
			t.Fatal(err)
		}
	}
	return v.Validate()
}

// ourRoute finds the route holding a capsule, capsule_replay or capsule_registry handler in an adapted
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
				if head.Handler == "capsule" || head.Handler == "capsule_replay" || head.Handler == "capsule_registry" {
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
