package a2a

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
)

// benchJWT is a verifier whose JWKS (one ES256 and one RS256 key) a loopback server
// serves, and a token of each.
func benchJWT(b *testing.B) (v *edgeauth.JWT, es, rs string) {
	b.Helper()
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &ek.PublicKey, KeyID: "es", Algorithm: "ES256", Use: "sig"},
		{Key: &rk.PublicKey, KeyID: "rs", Algorithm: "RS256", Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(set) }))
	b.Cleanup(srv.Close)
	v, err := edgeauth.NewJWT(context.Background(), edgeauth.JWTConfig{Issuer: "https://issuer.test", Audiences: []string{"gw"}, JWKSURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	sign := func(key any, alg jose.SignatureAlgorithm, kid string) string {
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", kid))
		claims, _ := json.Marshal(map[string]any{"iss": "https://issuer.test", "aud": "gw", "sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
		jws, _ := s.Sign(claims)
		out, _ := jws.CompactSerialize()
		return out
	}
	return v, sign(ek, jose.ES256, "es"), sign(rk, jose.RS256, "rs")
}

// BenchmarkEdgeRequest is one ListTasks over JSON-RPC through the whole handler, as each
// edge feature adds to it: nothing, a named bearer token, a JWT (ES256, RS256) with the
// JWKS cached, a policy, a rate limit, and all of them. docs/benchmarks.md "The edge"
// quotes the differences.
func BenchmarkEdgeRequest(b *testing.B) {
	v, es, rs := benchJWT(b)
	pol, err := edgepolicy.Compile(edgepolicy.Config{Allow: `principal == "alice" || (method in ["GetTask", "ListTasks"] && "reader" in claims.roles)`})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`)
	for _, tc := range []struct {
		name  string
		cfg   Config
		token string
	}{
		{"none", Config{}, ""},
		{"bearer", Config{Tokens: []Token{{Name: "alice", Secret: "tok-alice"}}}, "tok-alice"},
		{"jwt-es256", Config{JWT: v}, es},
		{"jwt-rs256", Config{JWT: v}, rs},
		{"policy", Config{Tokens: []Token{{Name: "alice", Secret: "tok-alice"}}, Policy: pol}, "tok-alice"},
		{"rate", Config{Tokens: []Token{{Name: "alice", Secret: "tok-alice"}}, Limits: Limits{Rate: 1e9, Burst: 1 << 30}}, "tok-alice"},
		{"jwt+policy+rate", Config{JWT: v, Policy: pol, Limits: Limits{Rate: 1e9, Burst: 1 << 30}}, es},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := tc.cfg
			cfg.Executor, cfg.Card = &echoExec{}, testCard()
			h, err := NewHandler(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { stopNow(h) })
			req := func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/agents/hello/", strings.NewReader(string(body)))
				r.Header.Set("A2A-Version", "1.0")
				r.Header.Set("Content-Type", "application/json")
				if tc.token != "" {
					r.Header.Set("Authorization", "Bearer "+tc.token)
				}
				return r
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req()) // the JWKS fetched once, before the clock runs
			if w.Code != http.StatusOK || strings.Contains(w.Body.String(), `"error"`) {
				b.Fatalf("HTTP %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req())
			}
		})
	}
}
