package edgeauth

import (
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// TestVerifiedTokens: a token verified once answers from memory without a signature
// check, but never past its expiry, and not once the key set changed: a key the issuer
// dropped refuses the tokens it signed at the next refresh, remembered or not.
func TestVerifiedTokens(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, jwksJSON(t, jwk{key: ecKey, kid: "ec1", alg: "ES256", use: "sig"}))
	clk := newClock()
	v := newVerifier(t, is.url(), clk, func(c *JWTConfig) { c.MaxAge = time.Hour; c.MinRefresh = time.Second })
	short := sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(2 * time.Minute).Unix()}))
	long := sign(t, ecKey, "ec1", "ES256", claims(nil))
	for _, tok := range []string{short, long, short, long} {
		if id, err := v.Verify(t.Context(), tok); err != nil || id.Principal != "alice" {
			t.Fatalf("Verify: %+v %v", id, err)
		}
	}
	if n := len(v.seen.m); n != 2 {
		t.Errorf("%d tokens remembered, want 2", n)
	}
	// Past the short token's exp and the skew: refused, though remembered.
	clk.Advance(2*time.Minute + time.Minute + time.Second)
	if _, err := v.Verify(t.Context(), short); errs.Code(err) != CodeExpired {
		t.Errorf("a remembered token past its exp: %v, want %s", err, CodeExpired)
	}
	// The issuer drops the key; once the keys are refetched (their age), the remembered
	// long token is checked again, and refused.
	is.serve(200, jwksJSON(t, jwk{key: ecKey2, kid: "ec2", alg: "ES256", use: "sig"}))
	clk.Advance(time.Hour)
	if _, err := v.Verify(t.Context(), long); errs.Code(err) != CodeUnknownKey {
		t.Errorf("a remembered token of a dropped key: %v, want %s", err, CodeUnknownKey)
	}
}
