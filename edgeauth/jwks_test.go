package edgeauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
)

// wantFetches checks the verifier's count and the issuer's hits agree with want.
func wantFetches(t *testing.T, v *JWT, is *issuer, want int) {
	t.Helper()
	if got := v.Fetches(); got != want {
		t.Fatalf("Fetches() = %d, want %d", got, want)
	}
	if is != nil {
		if got := is.hits.Load(); got != int64(want) {
			t.Fatalf("issuer hits = %d, want %d", got, want)
		}
	}
}

func verifyCode(t *testing.T, v *JWT, token, want string) {
	t.Helper()
	_, err := v.Verify(t.Context(), token)
	if got := errs.Code(err); got != want {
		t.Fatalf("code = %q, want %q (err: %v)", got, want, err)
	}
}

func TestNoFetchAtNew(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	v := newVerifier(t, is.url(), newClock(), nil)
	wantFetches(t, v, is, 0)
	verifyCode(t, v, sign(t, ecKey, "ec1", "ES256", claims(nil)), "")
	verifyCode(t, v, sign(t, rsaKey, "rsa1", "RS256", claims(nil)), "")
	wantFetches(t, v, is, 1)
}

func TestUnknownKidRefreshIsBounded(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	clk := newClock()
	v := newVerifier(t, is.url(), clk, func(c *JWTConfig) { c.MinRefresh = 30 * time.Second })
	unknown := sign(t, ecKey, "nope", "ES256", claims(nil))

	// The first unknown kid on a cold verifier costs the initial fetch only.
	verifyCode(t, v, unknown, CodeUnknownKey)
	wantFetches(t, v, is, 1)

	clk.Advance(30 * time.Second)
	verifyCode(t, v, unknown, CodeUnknownKey)
	wantFetches(t, v, is, 2) // one refetch, then refused

	// Within MinRefresh, unknown kids (the same or others) cost nothing.
	clk.Advance(29 * time.Second)
	verifyCode(t, v, unknown, CodeUnknownKey)
	verifyCode(t, v, sign(t, ecKey, "other", "ES256", claims(nil)), CodeUnknownKey)
	verifyCode(t, v, sign(t, ecKey, "ec1", "ES256", claims(nil)), "")
	wantFetches(t, v, is, 2)

	clk.Advance(time.Second)
	verifyCode(t, v, unknown, CodeUnknownKey)
	wantFetches(t, v, is, 3)
}

func TestConcurrentColdVerifyFetchesOnce(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	v := newVerifier(t, is.url(), newClock(), nil)
	tok := sign(t, ecKey, "ec1", "ES256", claims(nil))
	var wg sync.WaitGroup
	errc := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), tok); err != nil {
				errc <- err
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	wantFetches(t, v, is, 1)
}

func TestKeyRotation(t *testing.T) {
	testKeys(t)
	keyA := jwk{key: ecKey, kid: "A"}
	keyB := jwk{key: ecKey2, kid: "B"}
	is := newIssuer(t, jwksJSON(t, keyA))
	clk := newClock()
	v := newVerifier(t, is.url(), clk, func(c *JWTConfig) {
		c.MinRefresh = 30 * time.Second
		c.MaxAge = time.Hour
	})
	far := claims(map[string]any{"exp": t0.Add(24 * time.Hour).Unix()})
	tokA := sign(t, ecKey, "A", "ES256", far)
	tokB := sign(t, ecKey2, "B", "ES256", far)

	verifyCode(t, v, tokA, "")
	verifyCode(t, v, tokA, "")
	wantFetches(t, v, is, 1)

	// The issuer publishes B beside A and starts signing with B.
	is.serve(http.StatusOK, jwksJSON(t, keyA, keyB))
	clk.Advance(time.Minute)
	verifyCode(t, v, tokB, "")
	wantFetches(t, v, is, 2)
	verifyCode(t, v, tokB, "")
	verifyCode(t, v, tokA, "") // A is still published
	wantFetches(t, v, is, 2)

	// The issuer retires A; the cache keeps it until MaxAge.
	is.serve(http.StatusOK, jwksJSON(t, keyB))
	clk.Advance(30 * time.Minute)
	verifyCode(t, v, tokA, "")
	wantFetches(t, v, is, 2)

	// Past MaxAge the next Verify refetches once; A is gone, and the refresh an
	// unknown kid may cause is bounded by that same fetch.
	clk.Advance(31 * time.Minute)
	verifyCode(t, v, tokA, CodeUnknownKey)
	wantFetches(t, v, is, 3)
	verifyCode(t, v, tokB, "")
	verifyCode(t, v, tokA, CodeUnknownKey)
	wantFetches(t, v, is, 3)
}

