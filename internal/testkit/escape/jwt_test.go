package escape

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/internal/testkit/jwttest"
)

// Edge-auth rows present forged and tampered JWTs to a real a2a.Handler whose route
// takes JWTs of one issuer (its JWKS on a loopback server). Sentinels: the executor (a
// refused token must never become a task), and an attacker's JWKS server that a token
// tries to make the gateway fetch (jku, x5u, an embedded jwk): it must never be asked.

type jwtFixture struct {
	url          string
	issuer       string
	rsaKey       *rsa.PrivateKey
	ecKey        *ecdsa.PrivateKey
	otherKey     *ecdsa.PrivateKey // the attacker's
	attackerJWKS string
	attackerHits atomic.Int64
	jobs         atomic.Int64
	client       *http.Client
}

func (s *suite) jwtFix(t *testing.T) *jwtFixture {
	if s.jwt != nil {
		return s.jwt
	}
	f := &jwtFixture{}
	var err error
	if f.rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
		t.Fatal(err)
	}
	f.ecKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	f.otherKey, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &f.rsaKey.PublicKey, KeyID: "rsa", Algorithm: "RS256", Use: "sig"},
		{Key: &f.ecKey.PublicKey, KeyID: "ec", Algorithm: "ES256", Use: "sig"}}}
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { json.NewEncoder(w).Encode(set) }))
	s.top.Cleanup(issuer.Close)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		f.attackerHits.Add(1)
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &f.otherKey.PublicKey, KeyID: "ec", Algorithm: "ES256"}}})
	}))
	s.top.Cleanup(attacker.Close)
	f.issuer, f.attackerJWKS = issuer.URL, attacker.URL+"/jwks.json"
	v, err := edgeauth.NewJWT(context.Background(), edgeauth.JWTConfig{Issuer: f.issuer, Audiences: []string{"capsulegate"}, JWKSURL: issuer.URL + "/jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := a2a.NewHandler(a2a.Config{Card: a2a.Card{Name: "escape-jwt", Version: "1.0.0"}, Executor: countingExec{&f.jobs}, JWT: v})
	if err != nil {
		t.Fatal(err)
	}
	f.url, f.client = s.serveA2A(h, "/")
	s.jwt = f
	return f
}

// claims are valid claims of the fixture's issuer for subject sub, changed by over.
func (f *jwtFixture) claims(sub string, over map[string]any) map[string]any {
	return jwttest.Override(map[string]any{"iss": f.issuer, "aud": "capsulegate", "sub": sub, "exp": time.Now().Add(time.Hour).Unix()}, over)
}

var authCode = regexp.MustCompile(`E-AUTH-\d{3}`)

// jwtAttack presents the token build makes and classifies the refusal as "HTTP <status>
// <E-AUTH code>" from the challenge. No task may run, and the attacker's JWKS server must
// never be asked.
func jwtAttack(build func(t *testing.T, f *jwtFixture) string) func(*testing.T, *suite) outcome {
	return func(t *testing.T, s *suite) outcome {
		f := s.jwtFix(t)
		jobs, hits := f.jobs.Load(), f.attackerHits.Load()
		req, _ := http.NewRequest(http.MethodPost, f.url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+build(t, f))
		resp, err := f.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		class := fmt.Sprintf("HTTP %d", resp.StatusCode)
		if code := authCode.FindString(resp.Header.Get("WWW-Authenticate")); code != "" {
			class += " " + code
		}
		var escaped []string
		if n := f.jobs.Load() - jobs; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the forged token ran %d tasks", n))
		}
		if n := f.attackerHits.Load() - hits; n != 0 {
			escaped = append(escaped, fmt.Sprintf("the attacker's JWKS was fetched %d times", n))
		}
		return outcome{class: class, escaped: strings.Join(escaped, "; ")}
	}
}

// jwtForgery is one forged or tampered token of the fixture's issuer, and the refusal
// it must get ("HTTP 401 E-AUTH-0xx").
type jwtForgery struct {
	attack, want string
	token        func(t *testing.T, f *jwtFixture) string
}

func jwtRows() []row {
	var rows []row
	for i, c := range jwtForgeries() {
		rows = append(rows, row{id: fmt.Sprintf("JW-%02d", i+1), surface: EdgeAuth, attack: c.attack, want: c.want, run: jwtAttack(c.token)})
	}
	return rows
}

