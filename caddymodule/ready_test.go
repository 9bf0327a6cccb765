package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// healthStore is a task store whose database answers or not, as the test says.
type healthStore struct {
	taskstore.Store
	down error
}

func (h *healthStore) Ready() error                   { return h.down }
func (h *healthStore) Ping(ctx context.Context) error { return h.down }

// TestReady: capsule_ready answers 200 while the store answers and the app runs, 503 with
// the reasons while the store's database is away or Caddy's shutdown delay runs.
func TestReady(t *testing.T) {
	away := errors.New("pgstore: E-STORE-015: the task store's database at 127.0.0.1:5432/tasks cannot be reached")
	for _, tt := range []struct {
		name     string
		store    taskstore.Store
		draining bool
		status   int
		reason   string
	}{
		{"bbolt file", nil, false, http.StatusOK, ""},
		{"database answers", &healthStore{}, false, http.StatusOK, ""},
		{"database away", &healthStore{down: away}, false, http.StatusServiceUnavailable, "E-STORE-015"},
		{"shutdown delay", &healthStore{}, true, http.StatusServiceUnavailable, "draining"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			app := &App{store: tt.store}
			repl := caddy.NewReplacer()
			repl.Set("http.shutting_down", tt.draining)
			req := httptest.NewRequest("GET", "/readyz", nil)
			req = req.WithContext(context.WithValue(req.Context(), caddy.ReplacerCtxKey, repl))
			rec := httptest.NewRecorder()
			if err := (&Ready{app: app}).ServeHTTP(rec, req, nil); err != nil {
				t.Fatal(err)
			}
			var body struct {
				Ready   bool
				Reasons []string
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if rec.Code != tt.status || body.Ready != (tt.status == http.StatusOK) || !strings.Contains(strings.Join(body.Reasons, " "), tt.reason) {
				t.Errorf("status %d, body %s; want %d with %q", rec.Code, rec.Body, tt.status, tt.reason)
			}
			if tt.status != http.StatusOK && rec.Header().Get("Retry-After") == "" {
				t.Error("503 without Retry-After")
			}
		})
	}
	if err := new(Ready).UnmarshalCaddyfile(caddyfile.NewTestDispenser("capsule_ready extra")); err == nil {
		t.Error("capsule_ready took an argument")
	}
}

// TestCheckStore: the store settings, after placeholders, refused with the option named.
func TestCheckStore(t *testing.T) {
	key := strings.Repeat("k", 44)
	for _, tt := range []struct {
		name  string
		app   App
		field string // "" = accepted
	}{
		{"no store", App{}, ""},
		{"postgres", App{Store: "postgres://gw@db.internal/tasks?sslmode=verify-full"}, ""},
		{"postgresql with key and push", App{Store: "postgresql://db/tasks", StoreKey: key, Push: &PushOptions{Allow: []string{"https://h.example"}}}, ""},
		{"not a URL", App{Store: "host=db dbname=tasks"}, "store"},
		{"another scheme", App{Store: "mysql://db/tasks"}, "store"},
		{"placeholder left empty", App{Store: ""}, ""},
		{"key without store", App{StoreKey: key}, "store_key"},
		{"short key", App{Store: "postgres://db/tasks", StoreKey: "short"}, "store_key"},
		{"push without key", App{Store: "postgres://db/tasks", Push: &PushOptions{Allow: []string{"https://h.example"}}}, "store_key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.app.checkStore()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Code != CodeAppConfig || e.Path != tt.field {
				t.Fatalf("got %v, want %s at %s", err, CodeAppConfig, tt.field)
			}
			if strings.Contains(err.Error(), "gw@db") {
				t.Errorf("the refusal shows the address: %v", err)
			}
		})
	}
}
