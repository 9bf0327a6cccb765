package edgeauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/internal/testkit/jwttest"
)

// Test keys are made once: RSA generation is the slow part of the suite.
var (
	keysOnce sync.Once
	rsaKey   *rsa.PrivateKey
	rsaKey2  *rsa.PrivateKey
	ecKey    *ecdsa.PrivateKey
	ecKey2   *ecdsa.PrivateKey
	edKey    ed25519.PrivateKey
)

func testKeys(t testing.TB) {
	t.Helper()
	keysOnce.Do(func() {
		var err error
		if rsaKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if rsaKey2, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		if ecKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if ecKey2, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		if _, edKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
			panic(err)
		}
	})
}

// jwk describes one public key of a test JWKS.
type jwk struct {
	key any // a private key; its public half is published
	kid string
	alg string
	use string
}

// jwksJSON is the JWKS publishing the public halves of keys.
func jwksJSON(t testing.TB, keys ...jwk) []byte {
	t.Helper()
	var set jose.JSONWebKeySet
	for _, k := range keys {
		pub := k.key.(crypto.Signer).Public()
		set.Keys = append(set.Keys, jose.JSONWebKey{Key: pub, KeyID: k.kid, Algorithm: k.alg, Use: k.use})
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sign makes a compact JWS with go-jose; an empty kid leaves kid out of the header.
func sign(t testing.TB, key any, kid, alg string, claims map[string]any) string {
	t.Helper()
	var sk jose.SigningKey
	if kid != "" {
		sk = jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: jose.JSONWebKey{Key: key, KeyID: kid}}
	} else {
		sk = jose.SigningKey{Algorithm: jose.SignatureAlgorithm(alg), Key: key}
	}
	signer, err := jose.NewSigner(sk, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var b64 = base64.RawURLEncoding

// handMade builds header.payload.signature by hand, signing with sigFn (nil: an
// empty signature), for tokens go-jose's signer refuses to make.
func handMade(t testing.TB, header map[string]any, payload []byte, sigFn func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(payload)
	var sig []byte
	if sigFn != nil {
		sig = sigFn([]byte(input))
	}
	return input + "." + b64.EncodeToString(sig)
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rsaPKCS1 signs like RS256.
func rsaPKCS1(k *rsa.PrivateKey) func([]byte) []byte {
	return func(in []byte) []byte {
		d := sha256.Sum256(in)
		s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			panic(err)
		}
		return s
	}
}

// es256 signs like ES256 (r||s, 32 bytes each).
func es256(k *ecdsa.PrivateKey) func([]byte) []byte {
	return func(in []byte) []byte {
		d := sha256.Sum256(in)
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			panic(err)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	}
}

// clock is a settable time source for Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: t0} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// t0 is the tests' "now".
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	testIss = "https://id.example.test"
	testAud = "capsulegate"
)

// claims are valid claims at t0, with overrides applied (a nil value deletes).
func claims(over map[string]any) map[string]any {
	return jwttest.Override(map[string]any{
		"iss":   testIss,
		"aud":   testAud,
		"sub":   "alice",
		"email": "alice@example.test",
		"iat":   t0.Add(-time.Minute).Unix(),
		"exp":   t0.Add(time.Hour).Unix(),
	}, over)
}

// issuer is a loopback OIDC issuer serving a JWKS and counting hits.
type issuer struct {
	srv    *httptest.Server
	hits   atomic.Int64
	mu     sync.Mutex
	body   []byte
	status int
}

func newIssuer(t testing.TB, body []byte) *issuer {
	t.Helper()
	is := &issuer{body: body, status: http.StatusOK}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		is.mu.Lock()
		body, status := is.body, is.status
		is.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(is.srv.Close)
	if !strings.HasPrefix(is.srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server not on 127.0.0.1: %s", is.srv.URL)
	}
	return is
}

func (is *issuer) serve(status int, body []byte) {
	is.mu.Lock()
	is.status, is.body = status, body
	is.mu.Unlock()
}

func (is *issuer) url() string { return is.srv.URL + "/.well-known/jwks.json" }

// standardKeys is the JWKS most tests use: rsa1 pinned to RS256, rsa2 unpinned,
// ec1 (P-256), ed1, plus an encryption key and a symmetric key that must be ignored.
func standardJWKS(t testing.TB) []byte {
	t.Helper()
	testKeys(t)
	base := jwksJSON(t,
		jwk{key: rsaKey, kid: "rsa1", alg: "RS256", use: "sig"},
		jwk{key: rsaKey2, kid: "rsa2"},
		jwk{key: ecKey, kid: "ec1", use: "sig"},
		jwk{key: edKey, kid: "ed1"},
		jwk{key: ecKey2, kid: "enc1", use: "enc"},
	)
	// Splice in keys go-jose would not publish for us: a symmetric key, an
	// unknown kty, and a broken RSA key; all must be skipped, not fatal.
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(base, &doc); err != nil {
		t.Fatal(err)
	}
	doc.Keys = append(doc.Keys,
		json.RawMessage(`{"kty":"oct","kid":"hmac","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}`),
		json.RawMessage(`{"kty":"PQC","kid":"future","x":"AAAA"}`),
		json.RawMessage(`{"kty":"RSA","kid":"broken","n":"AQAB"}`),
	)
	return mustJSON(t, doc)
}

// newVerifier makes a verifier for the standard issuer at t0; mod adjusts cfg.
func newVerifier(t testing.TB, url string, clk *clock, mod func(*JWTConfig)) *JWT {
	t.Helper()
	cfg := JWTConfig{Issuer: testIss, Audiences: []string{"other", testAud}, JWKSURL: url, Now: clk.Now}
	if mod != nil {
		mod(&cfg)
	}
	v, err := NewJWT(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
