package edgeauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/capsulegate/capsulegate/errs"
)

// Identity is who a request comes from.
type Identity struct {
	Principal string         // the chosen claim's value, or the certificate's name
	Scheme    string         // "jwt" or "mtls"
	Claims    map[string]any // read only: a remembered token shares it between requests; the token's claims as JSON decoded them (numbers float64); for mTLS: {"subject", "issuer", "serial": string; "dns", "uris", "emails": []any of string}
}

// JWTConfig says which tokens a JWT verifier accepts and where the issuer's keys are.
type JWTConfig struct {
	Issuer     string           // required: the iss every token must carry, exactly
	Audiences  []string         // required, at least one: a token's aud (string or array) must hold one of them
	JWKSURL    string           // where the issuer's JWKS is fetched (https, or http to a loopback host); exactly one of JWKSURL and JWKSFile
	JWKSFile   string           // a JWKS on disk, read at NewJWT and re-read like a fetched one
	Claim      string           // the claim naming the principal; default "sub"; must be a non-empty string claim in the token
	Algorithms []string         // subset of the asymmetric algorithms; default all of them; HS*/none refused
	Skew       time.Duration    // clock skew allowed on exp/nbf/iat; default 60s; at most 5m
	Client     *http.Client     // fetches the JWKS; nil means http.DefaultClient
	MinRefresh time.Duration    // an unknown kid refetches the JWKS at most once per MinRefresh; default 30s
	MaxAge     time.Duration    // keys are refetched lazily after this long; default 1h
	Now        func() time.Time // nil means time.Now; tests inject a clock
}

// Defaults and bounds of JWTConfig.
const (
	defaultClaim      = "sub"
	defaultSkew       = 60 * time.Second
	maxSkew           = 5 * time.Minute
	defaultMinRefresh = 30 * time.Second
	defaultMaxAge     = time.Hour
	// maxTokenBytes caps a token before any decoding: real tokens are a few KiB.
	maxTokenBytes = 16 << 10
)

// asymmetric is the fixed list of algorithms a token may use; see the package doc.
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// JWT verifies bearer tokens of one issuer; it is safe for concurrent use.
type JWT struct {
	cfg        JWTConfig
	algs       []jose.SignatureAlgorithm
	client     *http.Client
	now        func() time.Time
	skew       time.Duration
	minRefresh time.Duration
	maxAge     time.Duration

	snap    atomic.Pointer[snapshot] // read lock-free by Verify
	fetches atomic.Int64
	seen    verifiedCache // tokens that passed every check (verified.go)

	mu       sync.Mutex // guards inflight and the decision to start a load
	inflight *flight
}

