package caddymodule

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
)

const (
	testPublishToken = "publish-0123456789abcdef"
	testReadToken    = "read-0123456789abcdef"
)

func TestRegistryCaddyfile(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		matcher    string // the route's matcher as JSON ("" = none)
		handler    string // the handler's JSON
		err        string // part of the adapter's refusal
	}{
		{name: "bare", body: "capsule_registry", handler: `{"handler":"capsule_registry"}`},
		{name: "root argument", body: "capsule_registry /srv/registry", handler: `{"handler":"capsule_registry","root":"/srv/registry"}`},
		{name: "matcher and root", body: "capsule_registry /registry/* /srv/registry",
			matcher: `[{"path":["/registry/*"]}]`, handler: `{"handler":"capsule_registry","root":"/srv/registry"}`},
		{name: "under handle", body: "handle /registry/* {\n\tcapsule_registry /srv/registry {\n\t\tpublish_token {env.PUB}\n\t\tread_token {env.READ}\n\t}\n}",
			handler: `{"handler":"capsule_registry","publish_token":"{env.PUB}","read_token":"{env.READ}","root":"/srv/registry"}`},
		{name: "root in the block", body: "capsule_registry {\n\troot reg\n\tpublish_token " + testPublishToken + "\n}",
			handler: `{"handler":"capsule_registry","publish_token":"` + testPublishToken + `","root":"reg"}`},
		{name: "three arguments", body: "capsule_registry /a/* b c", err: "wrong argument count"},
		{name: "two folders, no matcher", body: "capsule_registry a b", err: "wrong argument count"},
		{name: "unknown subdirective", body: "capsule_registry {\n\tpublish_key x\n}", err: `unknown capsule_registry subdirective "publish_key"`},
		{name: "root twice", body: "capsule_registry /a {\n\troot /b\n}", err: "given twice"},
		{name: "token twice", body: "capsule_registry {\n\tread_token a\n\tread_token b\n}", err: "read_token is given twice"},
		{name: "token without a value", body: "capsule_registry {\n\tpublish_token\n}", err: "wrong argument count"},
		{name: "token with two values", body: "capsule_registry {\n\tpublish_token a b\n}", err: "wrong argument count"},
		{name: "a block under an option", body: "capsule_registry {\n\troot /r {\n\t\tx\n\t}\n}", err: "root takes no block"},
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
				t.Errorf("adapted to matcher %s handler %s, want %s %s", matcher, handler, tc.matcher, tc.handler)
			}
		})
	}
}

// TestRegistryProvision resolves the folder and the tokens, placeholders replaced, and
// refuses a short or empty-once-replaced token and a URL as the folder.
func TestRegistryProvision(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("REG_PUB", testPublishToken)
	t.Setenv("REG_SHORT", "short")
	t.Setenv("REG_EMPTY", "")
	envReg := filepath.Join(dir, "from-env")
	for _, tc := range []struct {
		name    string
		h       RegistryHandler
		env     string // $CAPSULE_REGISTRY
		root    string // the folder served
		publish string
		read    string
		code    string
	}{
		{name: "relative root, literal tokens", h: RegistryHandler{Root: "reg", PublishToken: testPublishToken, ReadToken: testReadToken},
			root: filepath.Join(dir, "reg"), publish: testPublishToken, read: testReadToken},
		{name: "token from the environment", h: RegistryHandler{Root: "/srv/r", PublishToken: "{env.REG_PUB}"}, root: "/srv/r", publish: testPublishToken},
		{name: "default root from $CAPSULE_REGISTRY", h: RegistryHandler{}, env: envReg, root: envReg},
		{name: "short publish token", h: RegistryHandler{Root: "r", PublishToken: "short-token"}, code: registry.CodeServe},
		{name: "short read token", h: RegistryHandler{Root: "r", ReadToken: "{env.REG_SHORT}"}, code: registry.CodeServe},
		{name: "token variable empty", h: RegistryHandler{Root: "r", ReadToken: "{env.REG_EMPTY}"}, code: registry.CodeServe},
		{name: "token variable unset", h: RegistryHandler{Root: "r", PublishToken: "{env.REG_UNSET_0123456789}"}, code: registry.CodeServe},
		{name: "root a URL", h: RegistryHandler{Root: "https://registry.example"}, code: registry.CodeServe},
		{name: "$CAPSULE_REGISTRY a URL", h: RegistryHandler{}, env: "nexus+https://registry.example", code: registry.CodeRemote},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(registry.EnvDir, tc.env)
			ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
			defer cancel()
			h := tc.h
			err := h.Provision(ctx)
			if tc.code != "" {
				e := errs.Find(err, tc.code)
				if e == nil || e.Fix == "" {
					t.Fatalf("error %v, want %s with a fix", err, tc.code)
				}
				if strings.Contains(err.Error(), "short") {
					t.Errorf("the message shows the token: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.srv.Local.Root != tc.root || h.srv.PublishToken != tc.publish || h.srv.ReadToken != tc.read {
				t.Fatalf("serves %s publish %q read %q, want %s %q %q", h.srv.Local.Root, h.srv.PublishToken, h.srv.ReadToken, tc.root, tc.publish, tc.read)
			}
		})
	}
}

