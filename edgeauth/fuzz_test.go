package edgeauth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"math/big"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/errs"
)

// fuzzFixture is a verifier over a fixed JWKS file and clock, and the tokens
// seeded as valid.
type fuzzFixture struct {
	v     *JWT
	pubs  map[string]any // kid → public key, for the independent check
	valid map[string]string
}

func newFuzzFixture(f *testing.F) *fuzzFixture {
	f.Helper()
	// Every key and signature is deterministic: the fuzzing coordinator and each
	// worker process build the fixture apart, and a valid seed made in one must be
	// the very token the others hold as valid.
	ec, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), bytes.Repeat([]byte{0x5a}, 32))
	if err != nil {
		f.Fatal(err)
	}
	ed := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{0x42}, 32))
	rk := deterministicRSA(f, 7)

	path := filepath.Join(f.TempDir(), "jwks.json")
	data := jwksJSON(f, jwk{key: ec, kid: "ec"}, jwk{key: ed, kid: "ed"}, jwk{key: rk, kid: "rsa", alg: "RS256"})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		f.Fatal(err)
	}
	clk := newClock()
	v, err := NewJWT(f.Context(), JWTConfig{Issuer: testIss, Audiences: []string{testAud}, JWKSFile: path, Now: clk.Now})
	if err != nil {
		f.Fatal(err)
	}
	fx := &fuzzFixture{
		v:     v,
		pubs:  map[string]any{"ec": &ec.PublicKey, "ed": ed.Public(), "rsa": &rk.PublicKey},
		valid: map[string]string{},
	}

	ecHdr := map[string]any{"alg": "ES256", "kid": "ec", "typ": "JWT"}
	seedValid := func(tok, principal string) {
		fx.valid[tok] = principal
		f.Add(tok)
	}
	seedValid(handMade(f, ecHdr, mustJSON(f, claims(nil)), es256Det(ec)), "alice")
	seedValid(sign(f, ed, "ed", "EdDSA", claims(map[string]any{"sub": "bob", "aud": []string{"x", testAud}})), "bob")
	seedValid(handMade(f, map[string]any{"alg": "RS256", "kid": "rsa"}, mustJSON(f, claims(map[string]any{"sub": "carol"})), rsaPKCS1(rk)), "carol")

	pubDER, err := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	c := mustJSON(f, claims(nil))
	for _, tok := range []string{
		handMade(f, ecHdr, mustJSON(f, claims(map[string]any{"exp": t0.Add(-time.Hour).Unix()})), es256Det(ec)),
		sign(f, ed, "ed", "EdDSA", claims(map[string]any{"sub": 7})),
		handMade(f, map[string]any{"alg": "none"}, c, nil),
		handMade(f, map[string]any{"alg": "HS256", "kid": "rsa"}, c, func(in []byte) []byte {
			m := hmac.New(sha256.New, pubDER)
			m.Write(in)
			return m.Sum(nil)
		}),
		handMade(f, map[string]any{"alg": "ES256", "kid": "rsa"}, c, rsaPKCS1(rk)),
		"", "garbage", "a.b.c", "..", "eyJhbGciOiJFUzI1NiJ9..", "e30.e30.", "Bearer x.y.z",
	} {
		f.Add(tok)
	}
	for tok, want := range fx.valid {
		if id, err := v.Verify(f.Context(), tok); err != nil || id.Principal != want {
			f.Fatalf("a valid seed is refused: %v", err)
		}
	}
	return fx
}

// es256Det signs like ES256 with RFC 6979 deterministic nonces.
func es256Det(k *ecdsa.PrivateKey) func([]byte) []byte {
	return func(in []byte) []byte {
		d := sha256.Sum256(in)
		der, err := k.Sign(nil, d[:], crypto.SHA256)
		if err != nil {
			panic(err)
		}
		var rs struct{ R, S *big.Int }
		if _, err := asn1.Unmarshal(der, &rs); err != nil {
			panic(err)
		}
		out := make([]byte, 64)
		rs.R.FillBytes(out[:32])
		rs.S.FillBytes(out[32:])
		return out
	}
}