// NewJWT checks cfg, reporting every problem at once as an errs.List of CodeConfig
// errors. It fetches nothing from a URL, so the gateway starts while the issuer is
// down; the first Verify fetches. A JWKSFile is read and parsed here.
func NewJWT(ctx context.Context, cfg JWTConfig) (*JWT, error) {
	var list errs.List
	bad := func(msg, fix string) {
		list = append(list, errs.New(CodeConfig, part, msg, fix))
	}

	if cfg.Issuer == "" {
		bad("the issuer is empty; every token's iss is compared with it", "set the issuer to the iss value the identity provider puts in its tokens, e.g. https://id.example.com")
	}
	if len(cfg.Audiences) == 0 {
		bad("no audience is set; a token must be addressed to this gateway", "list at least one audience, the aud value the identity provider issues for this gateway")
	}
	for i, a := range cfg.Audiences {
		if a == "" {
			bad(fmt.Sprintf("audience %d is empty", i+1), "remove the empty audience or write the aud value")
		}
	}

	switch {
	case cfg.JWKSURL != "" && cfg.JWKSFile != "":
		bad("both a JWKS URL and a JWKS file are set", "keep exactly one of them")
	case cfg.JWKSURL == "" && cfg.JWKSFile == "":
		bad("neither a JWKS URL nor a JWKS file is set; tokens cannot be checked without the issuer's keys", "set the JWKS URL (the jwks_uri of the issuer's OIDC discovery document) or a JWKS file")
	case cfg.JWKSURL != "":
		if err := checkJWKSURL(cfg.JWKSURL); err != nil {
			list = append(list, err)
		}
	}

	allowed := map[string]bool{}
	for _, a := range asymmetric {
		allowed[a] = true
	}
	algNames := cfg.Algorithms
	if len(algNames) == 0 {
		algNames = asymmetric
	}
	var algs []jose.SignatureAlgorithm
	seen := map[string]bool{}
	for _, a := range algNames {
		switch {
		case !allowed[a]:
			why := "it is not a supported asymmetric signature algorithm"
			if strings.HasPrefix(strings.ToUpper(a), "HS") || strings.EqualFold(a, "none") {
				why = "symmetric and unsigned tokens are refused by design: anyone who knows the issuer's public key could forge them"
			}
			bad(fmt.Sprintf("algorithm %q is not allowed: %s", clip(a), why), "use only "+strings.Join(asymmetric, ", ")+" (exact spelling), or leave the list empty for all of them")
		case !seen[a]:
			seen[a] = true
			algs = append(algs, jose.SignatureAlgorithm(a))
		}
	}

	skew := cfg.Skew
	switch {
	case skew == 0:
		skew = defaultSkew
	case skew < 0 || skew > maxSkew:
		bad(fmt.Sprintf("clock skew %s is out of range (0 to %s)", skew, maxSkew), "set a skew between 1s and 5m, or leave it unset for 60s")
	}
	minRefresh := cfg.MinRefresh
	switch {
	case minRefresh == 0:
		minRefresh = defaultMinRefresh
	case minRefresh < 0:
		bad(fmt.Sprintf("minimum refresh interval %s is negative", minRefresh), "set a positive interval, or leave it unset for 30s")
	}
	maxAge := cfg.MaxAge
	switch {
	case maxAge == 0:
		maxAge = defaultMaxAge
	case maxAge < 0:
		bad(fmt.Sprintf("key maximum age %s is negative", maxAge), "set a positive age, or leave it unset for 1h")
	}
	if cfg.Claim == "" {
		cfg.Claim = defaultClaim
	}
	cfg.Audiences = slices.Clone(cfg.Audiences) // the caller may reuse its slice

	v := &JWT{cfg: cfg, algs: algs, client: cfg.Client, now: cfg.Now, skew: skew, minRefresh: minRefresh, maxAge: maxAge}
	if v.client == nil {
		v.client = http.DefaultClient
	}
	if v.now == nil {
		v.now = time.Now
	}
	v.snap.Store(&snapshot{})

	if cfg.JWKSFile != "" && cfg.JWKSURL == "" {
		set, err := v.load(ctx)
		if err != nil {
			list = append(list, errs.Wrap(err, CodeConfig, part, fmt.Sprintf("JWKS file %q is not usable", clip(cfg.JWKSFile)), "point the JWKS file at a readable JSON Web Key Set (at most 1 MiB) holding the issuer's public signing keys"))
		} else {
			now := v.now()
			v.snap.Store(&snapshot{keys: set, loadedAt: now, triedAt: now, tried: true})
		}
	}

	if len(list) > 0 {
		return nil, list
	}
	return v, nil
}

// checkJWKSURL refuses URLs that would fetch keys over plain HTTP from the network:
// whoever controls that path would choose which tokens are valid.
func checkJWKSURL(raw string) *errs.Error {
	u, err := url.Parse(raw)
	if err != nil {
		return errs.New(CodeConfig, part, fmt.Sprintf("JWKS URL %q is not a URL", clip(raw)), "write the full URL, e.g. https://id.example.com/.well-known/jwks.json")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return errs.New(CodeConfig, part, fmt.Sprintf("JWKS URL %q has scheme %q; only https (or http to a loopback host) is fetched", clip(raw), clip(u.Scheme)), "use the https URL of the JWKS, or a JWKS file for keys on disk")
	}
	if u.Host == "" {
		return errs.New(CodeConfig, part, fmt.Sprintf("JWKS URL %q names no host", clip(raw)), "write the full URL, e.g. https://id.example.com/.well-known/jwks.json")
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		if ip := net.ParseIP(host); (ip == nil || !ip.IsLoopback()) && !strings.EqualFold(host, "localhost") {
			return errs.New(CodeConfig, part, fmt.Sprintf("JWKS URL %q uses plain http to a host that is not loopback; anyone on the path could swap the keys", clip(raw)), "use the https URL of the JWKS")
		}
	}
	return nil
}

// Fetches returns how many JWKS fetches or file reads were made, failed ones included.
func (v *JWT) Fetches() int { return int(v.fetches.Load()) }

// fail builds a Verify refusal.
func fail(code, msg, fix string) error { return errs.New(code, part, msg, fix) }