type registryNext struct{ called bool }

func (n *registryNext) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	n.called = true
	return nil
}

// TestRegistryServe publishes, fetches and lists through the handler mounted under
// /registry/ (the prefix kept, as `handle` keeps it), logging each publication; nothing
// passes to the next handler.
func TestRegistryServe(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	root := filepath.Join(t.TempDir(), "registry")
	h := &RegistryHandler{Root: root, PublishToken: testPublishToken, ReadToken: testReadToken}
	if err := h.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	h.logger = zap.New(core)
	next := &registryNext{}
	mux := http.NewServeMux()
	mux.HandleFunc("/registry/", func(w http.ResponseWriter, r *http.Request) {
		if err := h.ServeHTTP(w, r, next); err != nil {
			t.Error(err)
		}
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()

	art := filepath.Join(t.TempDir(), "git-helper")
	os.MkdirAll(filepath.Join(art, "bin"), 0o755)
	os.WriteFile(filepath.Join(art, "murmur.yaml"), []byte("name: git-helper\nversion: 0.3.1\nruntime: tool\nimplementation: native\n"), 0o644)
	os.WriteFile(filepath.Join(art, "bin", "git-helper"), []byte("#!/bin/sh\n"), 0o755)
	data, _, err := registry.Pack(art)
	if err != nil {
		t.Fatal(err)
	}
	src, err := registry.ParseSource("nexus+" + hs.URL + "/registry")
	if err != nil {
		t.Fatal(err)
	}
	open := func(token string) registry.Registry {
		r, err := registry.Open(src, registry.OpenOptions{Auth: registry.Auth{Token: token}, Getenv: func(string) string { return "" }, Client: hs.Client()})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bctx := context.Background()
	if _, err := open(testReadToken).(registry.Publisher).Publish(bctx, data, registry.PlatformLinuxX86_64); errs.Code(err) != registry.CodeRemoteAuth {
		t.Fatalf("publish with the read token: %v", err)
	}
	b, err := open(testPublishToken).(registry.Publisher).Publish(bctx, data, registry.PlatformLinuxX86_64)
	if err != nil {
		t.Fatal(err)
	}
	reader := open(testReadToken)
	got, err := reader.Fetch(bctx, registry.Ref{Name: "git-helper", Version: "0.3.1", Platform: registry.PlatformLinuxX86_64})
	if err != nil || got.SHA256 != b.SHA256 || got.Platform != registry.PlatformLinuxX86_64 {
		t.Fatalf("fetch: %+v, %v", got, err)
	}
	if _, err := open("").Fetch(bctx, registry.Ref{Name: "git-helper", Version: "0.3.1", Platform: registry.PlatformLinuxX86_64}); errs.Code(err) != registry.CodeRemoteAuth {
		t.Fatalf("fetch without a token: %v", err)
	}
	ls, err := reader.(registry.Lister).List(bctx)
	if err != nil || len(ls) != 1 || ls[0].Name != "git-helper" || ls[0].Implementation != "native" || strings.Join(ls[0].Platforms, ",") != registry.PlatformLinuxX86_64 {
		t.Fatalf("list: %+v, %v", ls, err)
	}
	if _, err := os.Stat(filepath.Join(root, "git-helper", "0.3.1", "git-helper-0.3.1-linux-x86_64.mur.zip")); err != nil {
		t.Fatal(err)
	}
	resp, err := hs.Client().Get(hs.URL + "/registry/elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || next.called {
		t.Fatalf("another path under the route: %d (next called: %v)", resp.StatusCode, next.called)
	}
	published := logs.FilterMessage("artifact published").All()
	if len(published) != 1 {
		t.Fatalf("%d publish logs, want 1: %v", len(published), logs.All())
	}
	fields := published[0].ContextMap()
	if fields["name"] != "git-helper" || fields["version"] != "0.3.1" || fields["platform"] != registry.PlatformLinuxX86_64 || fields["sha256"] != b.SHA256 {
		t.Fatalf("publish log fields %v", fields)
	}
}