// jwtForgeries are the tokens the edge-auth rows present to the handler and the gateway
// rows to the built gateway.
func jwtForgeries() []jwtForgery {
	pubPEM := func(f *jwtFixture) []byte {
		der, _ := x509.MarshalPKIXPublicKey(&f.rsaKey.PublicKey)
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	return []jwtForgery{
		{"alg none, unsigned", "HTTP 401 E-AUTH-003", func(_ *testing.T, f *jwtFixture) string {
			return jwttest.Handmade(map[string]any{"alg": "none", "kid": "rsa"}, f.claims("mallory", nil), nil)
		}},
		{"alg \"None\" in another case", "HTTP 401 E-AUTH-003", func(_ *testing.T, f *jwtFixture) string {
			return jwttest.Handmade(map[string]any{"alg": "None", "kid": "rsa"}, f.claims("mallory", nil), nil)
		}},
		{"HS256 keyed with the issuer's RSA public key as PEM (algorithm confusion)", "HTTP 401 E-AUTH-003", func(_ *testing.T, f *jwtFixture) string {
			return jwttest.Handmade(map[string]any{"alg": "HS256", "kid": "rsa"}, f.claims("mallory", nil), pubPEM(f))
		}},
		{"HS256 keyed with the issuer's RSA public key as DER", "HTTP 401 E-AUTH-003", func(_ *testing.T, f *jwtFixture) string {
			der, _ := x509.MarshalPKIXPublicKey(&f.rsaKey.PublicKey)
			return jwttest.Handmade(map[string]any{"alg": "HS256", "kid": "rsa"}, f.claims("mallory", nil), der)
		}},
		{"RS256 signed by the EC key's kid (a key of another type)", "HTTP 401 E-AUTH-003", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.rsaKey, jose.RS256, "ec", f.claims("mallory", nil), nil)
		}},
		{"the attacker's own key, under the issuer's kid", "HTTP 401 E-AUTH-005", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.otherKey, jose.ES256, "ec", f.claims("mallory", nil), nil)
		}},
		{"the attacker's key named by jku (its JWKS URL)", "HTTP 401 E-AUTH-005", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.otherKey, jose.ES256, "ec", f.claims("mallory", nil), map[jose.HeaderKey]any{"jku": f.attackerJWKS})
		}},
		{"the attacker's key named by x5u", "HTTP 401 E-AUTH-005", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.otherKey, jose.ES256, "ec", f.claims("mallory", nil), map[jose.HeaderKey]any{"x5u": f.attackerJWKS})
		}},
		{"the attacker's key embedded as jwk", "HTTP 401 E-AUTH-005", func(t *testing.T, f *jwtFixture) string {
			sg, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.otherKey},
				(&jose.SignerOptions{EmbedJWK: true}).WithHeader("kid", "ec"))
			if err != nil {
				t.Fatal(err)
			}
			payload, _ := json.Marshal(f.claims("mallory", nil))
			jws, _ := sg.Sign(payload)
			out, _ := jws.CompactSerialize()
			return out
		}},
		{"a kid that climbs a path (../../jwks)", "HTTP 401 E-AUTH-004", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "../../../etc/passwd", f.claims("mallory", nil), nil)
		}},
		{"a valid signature over a changed subject", "HTTP 401 E-AUTH-005", func(t *testing.T, f *jwtFixture) string {
			tok := jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", nil), nil)
			parts := strings.Split(tok, ".")
			p, _ := base64.RawURLEncoding.DecodeString(parts[1])
			parts[1] = base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(p), `"alice"`, `"admin"`, 1)))
			return strings.Join(parts, ".")
		}},
		{"an expired token", "HTTP 401 E-AUTH-006", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", map[string]any{"exp": time.Now().Add(-time.Hour).Unix()}), nil)
		}},
		{"a token without exp", "HTTP 401 E-AUTH-006", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", map[string]any{"exp": nil}), nil)
		}},
		{"a token of another audience", "HTTP 401 E-AUTH-009", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", map[string]any{"aud": "another-service"}), nil)
		}},
		{"a token of another issuer", "HTTP 401 E-AUTH-008", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", map[string]any{"iss": "https://evil.example"}), nil)
		}},
		{"a critical header extension", "HTTP 401 E-AUTH-002", func(t *testing.T, f *jwtFixture) string {
			return jwttest.Sign(t, f.ecKey, jose.ES256, "ec", f.claims("alice", nil), map[jose.HeaderKey]any{"crit": []string{"exp"}})
		}},
		{"the JSON serialization instead of the compact one", "HTTP 401 E-AUTH-002", func(t *testing.T, f *jwtFixture) string {
			sg, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: f.ecKey}, (&jose.SignerOptions{}).WithHeader("kid", "ec"))
			payload, _ := json.Marshal(f.claims("alice", nil))
			jws, _ := sg.Sign(payload)
			return jws.FullSerialize()
		}},
	}
}