func TestJWKSFailure(t *testing.T) {
	testKeys(t)
	tok := sign(t, ecKey, "ec1", "ES256", claims(nil))
	big := `{"keys":[],"pad":"` + strings.Repeat("x", 1<<20) + `"}`
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"server error", http.StatusInternalServerError, `{"keys":[]}`},
		{"not found", http.StatusNotFound, "not found"},
		{"not JSON", http.StatusOK, "<html>"},
		{"no keys array", http.StatusOK, `{"kid":"x"}`},
		{"no usable key", http.StatusOK, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`},
		{"over 1 MiB", http.StatusOK, big},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			is := newIssuer(t, nil)
			is.serve(tc.status, []byte(tc.body))
			clk := newClock()
			v := newVerifier(t, is.url(), clk, nil)
			_, err := v.Verify(t.Context(), tok)
			if errs.Code(err) != CodeJWKS {
				t.Fatalf("code = %q, want %q (err: %v)", errs.Code(err), CodeJWKS, err)
			}
			if !strings.Contains(err.Error(), is.url()) {
				t.Fatalf("the error does not name the URL: %v", err)
			}
			// Failures are retried only after MinRefresh.
			verifyCode(t, v, tok, CodeJWKS)
			wantFetches(t, v, is, 1)
			clk.Advance(30 * time.Second)
			is.serve(http.StatusOK, standardJWKS(t))
			verifyCode(t, v, tok, "")
			wantFetches(t, v, is, 2)
		})
	}
}

func TestJWKSUnreachable(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, nil)
	url := is.url()
	is.srv.Close()
	v := newVerifier(t, url, newClock(), nil)
	_, err := v.Verify(t.Context(), sign(t, ecKey, "ec1", "ES256", claims(nil)))
	if errs.Code(err) != CodeJWKS || !strings.Contains(err.Error(), url) {
		t.Fatalf("err = %v, want %s naming %s", err, CodeJWKS, url)
	}
}

func TestJWKSFailureKeepsOldKeys(t *testing.T) {
	testKeys(t)
	is := newIssuer(t, standardJWKS(t))
	clk := newClock()
	v := newVerifier(t, is.url(), clk, func(c *JWTConfig) {
		c.MaxAge = time.Hour
		c.MinRefresh = 30 * time.Second
	})
	tok := sign(t, ecKey, "ec1", "ES256", claims(map[string]any{"exp": t0.Add(24 * time.Hour).Unix()}))
	verifyCode(t, v, tok, "")
	wantFetches(t, v, is, 1)

	is.serve(http.StatusBadGateway, []byte("down"))
	clk.Advance(time.Hour)
	verifyCode(t, v, tok, "") // the refetch fails; the old keys serve
	wantFetches(t, v, is, 2)
	verifyCode(t, v, tok, "") // retried only after MinRefresh
	wantFetches(t, v, is, 2)
	clk.Advance(30 * time.Second)
	verifyCode(t, v, tok, "")
	wantFetches(t, v, is, 3)

	is.serve(http.StatusOK, jwksJSON(t, jwk{key: ecKey2, kid: "ec2"}))
	clk.Advance(30 * time.Second)
	verifyCode(t, v, tok, CodeUnknownKey) // the refetch succeeded: ec1 is gone
	wantFetches(t, v, is, 4)
}

func TestJWKSFile(t *testing.T) {
	testKeys(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(path, jwksJSON(t, jwk{key: ecKey, kid: "A"}), 0o600); err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	v, err := NewJWT(t.Context(), JWTConfig{Issuer: testIss, Audiences: []string{testAud}, JWKSFile: path, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	wantFetches(t, v, nil, 1) // read at New
	verifyCode(t, v, sign(t, ecKey, "A", "ES256", claims(nil)), "")
	wantFetches(t, v, nil, 1)

	if err := os.WriteFile(path, jwksJSON(t, jwk{key: ecKey, kid: "A"}, jwk{key: edKey, kid: "B"}), 0o600); err != nil {
		t.Fatal(err)
	}
	tokB := sign(t, edKey, "B", "EdDSA", claims(nil))
	verifyCode(t, v, tokB, CodeUnknownKey) // within MinRefresh of the read at New
	wantFetches(t, v, nil, 1)
	clk.Advance(30 * time.Second)
	verifyCode(t, v, tokB, "")
	wantFetches(t, v, nil, 2)

	// A file that turns bad keeps the keys read before.
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	verifyCode(t, v, sign(t, ecKey, "C", "ES256", claims(nil)), CodeUnknownKey)
	verifyCode(t, v, tokB, "")
	wantFetches(t, v, nil, 3)
}

func TestCancelledWaitDoesNotSpoilTheFetch(t *testing.T) {
	testKeys(t)
	body := standardJWKS(t)
	gate := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-gate
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	v := newVerifier(t, srv.URL, newClock(), nil)
	tok := sign(t, ecKey, "ec1", "ES256", claims(nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := v.Verify(ctx, tok)
		done <- err
	}()
	<-arrived // the fetch is under way and held by the issuer
	cancel()
	if err := <-done; errs.Code(err) != CodeJWKS || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want %s wrapping context.Canceled", err, CodeJWKS)
	}
	close(gate)
	// The shared fetch went on without the caller that gave up; this Verify joins
	// it or finds its keys, but never fetches again.
	verifyCode(t, v, tok, "")
	wantFetches(t, v, nil, 1)
}