// deterministicRSA builds a 2048-bit RSA key from a seed: rsa.GenerateKey ignores
// its reader since Go 1.26, and a key checked into the tree would look like a leak.
func deterministicRSA(tb testing.TB, seed uint64) *rsa.PrivateKey {
	tb.Helper()
	r := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := big.NewInt(65537)
	one := big.NewInt(1)
	prime := func() *big.Int {
		buf := make([]byte, 128)
		for {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			buf[0] |= 0xc0 // two top bits set: p*q has exactly 2048 bits
			buf[len(buf)-1] |= 1
			p := new(big.Int).SetBytes(buf)
			pm1 := new(big.Int).Sub(p, one)
			if p.ProbablyPrime(20) && new(big.Int).GCD(nil, nil, e, pm1).Cmp(one) == 0 {
				return p
			}
		}
	}
	p, q := prime(), prime()
	phi := new(big.Int).Mul(new(big.Int).Sub(p, one), new(big.Int).Sub(q, one))
	k := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: new(big.Int).Mul(p, q), E: 65537},
		D:         new(big.Int).ModInverse(e, phi),
		Primes:    []*big.Int{p, q},
	}
	k.Precompute()
	if err := k.Validate(); err != nil {
		tb.Fatal(err)
	}
	return k
}

// FuzzJWT checks Verify never panics and never accepts a token the real keys did
// not sign as one of the seeded valid tokens.
func FuzzJWT(f *testing.F) {
	fx := newFuzzFixture(f)
	algs := []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512, jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}
	codes := map[string]bool{CodeMalformed: true, CodeAlgorithm: true, CodeUnknownKey: true, CodeSignature: true, CodeExpired: true,
		CodeNotYetValid: true, CodeIssuer: true, CodeAudience: true, CodePrincipalClaim: true, CodeNoToken: true}

	f.Fuzz(func(t *testing.T, token string) {
		id, err := fx.v.Verify(t.Context(), token)
		if err != nil {
			if !codes[errs.Code(err)] {
				t.Fatalf("refusal with unexpected code %q: %v", errs.Code(err), err)
			}
			d := Description(err)
			if len(d) > 200 || strings.ContainsAny(d, "\"\\") {
				t.Fatalf("bad Description %q", d)
			}
			return
		}
		if id.Principal == "" {
			t.Fatal("accepted with an empty principal")
		}
		want, ok := fx.valid[token]
		if !ok {
			t.Fatalf("accepted a token that was not seeded as valid: %q", token)
		}
		if id.Principal != want {
			t.Fatalf("principal %q, want %q", id.Principal, want)
		}
		// Independently of Verify's key selection: the token verifies under the
		// real public key its kid names.
		jws, err := jose.ParseSignedCompact(token, algs)
		if err != nil {
			t.Fatalf("independent parse: %v", err)
		}
		pub, ok := fx.pubs[jws.Signatures[0].Header.KeyID]
		if !ok {
			t.Fatalf("accepted kid %q, which names no real key", jws.Signatures[0].Header.KeyID)
		}
		if _, err := jws.Verify(pub); err != nil {
			t.Fatalf("accepted, yet the real key refuses it: %v", err)
		}
	})
}

// FuzzBearerToken checks the header parser never panics and returns clean tokens.
func FuzzBearerToken(f *testing.F) {
	for _, s := range []string{"Bearer abc", "bearer  x.y.z ", "Basic Zm9v", "", "Bearer", "Bearer\t\tt", " BEARER t u", "Bearer\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		tok, ok := BearerToken(h)
		if !ok {
			if tok != "" {
				t.Fatalf("not ok but token %q", tok)
			}
			return
		}
		if tok == "" || strings.Trim(tok, " \t") != tok {
			t.Fatalf("token %q is empty or untrimmed", tok)
		}
		if !strings.HasPrefix(strings.ToLower(strings.TrimLeft(h, " \t")), "bearer") {
			t.Fatalf("accepted %q, which is not a Bearer header", h)
		}
		if again, ok := BearerToken("Bearer " + tok); !ok || again != tok {
			t.Fatalf("round trip of %q gave %q, %v", tok, again, ok)
		}
	})
}
