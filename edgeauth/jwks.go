package edgeauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const (
	// maxJWKSBytes caps a JWKS body or file: real sets are a few KiB.
	maxJWKSBytes = 1 << 20
	// fetchTimeout bounds one JWKS fetch, whatever the caller's client does.
	fetchTimeout = 10 * time.Second
	// minRSABits refuses RSA keys too short to trust; such keys are skipped.
	minRSABits = 2048
)

// family is the kind of public key, which fixes the algorithms it can check.
type family uint8

const (
	famRSA family = iota + 1
	famEC
	famEd
)

// pubKey is one usable verification key from a JWKS.
type pubKey struct {
	kid   string
	alg   string // the JWK's own alg, "" when unset
	fam   family
	curve elliptic.Curve // for famEC
	key   any            // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// fits reports whether k can verify a signature made with alg: right family,
// right curve, and the key's own alg (when set) equal to alg.
func (k *pubKey) fits(alg string) bool {
	if k.alg != "" && k.alg != alg {
		return false
	}
	return familyFits(k.fam, k.curve, alg)
}

func familyFits(f family, c elliptic.Curve, alg string) bool {
	switch alg {
	case "RS256", "RS384", "RS512", "PS256", "PS384", "PS512":
		return f == famRSA
	case "ES256":
		return f == famEC && c == elliptic.P256()
	case "ES384":
		return f == famEC && c == elliptic.P384()
	case "ES512":
		return f == famEC && c == elliptic.P521()
	case "EdDSA":
		return f == famEd
	}
	return false
}

func (k *pubKey) describe() string {
	switch k.fam {
	case famRSA:
		return "an RSA key"
	case famEC:
		return "an EC " + k.curve.Params().Name + " key"
	case famEd:
		return "an Ed25519 key"
	}
	return "a key"
}

// keySet is an immutable parsed JWKS.
type keySet struct {
	all   []*pubKey
	byKid map[string][]*pubKey
}

// parseJWKS keeps the public signature keys of a JWKS document. Keys of an unknown
// kty, keys for encryption and symmetric keys are skipped, not fatal: issuers
// publish such keys beside their signing keys. A set with no usable key is an error.
func parseJWKS(data []byte) (*keySet, error) {
	var doc struct {
		Keys *[]json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a JWKS JSON document: %w", err)
	}
	if doc.Keys == nil {
		return nil, errors.New(`not a JWKS: no "keys" array`)
	}
	set := &keySet{byKid: map[string][]*pubKey{}}
	for _, raw := range *doc.Keys {
		k, ok := usableKey(raw)
		if !ok {
			continue
		}
		set.all = append(set.all, k)
		if k.kid != "" {
			set.byKid[k.kid] = append(set.byKid[k.kid], k)
		}
	}
	if len(set.all) == 0 {
		return nil, fmt.Errorf("the JWKS holds no usable signature key (of %d keys: need kty RSA of at least %d bits, EC P-256/P-384/P-521 or OKP Ed25519, with use absent or \"sig\")", len(*doc.Keys), minRSABits)
	}
	return set, nil
}

// usableKey turns one JWK into a verification key, or reports it unusable.
func usableKey(raw json.RawMessage) (*pubKey, bool) {
	var jwk jose.JSONWebKey
	if err := jwk.UnmarshalJSON(raw); err != nil {
		return nil, false // unknown kty or a broken key: skip it, keep the rest
	}
	if jwk.Use != "" && jwk.Use != "sig" {
		return nil, false
	}
	k := &pubKey{kid: jwk.KeyID, alg: jwk.Algorithm}
	switch key := jwk.Key.(type) {
	case *rsa.PublicKey:
		k.fam, k.key = famRSA, key
	case *rsa.PrivateKey:
		k.fam, k.key = famRSA, &key.PublicKey
	case *ecdsa.PublicKey:
		k.fam, k.curve, k.key = famEC, key.Curve, key
	case *ecdsa.PrivateKey:
		k.fam, k.curve, k.key = famEC, key.Curve, &key.PublicKey
	case ed25519.PublicKey:
		k.fam, k.key = famEd, key
	case ed25519.PrivateKey:
		k.fam, k.key = famEd, key.Public().(ed25519.PublicKey)
	default:
		return nil, false // symmetric ("oct") or anything else never verifies here
	}
	if k.fam == famRSA && k.key.(*rsa.PublicKey).N.BitLen() < minRSABits {
		return nil, false
	}
	if k.fam == famEC && k.curve != elliptic.P256() && k.curve != elliptic.P384() && k.curve != elliptic.P521() {
		return nil, false
	}
	if k.alg != "" && !familyFits(k.fam, k.curve, k.alg) {
		// A key whose own alg is not a signature alg for its type (RSA-OAEP, HS256 on
		// an RSA key, ES256 on P-384) cannot sign anything this package accepts.
		return nil, false
	}
	return k, true
}

// snapshot is what Verify reads without a lock: the keys and when they came.
type snapshot struct {
	keys      *keySet   // nil until a load succeeds
	loadedAt  time.Time // the last successful load
	triedAt   time.Time // the last load attempt, successful or not
	tried     bool      // whether any attempt was made
	lastError error     // the last attempt's failure, nil after a success
}

// flight is one load in progress that concurrent callers wait on.
type flight struct {
	done chan struct{}
	snap *snapshot
}

// refresh loads the JWKS again unless someone already did since the caller read
// seen, or the last attempt was less than MinRefresh ago. Concurrent callers share
// one load. It returns the snapshot to use.
func (v *JWT) refresh(ctx context.Context, seen *snapshot) (*snapshot, error) {
	v.mu.Lock()
	cur := v.snap.Load()
	if cur != seen {
		v.mu.Unlock()
		return cur, nil // another caller refreshed meanwhile
	}
	if f := v.inflight; f != nil {
		v.mu.Unlock()
		return v.wait(ctx, f)
	}
	if cur.tried && v.now().Sub(cur.triedAt) < v.minRefresh {
		v.mu.Unlock()
		return cur, nil
	}
	f := &flight{done: make(chan struct{})}
	v.inflight = f
	v.mu.Unlock()

	// The load runs apart from the caller so one caller's cancelled context does not
	// fail the load every other waiter shares; fetchTimeout still bounds it.
	go func() {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		set, err := v.load(lctx)
		now := v.now()

		v.mu.Lock()
		prev := v.snap.Load()
		next := &snapshot{keys: prev.keys, loadedAt: prev.loadedAt, triedAt: now, tried: true, lastError: err}
		if err == nil {
			next.keys, next.loadedAt = set, now
		}
		v.snap.Store(next)
		f.snap = next
		v.inflight = nil
		v.mu.Unlock()
		close(f.done)
	}()
	return v.wait(ctx, f)
}

func (v *JWT) wait(ctx context.Context, f *flight) (*snapshot, error) {
	select {
	case <-f.done:
		return f.snap, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// load reads the JWKS once from its URL or file.
func (v *JWT) load(ctx context.Context) (*keySet, error) {
	v.fetches.Add(1)
	var data []byte
	var err error
	if v.cfg.JWKSFile != "" {
		data, err = readFileCapped(v.cfg.JWKSFile)
	} else {
		data, err = v.fetch(ctx)
	}
	if err != nil {
		return nil, err
	}
	return parseJWKS(data)
}

func (v *JWT) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKSURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096)) // lets the connection be reused
		return nil, fmt.Errorf("HTTP status %d, want 200", resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the body: %w", err)
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("the body is over %d bytes", maxJWKSBytes)
	}
	return data, nil
}

func readFileCapped(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("the file is over %d bytes", maxJWKSBytes)
	}
	return data, nil
}