// Verify checks a raw compact JWS (no "Bearer " prefix) and returns whom it names.
// The checks run in an order that tells a forger nothing before the signature:
// shape, algorithm, key, signature, and only then the claims.
func (v *JWT) Verify(ctx context.Context, token string) (Identity, error) {
	if token == "" {
		return Identity{}, fail(CodeNoToken, "no bearer token was given", "send the token in an Authorization: Bearer header")
	}
	if len(token) > maxTokenBytes {
		return Identity{}, fail(CodeMalformed, fmt.Sprintf("the token is %d bytes, over the %d-byte limit", len(token), maxTokenBytes), "send a smaller token; ask the identity provider for fewer claims")
	}
	if !compactShape(token) {
		return Identity{}, fail(CodeMalformed, fmt.Sprintf("the token %q is not a compact JWS (three canonical base64url parts joined by dots)", clip(token)), "send the JWT exactly as the identity provider issued it")
	}
	sum := tokenSum(token)
	if snap := v.snap.Load(); snap.keys != nil && v.now().Sub(snap.loadedAt) < v.maxAge {
		if id, ok := v.seen.get(sum, snap.keys, v.now()); ok {
			return id, nil
		}
	}
	jws, err := jose.ParseSignedCompact(token, v.algs)
	if err != nil {
		var unexpected *jose.ErrUnexpectedSignatureAlgorithm
		if errors.As(err, &unexpected) {
			return Identity{}, algRefusal(string(unexpected.Got))
		}
		// go-jose's message may quote header values: clip it like any untrusted value.
		return Identity{}, errs.Wrap(errors.New(clip(err.Error())), CodeMalformed, part, "the token's header or parts cannot be decoded", "send the JWT exactly as the identity provider issued it")
	}
	sig := jws.Signatures[0]
	hdr := sig.Header
	alg := hdr.Algorithm
	if _, ok := hdr.ExtraHeaders["crit"]; ok {
		return Identity{}, fail(CodeMalformed, "the token's header has a crit parameter; no critical extension is supported", "issue plain JWTs without crit")
	}
	if b64, ok := hdr.ExtraHeaders["b64"]; ok && b64 != true {
		return Identity{}, fail(CodeMalformed, "the token's header sets b64; unencoded payloads are not JWTs", "issue plain JWTs without b64")
	}

	snap, err := v.current(ctx)
	if err != nil {
		return Identity{}, err
	}
	snapUsed := snap
	keys, kerr := pick(snap.keys, hdr.KeyID, alg)
	if kerr != nil && errs.Code(kerr) == CodeUnknownKey {
		// The issuer may have rotated: look again, at most once per MinRefresh.
		if next, rerr := v.refresh(ctx, snap); rerr == nil && next.keys != nil {
			keys, kerr = pick(next.keys, hdr.KeyID, alg)
			snapUsed = next
		}
	}
	if kerr != nil {
		return Identity{}, kerr
	}

	var payload []byte
	verified := false
	for _, k := range keys {
		if payload, err = jws.Verify(k.key); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Identity{}, fail(CodeSignature, fmt.Sprintf("the token's %s signature does not verify with key %q of the issuer", alg, clip(hdr.KeyID)), "send the token unmodified, as the issuer signed it; if the issuer changed keys under the same kid, wait for the JWKS refresh")
	}

	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil || claims == nil {
		return Identity{}, fail(CodeMalformed, "the token's claims are not a JSON object", "have the identity provider issue a JWT whose payload is a JSON object")
	}
	principal, err := v.checkClaims(claims)
	if err != nil {
		return Identity{}, err
	}
	id := Identity{Principal: principal, Scheme: "jwt", Claims: claims}
	if exp, ok := claims["exp"].(float64); ok {
		v.seen.put(sum, id, snapUsed.keys, v.now(), time.Unix(int64(exp), 0).Add(v.skew))
	}
	return id, nil
}

// algRefusal explains why alg is not accepted.
func algRefusal(alg string) error {
	why := "it is not in the accepted algorithms"
	up := strings.ToUpper(alg)
	switch {
	case up == "NONE" || alg == "":
		why = "unsigned tokens are never accepted"
	case strings.HasPrefix(up, "HS"):
		why = "symmetric (HMAC) tokens are never accepted: the issuer's public key would be enough to forge them"
	}
	return fail(CodeAlgorithm, fmt.Sprintf("the token's alg %q is refused: %s", clip(alg), why), "have the identity provider sign with one of the configured asymmetric algorithms (RS256, PS256, ES256, EdDSA, ...)")
}

