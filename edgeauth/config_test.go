package edgeauth

import (
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

func TestNewJWTConfig(t *testing.T) {
	testKeys(t)
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodFile := write("good.json", standardJWKS(t))
	notJSON := write("bad.json", []byte("not json"))
	onlyHMAC := write("hmac.json", []byte(`{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}`))
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	weakRSA := write("weak.json", jwksJSON(t, jwk{key: weak, kid: "w"}))
	huge := write("huge.json", []byte(`{"keys":[],"x":"`+strings.Repeat("x", 1<<20)+`"}`))

	ok := func(c JWTConfig) JWTConfig {
		if c.Issuer == "" {
			c.Issuer = testIss
		}
		if c.Audiences == nil {
			c.Audiences = []string{testAud}
		}
		if c.JWKSURL == "" && c.JWKSFile == "" {
			c.JWKSURL = "https://id.example.test/jwks"
		}
		return c
	}
	tests := []struct {
		name string
		cfg  JWTConfig
		want []string // substrings, one per expected error; nil means accepted
	}{
		{name: "https URL", cfg: ok(JWTConfig{})},
		{name: "loopback http", cfg: ok(JWTConfig{JWKSURL: "http://127.0.0.1:8080/jwks"})},
		{name: "localhost http", cfg: ok(JWTConfig{JWKSURL: "http://localhost/jwks"})},
		{name: "IPv6 loopback http", cfg: ok(JWTConfig{JWKSURL: "http://[::1]:9/jwks"})},
		{name: "file", cfg: ok(JWTConfig{JWKSFile: goodFile})},
		{name: "narrowed algorithms", cfg: ok(JWTConfig{Algorithms: []string{"ES256", "EdDSA", "ES256"}})},
		{name: "max skew", cfg: ok(JWTConfig{Skew: 5 * time.Minute})},

		{name: "empty", cfg: JWTConfig{}, want: []string{"issuer is empty", "no audience", "neither a JWKS URL nor a JWKS file"}},
		{name: "empty audience", cfg: ok(JWTConfig{Audiences: []string{testAud, ""}}), want: []string{"audience 2 is empty"}},
		{name: "both sources", cfg: ok(JWTConfig{JWKSURL: "https://x.test/jwks", JWKSFile: goodFile}), want: []string{"both"}},
		{name: "plain http to the network", cfg: ok(JWTConfig{JWKSURL: "http://id.example.test/jwks"}), want: []string{"plain http"}},
		{name: "file scheme", cfg: ok(JWTConfig{JWKSURL: "file:///etc/jwks.json"}), want: []string{`scheme "file"`}},
		{name: "no host", cfg: ok(JWTConfig{JWKSURL: "https:///jwks"}), want: []string{"names no host"}},
		{name: "not a URL", cfg: ok(JWTConfig{JWKSURL: "https://[::1"}), want: []string{"is not a URL"}},
		{name: "ftp scheme", cfg: ok(JWTConfig{JWKSURL: "ftp://id.example.test/jwks"}), want: []string{`scheme "ftp"`}},
		{name: "relative URL", cfg: ok(JWTConfig{JWKSURL: "/jwks"}), want: []string{`scheme ""`}},
		{name: "HS256", cfg: ok(JWTConfig{Algorithms: []string{"RS256", "HS256"}}), want: []string{`"HS256" is not allowed: symmetric`}},
		{name: "none", cfg: ok(JWTConfig{Algorithms: []string{"none"}}), want: []string{`"none" is not allowed`}},
		{name: "lowercase alg", cfg: ok(JWTConfig{Algorithms: []string{"rs256"}}), want: []string{`"rs256" is not allowed`}},
		{name: "unknown alg", cfg: ok(JWTConfig{Algorithms: []string{"ES256K", "RSA-OAEP"}}), want: []string{"ES256K", "RSA-OAEP"}},
		{name: "skew too large", cfg: ok(JWTConfig{Skew: 6 * time.Minute}), want: []string{"skew 6m0s is out of range"}},
		{name: "skew negative", cfg: ok(JWTConfig{Skew: -time.Second}), want: []string{"skew -1s"}},
		{name: "negative refresh and age", cfg: ok(JWTConfig{MinRefresh: -1, MaxAge: -1}), want: []string{"refresh interval", "maximum age"}},
		{name: "missing file", cfg: ok(JWTConfig{JWKSFile: filepath.Join(dir, "absent.json")}), want: []string{"absent.json"}},
		{name: "file not JSON", cfg: ok(JWTConfig{JWKSFile: notJSON}), want: []string{"bad.json"}},
		{name: "file with only an HMAC key", cfg: ok(JWTConfig{JWKSFile: onlyHMAC}), want: []string{"no usable signature key"}},
		{name: "file with a weak RSA key", cfg: ok(JWTConfig{JWKSFile: weakRSA}), want: []string{"no usable signature key"}},
		{name: "file over 1 MiB", cfg: ok(JWTConfig{JWKSFile: huge}), want: []string{"over 1048576 bytes"}},
		{name: "everything wrong", cfg: JWTConfig{Audiences: []string{""}, JWKSURL: "http://example.test", JWKSFile: goodFile, Algorithms: []string{"HS512"}, Skew: time.Hour},
			want: []string{"issuer", "audience 1", "both", "HS512", "skew"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := NewJWT(t.Context(), tc.cfg)
			if tc.want == nil {
				if err != nil || v == nil {
					t.Fatalf("refused: %v", err)
				}
				if tc.cfg.JWKSURL != "" && v.Fetches() != 0 {
					t.Fatal("NewJWT fetched the URL")
				}
				return
			}
			if v != nil {
				t.Fatal("a verifier came back with an error")
			}
			var list errs.List
			if !errors.As(err, &list) {
				t.Fatalf("err is %T, want errs.List: %v", err, err)
			}
			if len(list) != len(tc.want) {
				t.Fatalf("%d errors, want %d:\n%v", len(list), len(tc.want), err)
			}
			for i, e := range list {
				if e.Code != CodeConfig || e.Part != "auth" || e.Fix == "" {
					t.Errorf("error %d: code %q part %q fix %q", i, e.Code, e.Part, e.Fix)
				}
				if !strings.Contains(e.Error(), tc.want[i]) {
					t.Errorf("error %d = %q, want it to mention %q", i, e.Error(), tc.want[i])
				}
			}
			if errs.Code(err) != CodeConfig {
				t.Errorf("errs.Code = %q", errs.Code(err))
			}
		})
	}
}

func TestCheckCertField(t *testing.T) {
	for _, f := range []string{"", "cn", "uri", "dns", "email"} {
		if err := CheckCertField(f); err != nil {
			t.Errorf("CheckCertField(%q) = %v", f, err)
		}
	}
	for _, f := range []string{"CN", "san", "subject", " cn"} {
		if err := CheckCertField(f); errs.Code(err) != CodeConfig {
			t.Errorf("CheckCertField(%q) = %v, want %s", f, err, CodeConfig)
		}
	}
}
