package netpolicy

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
)

// TestNarrowing: the dialer and the proxy refuse what a task's narrowing leaves out,
// with E-NET-027, while the capsule's own rules allow it; what the narrowing names is
// reached, and a context without it (or unnarrowed again) reaches what the rules allow.
func TestNarrowing(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "a") }))
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "b") }))
	t.Cleanup(a.Close)
	t.Cleanup(b.Close)
	rules := mustRules(t, a.URL, b.URL)
	onlyA := mustRules(t, a.URL)
	d := &Dialer{Rules: rules}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		target string
		want   string // "" reached, else the code refusing it
	}{
		{"not narrowed", context.Background(), b.URL, ""},
		{"named by the narrowing", Narrow(context.Background(), onlyA), a.URL, ""},
		{"left out by the narrowing", Narrow(context.Background(), onlyA), b.URL, CodeNarrowed},
		{"narrowed to nothing", Narrow(context.Background(), Rules{}), a.URL, CodeNarrowed},
		{"unnarrowed again", Unnarrowed(Narrow(context.Background(), Rules{})), a.URL, ""},
		{"never wider than the rules", Narrow(context.Background(), mustRules(t, "http://127.0.0.1:1")), "http://127.0.0.1:1", CodeNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := d.DialContext(tc.ctx, "tcp", strings.TrimPrefix(tc.target, "http://"))
			if c != nil {
				c.Close()
			}
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && errs.Find(err, tc.want) == nil:
				t.Fatalf("error %v, want %s", err, tc.want)
			}
		})
	}

	// The proxy: one narrowing at a time (the running task's), for both request forms.
	f := startProxy(t, nil, nil, a.URL, b.URL)
	get := func(target string) int {
		resp, _, _, _ := f.raw(t, "GET "+target+"/ HTTP/1.1\r\nHost: "+strings.TrimPrefix(target, "http://")+"\r\nConnection: close\r\n\r\n")
		return resp.StatusCode
	}
	connect := func(target string) int {
		host := strings.TrimPrefix(target, "http://")
		resp, _, c, _ := f.raw(t, "CONNECT "+host+" HTTP/1.1\r\nHost: "+host+"\r\n\r\n")
		c.Close()
		return resp.StatusCode
	}
	if get(b.URL) != http.StatusOK || connect(b.URL) != http.StatusOK {
		t.Fatal("the proxy refused b before any narrowing")
	}
	f.p.SetNarrowing(&onlyA)
	if resp, body, _, _ := f.raw(t, "GET "+b.URL+"/ HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"); resp.StatusCode != http.StatusForbidden || !strings.Contains(body, CodeNarrowed) {
		t.Errorf("GET b while narrowed to a: HTTP %d %q, want 403 naming %s", resp.StatusCode, body, CodeNarrowed)
	}
	if got := connect(b.URL); got != http.StatusForbidden {
		t.Errorf("CONNECT b while narrowed to a: HTTP %d, want 403", got)
	}
	if got := get(a.URL); got != http.StatusOK {
		t.Errorf("GET a while narrowed to a: HTTP %d", got)
	}
	f.p.SetNarrowing(nil)
	if got := get(b.URL); got != http.StatusOK {
		t.Errorf("GET b once the narrowing ended: HTTP %d", got)
	}
}