// compactShape reports whether s is three canonical base64url parts joined by two
// dots, the first (the header) not empty. go-jose would also take the JSON
// serialization and strip whitespace, which a bearer token never needs; and Go's
// decoder ignores the unused low bits of a part's last character, so without the
// canonical check one signed token would have many spellings (a token-keyed deny
// list or replay cache could be dodged).
func compactShape(s string) bool {
	dots, partLen := 0, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' {
			if (dots == 0 && partLen == 0) || !canonicalEnd(s[:i], partLen) {
				return false
			}
			dots++
			partLen = 0
			continue
		}
		if b64val(c) < 0 {
			return false
		}
		partLen++
	}
	return dots == 2 && canonicalEnd(s, partLen)
}

// canonicalEnd checks the last part of prefix, n characters long: a length of 1
// mod 4 is never valid, and the bits the last character carries past the final
// byte must be zero.
func canonicalEnd(prefix string, n int) bool {
	switch n % 4 {
	case 0:
		return true
	case 1:
		return false
	case 2:
		return b64val(prefix[len(prefix)-1])&0x0f == 0
	default:
		return b64val(prefix[len(prefix)-1])&0x03 == 0
	}
}

// b64val is the value of a base64url character, or -1.
func b64val(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '-':
		return 62
	case c == '_':
		return 63
	}
	return -1
}

// current returns the keys to use, loading them when none are known yet or when
// they are older than MaxAge (then a failed load keeps the old keys).
func (v *JWT) current(ctx context.Context) (*snapshot, error) {
	snap := v.snap.Load()
	if snap.keys != nil && v.now().Sub(snap.loadedAt) < v.maxAge {
		return snap, nil
	}
	next, err := v.refresh(ctx, snap)
	if err != nil {
		if snap.keys != nil {
			return snap, nil // the caller gave up waiting; the old keys still serve
		}
		return nil, errs.Wrap(err, CodeJWKS, part, fmt.Sprintf("the issuer's JWKS %s was not loaded", v.source()), "retry")
	}
	if next.keys == nil {
		return nil, errs.Wrap(next.lastError, CodeJWKS, part, fmt.Sprintf("the issuer's JWKS %s could not be loaded and no keys are known", v.source()), "check that the JWKS is reachable from the gateway and serves a JSON Web Key Set; it is retried after the minimum refresh interval")
	}
	return next, nil
}

func (v *JWT) source() string {
	if v.cfg.JWKSFile != "" {
		return "file " + v.cfg.JWKSFile
	}
	return "at " + v.cfg.JWKSURL
}

// pick returns the keys that may have signed a token with this kid and alg. A kid
// must name a key; without one, exactly one key of the right type must exist, so
// an issuer with several keys cannot be guessed at.
func pick(set *keySet, kid, alg string) ([]*pubKey, error) {
	if kid == "" {
		var fit []*pubKey
		for _, k := range set.all {
			if k.fits(alg) {
				fit = append(fit, k)
			}
		}
		switch len(fit) {
		case 1:
			return fit, nil
		case 0:
			return nil, fail(CodeUnknownKey, fmt.Sprintf("the token has no kid and the issuer's JWKS has no key for %s", alg), "have the identity provider put kid in the token header, and check the JWKS URL or file")
		}
		return nil, fail(CodeUnknownKey, fmt.Sprintf("the token has no kid and the issuer's JWKS has %d keys for %s", len(fit), alg), "have the identity provider put kid in the token header")
	}
	named := set.byKid[kid]
	if len(named) == 0 {
		return nil, fail(CodeUnknownKey, fmt.Sprintf("no key with kid %q is in the issuer's JWKS", clip(kid)), "check that the token comes from the configured issuer; a newly rotated key is picked up at the next refresh")
	}
	var fit []*pubKey
	for _, k := range named {
		if k.fits(alg) {
			fit = append(fit, k)
		}
	}
	if len(fit) == 0 {
		k := named[0]
		what := k.describe()
		if k.alg != "" {
			what += " for " + k.alg
		}
		return nil, fail(CodeAlgorithm, fmt.Sprintf("the token's alg %s does not fit key %q, which is %s", alg, clip(kid), what), "have the identity provider sign with the algorithm its key is published for")
	}
	return fit, nil
}

