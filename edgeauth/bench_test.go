package edgeauth

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkVerify measures Verify with the JWKS already cached: a token's first check
// (the signature; "first", the verified tokens forgotten before each) and its later ones
// (remembered).
func BenchmarkVerify(b *testing.B) {
	testKeys(b)
	path := filepath.Join(b.TempDir(), "jwks.json")
	if err := os.WriteFile(path, standardJWKS(b), 0o600); err != nil {
		b.Fatal(err)
	}
	v, err := NewJWT(b.Context(), JWTConfig{Issuer: testIss, Audiences: []string{testAud}, JWKSFile: path})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	c := claims(map[string]any{"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	for _, bc := range []struct {
		name string
		tok  string
	}{
		{"ES256", sign(b, ecKey, "ec1", "ES256", c)},
		{"RS256", sign(b, rsaKey, "rsa1", "RS256", c)},
		{"EdDSA", sign(b, edKey, "ed1", "EdDSA", c)},
	} {
		b.Run(bc.name+"/first", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				v.seen.mu.Lock()
				clear(v.seen.m)
				v.seen.mu.Unlock()
				if _, err := v.Verify(b.Context(), bc.tok); err != nil {
					b.Fatal(err)
				}
			}
			if v.Fetches() != 1 {
				b.Fatalf("Fetches() = %d, want 1", v.Fetches())
			}
		})
		b.Run(bc.name+"/remembered", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(b.Context(), bc.tok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
