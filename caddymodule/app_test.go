package caddymodule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/shell"
)

// TestAppCaddyfile reads the global `capsule { … }` option into the app's JSON, each
// option under the same name; its mistakes are rows of TestDirectiveErrors.
func TestAppCaddyfile(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "capsule", `{}`},
		{"empty block", "capsule {\n}", `{}`},
		{"all", "capsule {\n registry /r\n work_root /w\n cache_dir /c\n dns_upstream 127.0.0.1:53\n init_snapshots off\n}",
			`{"registry":"/r","work_root":"/w","cache_dir":"/c","dns_upstream":"127.0.0.1:53","init_snapshots":false}`},
		{"retention", "capsule {\n retention 30d\n max_tasks 500\n}", `{"retention":2592000000000000,"max_tasks":500}`},
		{"grace period", "capsule {\n grace_period 1m\n}", `{"grace_period":60000000000}`},
		{"sandbox helper", "capsule {\n sandbox_helper /opt/gw/capsulegate-sandbox\n}", `{"sandbox_helper":"/opt/gw/capsulegate-sandbox"}`},
		{"snapshots on", "capsule {\n init_snapshots on\n}", `{"init_snapshots":true}`},
		{"reuse on", "capsule {\n instance_reuse on\n}", `{"instance_reuse":true}`},
		{"reuse off", "capsule {\n instance_reuse off\n}", `{"instance_reuse":false}`},
		{"store", "capsule {\n store {env.CAPSULE_STORE}\n store_key {env.CAPSULE_STORE_KEY}\n}",
			`{"store":"{env.CAPSULE_STORE}","store_key":"{env.CAPSULE_STORE_KEY}"}`},
		{"remote registry", "capsule {\n registry oci://ghcr.io/acme/capsules\n registry_auth {\n  username {env.U}\n  password {env.P}\n  docker_config /etc/docker.json\n }\n registry_cache /var/cache/artifacts\n registry_cache_size 500MiB\n}",
			`{"registry":"oci://ghcr.io/acme/capsules","registry_auth":{"username":"{env.U}","password":"{env.P}","docker_config":"/etc/docker.json"},"registry_cache":"/var/cache/artifacts","registry_cache_size":524288000}`},
		{"runtime pulls", "capsule {\n runtime_pulls {\n  registry oci://ghcr.io/acme/tools /srv/reg\n  registry nexus+https://nexus.example.com\n  pin echo@1.0.0 sha256:" + strings.Repeat("ab", 32) + "\n }\n}",
			`{"runtime_pulls":{"registries":["oci://ghcr.io/acme/tools","/srv/reg","nexus+https://nexus.example.com"],"pins":{"echo@1.0.0":"` + strings.Repeat("ab", 32) + `"}}}`},
		{"peer credentials", "capsule {\n peer_credential https://agents.example.com/ bearer {env.T}\n peer_credential http://10.0.0.7:8080/agents/ header X-Api-Key {env.K}\n}",
			`{"peer_credentials":[{"prefix":"https://agents.example.com/","bearer":"{env.T}"},{"prefix":"http://10.0.0.7:8080/agents/","header":"X-Api-Key","value":"{env.K}"}]}`},
		{"push", "capsule {\n push {\n  allow http://127.0.0.1:8080 https://hooks.example.com\n  allow *.example.org\n }\n}",
			`{"push":{"allow":["http://127.0.0.1:8080","https://hooks.example.com","*.example.org"]}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseAppCaddyfile(caddyfile.NewTestDispenser(tt.in), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := string(v.(httpcaddyfile.App).Value); got != tt.want {
				t.Errorf("app = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestValidate has one row per mistake only JSON can make (the Caddyfile's parser
// refuses the rest first), each refused by Validate with its code; several mistakes are
// reported together.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		module caddy.Validator
		json   string
		codes  []string // "" = valid
	}{
		{"app: empty", new(App), `{}`, nil},
		{"app: init_snapshots false", new(App), `{"init_snapshots":false}`, nil},
		{"app: bad dns_upstream", new(App), `{"dns_upstream":"ns1"}`, []string{"E-NET-020"}},
		{"app: retention and max_tasks", new(App), `{"retention":"48h","max_tasks":5}`, nil},
		{"app: zero retention", new(App), `{"retention":0}`, []string{"E-RUN-020"}},
		{"app: negative grace period", new(App), `{"grace_period":-1}`, []string{"E-RUN-020"}},
		{"app: negative retention and max_tasks", new(App), `{"retention":"-1h","max_tasks":-1}`, []string{"E-RUN-020", "E-RUN-020"}},
		{"app: zero max_tasks", new(App), `{"max_tasks":0}`, []string{"E-RUN-020"}},
		{"app: push", new(App), `{"push":{"allow":["https://hooks.example.com","localhost:8080"]}}`, nil},
		{"app: push allowing nothing", new(App), `{"push":{}}`, []string{"E-RUN-020"}},
		{"app: push with bad rules", new(App), `{"push":{"allow":["ftp://x.example","*","https://ok.example"]}}`, []string{"E-NET-003", "E-NET-015"}},
		{"app: reuse without snapshots", new(App), `{"init_snapshots":false,"instance_reuse":true}`, []string{"E-RUN-020"}},
		{"app: snapshots off, reuse by default", new(App), `{"init_snapshots":false}`, nil},
		{"app: snapshots and reuse off", new(App), `{"init_snapshots":false,"instance_reuse":false}`, nil},
		{"app: registry credentials", new(App), `{"registry_auth":{"username":"u","password":"p"},"registry_cache_size":1048576}`, nil},
		{"app: a username alone", new(App), `{"registry_auth":{"username":"u"}}`, []string{"E-RUN-020"}},
		{"app: a tiny cache", new(App), `{"registry_cache_size":1024}`, []string{"E-RUN-020"}},
		{"app: runtime pulls", new(App), `{"runtime_pulls":{"registries":["oci://ghcr.io/acme/tools"],"pins":{"echo@1.0.0":"` + strings.Repeat("ab", 32) + `"}}}`, nil},
		{"app: runtime pulls from nowhere", new(App), `{"runtime_pulls":{}}`, []string{"E-RUN-020"}},
		{"app: runtime pulls, bad registry and pins", new(App), `{"runtime_pulls":{"registries":["https://x.example"],"pins":{"echo":"` + strings.Repeat("ab", 32) + `","echo@2.0.0":"abc"}}}`,
			[]string{"E-REG-080", "E-RUN-020", "E-RUN-020"}},
		{"app: peer credentials", new(App), `{"peer_credentials":[{"prefix":"https://a.example/","bearer":"t"},{"prefix":"http://127.0.0.1:9/","header":"X-Key","value":"v"}]}`, nil},
		{"app: peer credentials, each wrong", new(App), `{"peer_credentials":[{"prefix":"ftp://a.example/","bearer":"t"},{"prefix":"https://a.example/"},` +
			`{"prefix":"https://a.example/","bearer":"t","header":"X","value":"v"},{"prefix":"https://a.example/","header":"Bad Name","value":"v"}]}`,
			[]string{"E-RUN-020", "E-RUN-020", "E-RUN-020", "E-RUN-020"}},
		{"capsule: complete", new(Handler), `{"manifest":"a.yaml","auth":{"bearer":"TOKEN"},"max_body":1,"queue_depth":1,"public_url":"https://a.example","card":"1.0"}`, nil},
		{"capsule: a gRPC target", new(Handler), `{"manifest":"a.yaml","grpc":"agents.example.com:443"}`, nil},
		{"capsule: a gRPC target that is a URL", new(Handler), `{"manifest":"a.yaml","grpc":"https://agents.example.com/x"}`, []string{"E-RUN-021"}},
		{"capsule: a gRPC target without a port", new(Handler), `{"manifest":"a.yaml","grpc":"agents.example.com"}`, []string{"E-RUN-021"}},
		{"capsule: no manifest", new(Handler), `{}`, []string{"E-RUN-021"}},
		{"capsule: negative max_body", new(Handler), `{"manifest":"a.yaml","max_body":-1}`, []string{"E-RUN-021"}},
		{"capsule: negative queue_depth", new(Handler), `{"manifest":"a.yaml","queue_depth":-1}`, []string{"E-RUN-021"}},
		{"capsule: auth without bearer", new(Handler), `{"manifest":"a.yaml","auth":{}}`, []string{"E-RUN-021"}},
		{"capsule: card 0.2", new(Handler), `{"manifest":"a.yaml","card":"0.2"}`, []string{"E-A2A-004"}},
		{"capsule: relative public_url", new(Handler), `{"manifest":"a.yaml","public_url":"/hello/"}`, []string{"E-A2A-007"}},
		{"capsule: every mistake", new(Handler), `{"max_body":-1,"queue_depth":-1,"auth":{"bearer":"a b"},"public_url":"x","card":"2"}`,
			[]string{"E-RUN-021", "E-RUN-021", "E-RUN-021", "E-RUN-021", "E-A2A-007", "E-A2A-004"}},
		{"capsule_replay: no folder", new(ReplayHandler), `{}`, []string{"E-RPL-001"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dec := json.NewDecoder(strings.NewReader(tt.json))
			dec.DisallowUnknownFields() // as Caddy decodes module config
			if err := dec.Decode(tt.module); err != nil {
				t.Fatal(err)
			}
			err := tt.module.Validate()
			if got := errs.Codes(err); strings.Join(got, " ") != strings.Join(tt.codes, " ") {
				t.Errorf("codes %v, want %v: %v", got, tt.codes, err)
			}
		})
	}
}

// TestAppRegistry: the app chooses its registry by registry.Choose, as the commands do,
// and a refused registry leaves nothing to clean up.
func TestAppRegistry(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	env := t.TempDir()
	t.Setenv("CAPSULE_REGISTRY", env)
	a := &App{WorkRoot: t.TempDir(), CacheDir: t.TempDir()}
	if err := a.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Cleanup(); err != nil || a.Registry != env {
		t.Errorf("registry %q (cleanup %v), want $CAPSULE_REGISTRY %q", a.Registry, err, env)
	}

	remote := &App{Registry: "https://registry.example.com", CacheDir: t.TempDir()}
	if err := remote.Provision(ctx); errs.Code(err) != registry.CodeRemote {
		t.Errorf("remote registry: %v, want %s", err, registry.CodeRemote)
	}
	if err := remote.Cleanup(); err != nil || remote.engine != nil {
		t.Errorf("cleanup after a refused provision: %v", err)
	}
}

// TestAppRegistryAuth: a credential written as a placeholder that is empty once
// replaced refuses the config, naming it, rather than falling back to other credentials.
func TestAppRegistryAuth(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	t.Setenv("NEXUS_READ", "")
	a := &App{Registry: "nexus+http://127.0.0.1:7800", RegistryAuth: &RegistryAuth{Token: "{env.NEXUS_READ}"}, CacheDir: t.TempDir()}
	err := a.Provision(ctx)
	if errs.Code(err) != CodeAppConfig || !strings.Contains(err.Error(), "{env.NEXUS_READ}") {
		t.Fatalf("an unset token: %v", err)
	}
	a.Cleanup()
	t.Setenv("PEER_TOKEN", "")
	a = &App{PeerCredentials: []PeerCredential{{Prefix: "https://a.example/", Bearer: "{env.PEER_TOKEN}"}}, CacheDir: t.TempDir()}
	if err := a.Provision(ctx); errs.Code(err) != CodeAppConfig || !strings.Contains(err.Error(), "{env.PEER_TOKEN}") {
		t.Errorf("an unset peer token: %v", err)
	}
	a.Cleanup()
	for _, bad := range []string{"capsule {\n runtime_pulls {\n  pin a@1.0.0\n }\n}", "capsule {\n runtime_pulls {\n  registry\n }\n}",
		"capsule {\n runtime_pulls {\n  trust x\n }\n}", "capsule {\n runtime_pulls x\n}", "capsule {\n registry_cache_size 0\n}", "capsule {\n registry_auth {\n  token a\n  token b\n }\n}",
		"capsule {\n registry_auth {\n  key x\n }\n}", "capsule {\n registry_auth x\n}",
		"capsule {\n peer_credential https://a.example/\n}", "capsule {\n peer_credential https://a.example/ token t\n}", "capsule {\n peer_credential https://a.example/ header X\n}"} {
		if _, err := parseAppCaddyfile(caddyfile.NewTestDispenser(bad), nil); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestAppRetention: the task store keeps seven days and 10000 tasks per capsule unless
// told otherwise.
func TestAppRetention(t *testing.T) {
	var a App
	if a.retention() != 168*time.Hour || a.maxTasks() != 10000 {
		t.Errorf("defaults: %s, %d", a.retention(), a.maxTasks())
	}
	if err := json.Unmarshal([]byte(`{"retention":"30d","max_tasks":5}`), &a); err != nil {
		t.Fatal(err)
	}
	if a.retention() != 30*24*time.Hour || a.maxTasks() != 5 {
		t.Errorf("set: %s, %d", a.retention(), a.maxTasks())
	}
}

// TestAppPush: without the push option capsules get no push policy; with it, every
// capsule gets the allow rules.
func TestAppPush(t *testing.T) {
	var a App
	if a.pushPolicy() != nil {
		t.Fatal("a policy without the push option")
	}
	if err := json.Unmarshal([]byte(`{"push":{"allow":["http://127.0.0.1:8080","*.example.org"]}}`), &a); err != nil {
		t.Fatal(err)
	}
	p := a.pushPolicy()
	if p == nil || len(p.Allow) != 2 || p.Allow[0].String() != "http://127.0.0.1:8080" || p.Allow[1].String() != "*.example.org" {
		t.Fatalf("policy %+v", p)
	}
}

// TestAppInstanceReuse: warm instances are on unless instance_reuse off or init_snapshots
// off says otherwise, and each setting gets its own engine.
func TestAppInstanceReuse(t *testing.T) {
	on, off := true, false
	for _, tt := range []struct {
		name            string
		snapshots, warm *bool
		reuse           bool
		key             string
	}{
		{"default", nil, nil, true, "/c"},
		{"reuse on", nil, &on, true, "/c"},
		{"reuse off", nil, &off, false, "/c\x00no-instance-reuse"},
		{"snapshots off", &off, nil, false, "/c\x00no-init-snapshots"},
		{"snapshots on, reuse off", &on, &off, false, "/c\x00no-instance-reuse"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := &App{CacheDir: "/c", InitSnapshots: tt.snapshots, InstanceReuse: tt.warm}
			if got := a.instanceReuse(); got != tt.reuse {
				t.Errorf("instanceReuse() = %v, want %v", got, tt.reuse)
			}
			if got := a.engineKey(); got != tt.key {
				t.Errorf("engineKey() = %q, want %q", got, tt.key)
			}
		})
	}
}

// TestAppSandboxHelper: sandbox_helper must name an executable helper of this gateway's
// protocol (E-SEC-005 names the option, the value, the rule and the fix), checked when
// the app is provisioned, before the engine starts; a valid one reaches the sessions.
// This test binary imports runtime/shell, so it is a valid helper.
func TestAppSandboxHelper(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	plain := filepath.Join(dir, "capsulegate-sandbox")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	for _, tc := range []struct {
		name, caddyfile string
		want            string // the path provisioned
		msg             string // part of the E-SEC-005 refusal; "" = valid
	}{
		{name: "valid", caddyfile: "sandbox_helper " + self, want: self},
		{name: "left out", caddyfile: "", want: ""},
		{name: "missing file", caddyfile: "sandbox_helper " + filepath.Join(dir, "nope"), msg: "nope does not exist"},
		{name: "not executable", caddyfile: "sandbox_helper " + plain, msg: "is not executable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := parseAppCaddyfile(caddyfile.NewTestDispenser("capsule {\n"+tc.caddyfile+"\n}"), nil)
			if err != nil {
				t.Fatal(err)
			}
			a := &App{}
			if err := json.Unmarshal(v.(httpcaddyfile.App).Value, a); err != nil {
				t.Fatal(err)
			}
			a.Registry, a.WorkRoot, a.CacheDir, a.StateDir = t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
			err = a.Provision(ctx)
			defer a.Cleanup()
			if tc.msg == "" {
				if err != nil || a.SandboxHelper != tc.want {
					t.Fatalf("provision: %v; sandbox_helper %q, want %q", err, a.SandboxHelper, tc.want)
				}
				return
			}
			if errs.Code(err) != shell.CodeHelper || a.engine != nil {
				t.Fatalf("provision: %v (engine %v), want %s before the engine starts", err, a.engine, shell.CodeHelper)
			}
			value := strings.TrimPrefix(tc.caddyfile, "sandbox_helper ")
			for _, want := range []string{"sandbox_helper: ", `"` + value + `"`, tc.msg, "it must be an absolute path to an executable capsulegate-sandbox", "(fix: "} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("refusal %q lacks %q", err, want)
				}
			}
		})
	}
}