// checkClaims checks iss, aud, exp, nbf, iat and the principal claim, in that order.
func (v *JWT) checkClaims(c map[string]any) (string, error) {
	iss, ok := c["iss"].(string)
	if !ok {
		return "", fail(CodeIssuer, fmt.Sprintf("the token has no string iss; want %q", v.cfg.Issuer), "use a token from the configured issuer")
	}
	if iss != v.cfg.Issuer {
		return "", fail(CodeIssuer, fmt.Sprintf("the token's iss %q is not the configured issuer %q", clip(iss), v.cfg.Issuer), "use a token from the configured issuer, or fix the configured issuer (compared exactly, trailing slash included)")
	}

	if err := v.checkAudience(c["aud"]); err != nil {
		return "", err
	}

	now := v.now()
	nowSec := float64(now.Unix()) + float64(now.Nanosecond())/1e9
	skew := v.skew.Seconds()
	exp, present, err := numericDate(c, "exp")
	if err != nil {
		return "", err
	}
	if !present {
		return "", fail(CodeExpired, "the token has no exp; tokens without an expiry are refused", "have the identity provider issue tokens with exp")
	}
	if nowSec >= exp+skew {
		return "", fail(CodeExpired, fmt.Sprintf("the token expired at %s (now %s, skew %s)", date(exp), now.UTC().Format(time.RFC3339), v.skew), "get a fresh token")
	}
	for _, name := range []string{"nbf", "iat"} {
		t, present, err := numericDate(c, name)
		if err != nil {
			return "", err
		}
		if present && t > nowSec+skew {
			return "", fail(CodeNotYetValid, fmt.Sprintf("the token's %s %s is in the future (now %s, skew %s)", name, date(t), now.UTC().Format(time.RFC3339), v.skew), "check the clocks of the gateway and the identity provider, or wait until the token is valid")
		}
	}

	p, ok := c[v.cfg.Claim]
	if !ok {
		return "", fail(CodePrincipalClaim, fmt.Sprintf("the token has no %q claim to name the caller", v.cfg.Claim), "have the identity provider include the claim, or configure another principal claim")
	}
	s, ok := p.(string)
	if !ok {
		return "", fail(CodePrincipalClaim, fmt.Sprintf("the token's %q claim is a %s, not a string", v.cfg.Claim, jsonType(p)), "configure a principal claim whose value is a string, such as sub or email")
	}
	if s == "" {
		return "", fail(CodePrincipalClaim, fmt.Sprintf("the token's %q claim is empty", v.cfg.Claim), "have the identity provider fill the claim, or configure another principal claim")
	}
	return s, nil
}

func (v *JWT) checkAudience(aud any) error {
	want := strings.Join(v.cfg.Audiences, ", ")
	var got []string
	switch a := aud.(type) {
	case nil:
		return fail(CodeAudience, fmt.Sprintf("the token has no aud; want one of %s", want), "request a token for this gateway's audience")
	case string:
		got = []string{a}
	case []any:
		for _, x := range a {
			s, ok := x.(string)
			if !ok {
				return fail(CodeAudience, fmt.Sprintf("the token's aud holds a %s, not only strings", jsonType(x)), "request a token whose aud is a string or an array of strings")
			}
			got = append(got, s)
		}
	default:
		return fail(CodeAudience, fmt.Sprintf("the token's aud is a %s, not a string or array", jsonType(aud)), "request a token whose aud is a string or an array of strings")
	}
	for _, g := range got {
		for _, w := range v.cfg.Audiences {
			if g == w {
				return nil
			}
		}
	}
	return fail(CodeAudience, fmt.Sprintf("the token's aud %q holds none of %s", clip(strings.Join(got, ",")), want), "request a token for this gateway's audience, or add the audience to the configuration")
}

// numericDate reads a NumericDate claim: absent is fine here, another type is not.
func numericDate(c map[string]any, name string) (float64, bool, error) {
	x, ok := c[name]
	if !ok {
		return 0, false, nil
	}
	f, ok := x.(float64)
	if !ok {
		return 0, true, fail(CodeMalformed, fmt.Sprintf("the token's %s is a %s, not a number of seconds", name, jsonType(x)), "have the identity provider write "+name+" as seconds since 1970 (a JSON number)")
	}
	return f, true, nil
}

// date formats a NumericDate, falling back to the number when no calendar date fits.
func date(sec float64) string {
	if math.Abs(sec) < 1e11 {
		return time.Unix(int64(sec), 0).UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%g", sec)
}

func jsonType(x any) string {
	switch x.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", x)
}
