package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/capsulegate/capsulegate/caddymodule/cli"
	"github.com/capsulegate/capsulegate/internal/testkit/syncbuf"
)

const testCassette = `{"provider": "anthropic-messages", "conversations": [
  {"match": "hello", "turns": [{"id": "msg_1", "type": "message"}]}]}`

func cassetteDir(t *testing.T, text string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.json"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestReplayCaddyfile(t *testing.T) {
	input := `:8089 {
	respond "fallback"
	capsule_replay ./cassettes
}`
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(input), nil)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]struct {
					Routes []struct {
						Handle []map[string]any `json:"handle"`
					} `json:"routes"`
				} `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	var handlers []map[string]any
	for _, s := range cfg.Apps.HTTP.Servers {
		for _, r := range s.Routes {
			handlers = append(handlers, r.Handle...)
		}
	}
	// The directive order puts capsule_replay before respond.
	if len(handlers) != 2 || handlers[0]["handler"] != "capsule_replay" || handlers[0]["cassettes"] != "./cassettes" ||
		handlers[1]["handler"] != "static_response" {
		t.Fatalf("adapted to %s", out)
	}
}

type nextHandler struct{ called bool }

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	n.called = true
	w.WriteHeader(http.StatusTeapot)
	return nil
}

func TestReplayHandlerProvisionAndServe(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()

	rh := &ReplayHandler{Cassettes: cassetteDir(t, testCassette)}
	if err := rh.Provision(ctx); err != nil {
		t.Fatal(err)
	}

	next := &nextHandler{}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"hello"}]}`))
	if err := rh.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "msg_1") || next.called {
		t.Fatalf("got %d %s (next called: %v)", rec.Code, rec.Body, next.called)
	}

	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/v1/messages", strings.NewReader(`{"messages":[{"role":"user","content":"bye"}]}`))
	rh.ServeHTTP(rec, req, next)
	if rec.Code != 404 || !strings.Contains(rec.Body.String(), "not_found_error") {
		t.Fatalf("miss: got %d %s", rec.Code, rec.Body)
	}

	rec = httptest.NewRecorder()
	rh.ServeHTTP(rec, httptest.NewRequest("GET", "/other", nil), next)
	if !next.called || rec.Code != http.StatusTeapot {
		t.Fatalf("other path not passed on: %d", rec.Code)
	}

	// The Responses API path is served too (the Codex CLI's), not passed on.
	rr := &ReplayHandler{Cassettes: cassetteDir(t, `{"provider": "openai-responses", "conversations": [
  {"match": "hello", "turns": [{"id": "resp_1", "object": "response", "status": "completed", "output": []}]}]}`)}
	if err := rr.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	next = &nextHandler{}
	rec = httptest.NewRecorder()
	req = httptest.NewRequest("POST", "/openai/v1/responses", strings.NewReader(`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context></environment_context>"}]},{"type":"message","role":"user","content":[{"type":"input_text","text":"hello"}]}]}`))
	if err := rr.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "resp_1") || next.called {
		t.Fatalf("responses: got %d %s (next called: %v)", rec.Code, rec.Body, next.called)
	}

	bad := &ReplayHandler{Cassettes: cassetteDir(t, `{"provider":"x","conversations":[]}`)}
	if err := bad.Provision(ctx); err == nil || !strings.Contains(err.Error(), "E-RPL-003") {
		t.Fatalf("bad cassette provisioned: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe to read while the server writes.
type syncBuffer = syncbuf.Buffer

func TestRunReplay(t *testing.T) {
	var out, errb syncBuffer
	e := &cli.Env{Stdout: &out, Stderr: &errb}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runReplay(ctx, e, cli.Common{}, cassetteDir(t, testCassette), "127.0.0.1:0") }()

	addrRE := regexp.MustCompile(`serving 1 conversation\(s\) from .* on (http://127\.0\.0\.1:\d+)\n`)
	var base string
	for deadline := time.Now().Add(10 * time.Second); base == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(errb.String()); m != nil {
			base = m[1]
		}
	}
	if base == "" {
		t.Fatalf("no ready line; stderr: %q", errb.String())
	}
	resp, err := http.Post(base+"/v1/messages", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	cancel()
	if code := <-done; code != cli.ExitOK {
		t.Fatalf("exit %d after cancel; stderr %q", code, errb.String())
	}

	var out2, err2 bytes.Buffer
	code := runReplay(context.Background(), &cli.Env{Stdout: &out2, Stderr: &err2}, cli.Common{}, cassetteDir(t, `{`), "127.0.0.1:0")
	if code != cli.ExitRefused || !strings.Contains(err2.String(), "error: replay: E-RPL-002") {
		t.Fatalf("bad cassette: exit %d, stderr %q", code, err2.String())
	}
	out2.Reset()
	code = runReplay(context.Background(), &cli.Env{Stdout: &out2, Stderr: &err2}, cli.Common{JSON: true}, t.TempDir(), "127.0.0.1:0")
	var res struct {
		OK     bool
		Errors []struct{ Code, Message string }
	}
	if err := json.Unmarshal(out2.Bytes(), &res); err != nil || code != cli.ExitRefused || res.OK || len(res.Errors) != 1 || res.Errors[0].Code != "E-RPL-001" {
		t.Fatalf("json refusal: exit %d, %v, %s", code, err, out2.String())
	}
}

func TestReplayCommand(t *testing.T) {
	c := replayCommand()
	if c.Name() != "replay" {
		t.Errorf("name %q", c.Name())
	}
	if f := c.Flags().Lookup("listen"); f == nil || f.DefValue != "127.0.0.1:8089" {
		t.Errorf("--listen flag: %+v", f)
	}
}
