// Package jwttest makes JWTs for tests of the edge: signed with a real key through the
// JOSE library the gateway verifies with, or put together by hand as a forger would.
package jwttest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/go-jose/go-jose/v4"
)

// Sign returns claims as a compact JWS signed with key under alg, its header naming kid
// and holding extra.
func Sign(t testing.TB, key any, alg jose.SignatureAlgorithm, kid string, claims map[string]any, extra map[jose.HeaderKey]any) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
	for k, v := range extra {
		opts = opts.WithHeader(k, v)
	}
	sg, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := sg.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := jws.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Override returns claims changed by over: a nil value removes its claim, any other sets
// it. claims itself is changed and returned.
func Override(claims, over map[string]any) map[string]any {
	for k, v := range over {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	return claims
}

// Handmade returns a compact JWS put together by hand: header and claims as given,
// signed with HMAC-SHA256 under secret (the algorithm-confusion forgery, when secret is
// an issuer's public key), or unsigned when secret is nil.
func Handmade(header, claims map[string]any, secret []byte) string {
	enc := base64.RawURLEncoding
	h, _ := json.Marshal(header)
	p, _ := json.Marshal(claims)
	in := enc.EncodeToString(h) + "." + enc.EncodeToString(p)
	if secret == nil {
		return in + "."
	}
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + enc.EncodeToString(m.Sum(nil))
}
