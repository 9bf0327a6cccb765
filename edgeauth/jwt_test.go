package edgeauth

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

func TestVerify(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))

	pubDER, err := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	hs256 := func(secret []byte) func([]byte) []byte {
		return func(in []byte) []byte {
			m := hmac.New(sha256.New, secret)
			m.Write(in)
			return m.Sum(nil)
		}
	}
	valid := sign(t, ecKey, "ec1", "ES256", claims(nil))
	parts := strings.Split(valid, ".")
	tampered := parts[0] + "." + b64.EncodeToString(mustJSON(t, claims(map[string]any{"sub": "mallory"}))) + "." + parts[2]

	tests := []struct {
		name      string
		token     string
		mod       func(*JWTConfig)
		code      string // "" means accepted
		principal string
	}{
		{name: "ES256 valid", token: valid, principal: "alice"},
		{name: "RS256 valid", token: sign(t, rsaKey, "rsa1", "RS256", claims(nil)), principal: "alice"},
		{name: "PS256 on an unpinned RSA key", token: sign(t, rsaKey2, "rsa2", "PS256", claims(nil)), principal: "alice"},
		{name: "RS512 on an unpinned RSA key", token: sign(t, rsaKey2, "rsa2", "RS512", claims(nil)), principal: "alice"},
		{name: "EdDSA valid", token: sign(t, edKey, "ed1", "EdDSA", claims(nil)), principal: "alice"},
		{name: "principal from email", token: valid, mod: func(c *JWTConfig) { c.Claim = "email" }, principal: "alice@example.test"},
		{name: "no kid, one EC P-256 key", token: sign(t, ecKey, "", "ES256", claims(nil)), principal: "alice"},
		{name: "no kid, several RSA keys", token: sign(t, rsaKey, "", "RS256", claims(nil)), code: CodeUnknownKey},

		{name: "expired", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(-2 * time.Minute).Unix()})), code: CodeExpired},
		{name: "expired exactly at skew", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(-time.Minute).Unix()})), code: CodeExpired},
		{name: "exp missing", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": nil})), code: CodeExpired},
		{name: "exp a string", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": "tomorrow"})), code: CodeMalformed},
		{name: "expired within skew accepted", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(-30 * time.Second).Unix()})), principal: "alice"},
		{name: "expired within a custom skew", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(-30 * time.Second).Unix()})), mod: func(c *JWTConfig) { c.Skew = 10 * time.Second }, code: CodeExpired},
		{name: "nbf in the future", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"nbf": t0.Add(5 * time.Minute).Unix()})), code: CodeNotYetValid},
		{name: "nbf within skew accepted", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"nbf": t0.Add(30 * time.Second).Unix()})), principal: "alice"},
		{name: "iat in the future", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"iat": t0.Add(time.Hour).Unix()})), code: CodeNotYetValid},
		{name: "fractional times accepted", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"iat": 1.5e9 + 0.25, "exp": float64(t0.Unix()) + 0.5})), principal: "alice"},

		{name: "wrong audience", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": "someone-else"})), code: CodeAudience},
		{name: "aud array holding the audience", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": []string{"x", testAud}})), principal: "alice"},
		{name: "aud array without it", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": []string{"x", "y"}})), code: CodeAudience},
		{name: "aud missing", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": nil})), code: CodeAudience},
		{name: "aud a number", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": 7})), code: CodeAudience},
		{name: "wrong issuer", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"iss": testIss + "/"})), code: CodeIssuer},
		{name: "issuer missing", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"iss": nil})), code: CodeIssuer},

		{name: "unknown kid", token: sign(t, ecKey, "nope", "ES256", claims(nil)), code: CodeUnknownKey},
		{name: "kid of an encryption key", token: sign(t, ecKey2, "enc1", "ES256", claims(nil)), code: CodeUnknownKey},
		{name: "kid of a symmetric key", token: handMade(t, map[string]any{"alg": "HS256", "kid": "hmac"}, mustJSON(t, claims(nil)), hs256([]byte("secretsecretsecretsecretsecret"))), code: CodeAlgorithm},
		{name: "alg none", token: handMade(t, map[string]any{"alg": "none", "typ": "JWT"}, mustJSON(t, claims(nil)), nil), code: CodeAlgorithm},
		{name: "alg None with kid", token: handMade(t, map[string]any{"alg": "None", "kid": "rsa1"}, mustJSON(t, claims(nil)), nil), code: CodeAlgorithm},
		{name: "no alg", token: handMade(t, map[string]any{"kid": "rsa1"}, mustJSON(t, claims(nil)), nil), code: CodeAlgorithm},
		{name: "HS256 with the RSA public key PEM", token: handMade(t, map[string]any{"alg": "HS256", "kid": "rsa1"}, mustJSON(t, claims(nil)), hs256(pubPEM)), code: CodeAlgorithm},
		{name: "HS256 with the RSA public key DER", token: handMade(t, map[string]any{"alg": "HS256", "kid": "rsa1"}, mustJSON(t, claims(nil)), hs256(pubDER)), code: CodeAlgorithm},
		{name: "RS256 signature, header says ES256", token: handMade(t, map[string]any{"alg": "ES256", "kid": "rsa1"}, mustJSON(t, claims(nil)), rsaPKCS1(rsaKey)), code: CodeAlgorithm},
		{name: "PS256 on a key pinned to RS256", token: sign(t, rsaKey, "rsa1", "PS256", claims(nil)), code: CodeAlgorithm},
		{name: "ES256 header, EdDSA key", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ed1"}, mustJSON(t, claims(nil)), es256(ecKey)), code: CodeAlgorithm},
		{name: "alg outside a narrowed list", token: sign(t, rsaKey, "rsa1", "RS256", claims(nil)), mod: func(c *JWTConfig) { c.Algorithms = []string{"ES256"} }, code: CodeAlgorithm},
		{name: "hand-made ES256 accepted", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ec1"}, mustJSON(t, claims(nil)), es256(ecKey)), principal: "alice"},
		{name: "crit header", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ec1", "crit": []string{"exp"}, "exp": 1}, mustJSON(t, claims(nil)), es256(ecKey)), code: CodeMalformed},
		{name: "b64 false", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ec1", "b64": false, "crit": []string{"b64"}}, mustJSON(t, claims(nil)), es256(ecKey)), code: CodeMalformed},

		{name: "tampered payload", token: tampered, code: CodeSignature},
		{name: "signed by another key under ec1", token: sign(t, ecKey2, "ec1", "ES256", claims(nil)), code: CodeSignature},
		{name: "signature stripped", token: parts[0] + "." + parts[1] + ".", code: CodeSignature},

		{name: "empty", token: "", code: CodeNoToken},
		{name: "one part", token: "garbage", code: CodeMalformed},
		{name: "two parts", token: "a.b", code: CodeMalformed},
		{name: "four parts", token: valid + ".x", code: CodeMalformed},
		{name: "dots only", token: "..", code: CodeMalformed},
		{name: "bad base64", token: "eyJ!.eyJ.abc", code: CodeMalformed},
		{name: "header not JSON", token: b64.EncodeToString([]byte("nope")) + "." + parts[1] + "." + parts[2], code: CodeMalformed},
		{name: "space inside", token: parts[0] + ". " + parts[1] + "." + parts[2], code: CodeMalformed},
		{name: "JSON serialization", token: `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, code: CodeMalformed},
		{name: "non-canonical base64 signature", token: parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-1] + string(parts[2][len(parts[2])-1]+1), code: CodeMalformed},
		{name: "over 16 KiB", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"pad": strings.Repeat("x", 17<<10)})), code: CodeMalformed},
		{name: "claims not an object", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ec1"}, []byte(`["sub"]`), es256(ecKey)), code: CodeMalformed},
		{name: "claims null", token: handMade(t, map[string]any{"alg": "ES256", "kid": "ec1"}, []byte(`null`), es256(ecKey)), code: CodeMalformed},

		{name: "sub missing", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"sub": nil})), code: CodePrincipalClaim},
		{name: "sub numeric", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"sub": 42})), code: CodePrincipalClaim},
		{name: "sub empty", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"sub": ""})), code: CodePrincipalClaim},
		{name: "email claim missing", token: sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"email": nil})), mod: func(c *JWTConfig) { c.Claim = "email" }, code: CodePrincipalClaim},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(t, is.url(), newClock(), tc.mod)
			id, err := v.Verify(t.Context(), tc.token)
			if tc.code == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.Principal != tc.principal || id.Scheme != "jwt" {
					t.Fatalf("identity = %q/%q, want %q/jwt", id.Principal, id.Scheme, tc.principal)
				}
				if id.Claims["iss"] != testIss {
					t.Fatalf("claims not returned: %v", id.Claims)
				}
				return
			}
			if got := errs.Code(err); got != tc.code {
				t.Fatalf("code = %q, want %q (err: %v)", got, tc.code, err)
			}
			var e *errs.Error
			if !errors.As(err, &e) || e.Part != "auth" || e.Msg == "" || e.Fix == "" {
				t.Fatalf("refusal lacks part/msg/fix: %#v", err)
			}
			if len(e.Msg) > 400 {
				t.Fatalf("message too long (%d bytes), echoes untrusted input? %s", len(e.Msg), e.Msg)
			}
			if len(tc.token) > 200 && strings.Contains(err.Error(), tc.token) {
				t.Fatal("the error echoes the whole token")
			}
			if d := Description(err); !strings.HasPrefix(d, tc.code+": ") {
				t.Fatalf("Description = %q", d)
			}
		})
	}
}

func TestVerifyClaimsReturned(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	v := newVerifier(t, is.url(), newClock(), nil)
	id, err := v.Verify(t.Context(), sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"groups": []string{"a", "b"}, "n": 3})))
	if err != nil {
		t.Fatal(err)
	}
	if g, ok := id.Claims["groups"].([]any); !ok || len(g) != 2 || g[0] != "a" {
		t.Fatalf("groups = %#v", id.Claims["groups"])
	}
	if n, ok := id.Claims["n"].(float64); !ok || n != 3 {
		t.Fatalf("n = %#v, want float64 3", id.Claims["n"])
	}
}

func TestBearerToken(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc  ", "abc", true},
		{"  Bearer\tabc", "abc", true},
		{"Bearer", "", false},
		{"Bearer    ", "", false},
		{"", "", false},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearerabc", "", false},
		{"Token abc", "", false},
	}
	for _, tc := range tests {
		got, ok := BearerToken(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("BearerToken(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestDescription(t *testing.T) {
	long := errs.New(CodeIssuer, "auth", `the token's iss "`+strings.Repeat(`a"\`, 150)+"\u00e9\n\" is wrong", "fix")
	tests := []struct {
		err  error
		want string // prefix
	}{
		{nil, ""},
		{long, "E-AUTH-008: the token's iss 'a'/a'/"},
		{errs.List{errs.New(CodeConfig, "auth", "first", "f"), errs.New(CodeConfig, "auth", "second", "f")}, "E-AUTH-001: first"},
		{errorString("internal detail at 10.0.0.1"), "authentication failed"},
	}
	for _, tc := range tests {
		d := Description(tc.err)
		if !strings.HasPrefix(d, tc.want) {
			t.Errorf("Description = %q, want prefix %q", d, tc.want)
		}
		if len(d) > 200 {
			t.Errorf("Description is %d bytes", len(d))
		}
		for _, c := range []byte(d) {
			if c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				t.Errorf("Description holds %q: %q", c, d)
			}
		}
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }

func TestRefusalsClipUntrustedValues(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	v := newVerifier(t, is.url(), newClock(), nil)
	long := strings.Repeat("k", 5000)
	for name, tok := range map[string]string{
		"kid not a string": handMade(t, map[string]any{"alg": "ES256", "kid": []string{long}}, mustJSON(t, claims(nil)), es256(ecKey)),
		"unknown long kid": sign(t, ecKey, long, "ES256", claims(nil)),
		"long alg":         handMade(t, map[string]any{"alg": long}, mustJSON(t, claims(nil)), nil),
		"long issuer":      sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"iss": long})),
		"long audience":    sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"aud": long})),
		"garbage":          strings.Repeat("!", 10000),
	} {
		_, err := v.Verify(t.Context(), tok)
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		if n := len(err.Error()); n > 700 {
			t.Errorf("%s: error is %d bytes: %.200s...", name, n, err)
		}
	}
}
