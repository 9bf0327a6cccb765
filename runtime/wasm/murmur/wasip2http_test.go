package murmur

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// The gateway's sender for wasi:http: the capsule's rules reach the allowed server, and
// every other authority — another host, another port, the metadata address — is refused
// as wasip2.ErrDenied, both by the early check and when sent.
func TestWASIP2Sender(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", "1")
		w.WriteHeader(201)
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rules, err := netpolicy.ParseRules([]string{"127.0.0.1:" + u.Port()})
	if err != nil {
		t.Fatal(err)
	}
	var denied []string
	out := &Outgoing{Capsule: "cap", Rules: rules, OnDeny: func(who, host string, _ int, _ error) { denied = append(denied, who+" "+host) }}
	out.Init()
	send, check := out.WASIP2("tool"), out.WASIP2Check("tool")

	if err := check(srv.URL + "/x"); err != nil {
		t.Fatalf("check of the allowed server: %v", err)
	}
	resp, err := send(context.Background(), wasip2.HTTPRequest{Method: "GET", URL: srv.URL + "/x"})
	if err != nil {
		t.Fatal(err)
	}
	body, err := resp.Body.Read(100)
	resp.Body.Close()
	if err != nil || string(body) != "ok" || resp.Status != 201 {
		t.Errorf("response %d %q %v", resp.Status, body, err)
	}
	for _, authority := range []string{"evil.example.com", "127.0.0.1:1", "169.254.169.254"} {
		t.Run(authority, func(t *testing.T) {
			if err := check("http://" + authority + "/"); !errors.Is(err, wasip2.ErrDenied) {
				t.Errorf("check: %v, want wasip2.ErrDenied", err)
			}
			if _, err := send(context.Background(), wasip2.HTTPRequest{Method: "GET", URL: "http://" + authority + "/"}); !errors.Is(err, wasip2.ErrDenied) {
				t.Errorf("send: %v, want wasip2.ErrDenied", err)
			}
		})
	}
	// Each refused host is recorded for the artifact, by the check and by the send.
	for _, host := range []string{"evil.example.com", "127.0.0.1", "169.254.169.254"} {
		if n := strings.Count(strings.Join(denied, "\n")+"\n", "tool "+host+"\n"); n < 2 {
			t.Errorf("%s denied %d times in %q, want by the check and by the send", host, n, denied)
		}
	}
}
