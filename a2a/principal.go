package a2a

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/errs"
)

// Token is one named bearer token: a request carrying Secret acts as principal Name
// (docs/reference/a2a.md "Principals").
type Token struct {
	Name, Secret string
}

// maxPrincipalLen bounds a principal's name, which is kept with every task it creates.
const maxPrincipalLen = 256

// caller is who sent a request: the principal its tasks belong to ("" is the anonymous
// principal, and the one of the shared Config.Bearer token), and whether anything
// authenticated it.
type caller struct {
	principal     string
	authenticated bool
	// scheme is how: "bearer", "jwt", "mtls", "front" (an authentication in front of
	// the handler) or "" (anonymous); claims are the JWT's claims or the client
	// certificate's names, for the policy.
	scheme string
	claims map[string]any
	// peer is where the request's task comes from when another capsule's runtime sent
	// it; principal is then the one peerPrincipal derives.
	peer *PeerOrigin
}

// authConfigured reports whether the handler itself authenticates requests.
func authConfigured(cfg Config) bool {
	return cfg.Bearer != "" || len(cfg.Tokens) > 0 || cfg.JWT != nil || cfg.ClientCert != ""
}

// identify establishes a request's caller: by a verified client certificate or its
// bearer token (one of the handler's tokens, else a JWT) when the handler authenticates
// (a refusal when none of them names it), else by the principal an authentication in
// front of the handler set (Config.Principal), else anonymous.
func identify(r *http.Request, cfg Config) (caller, *authRefusal) {
	if !authConfigured(cfg) {
		if cfg.Principal != nil {
			if p := cfg.Principal(r); p != "" {
				return caller{principal: principalName(p), authenticated: true, scheme: "front"}, nil
			}
		}
		return caller{}, nil
	}
	got, hasToken := edgeauth.BearerToken(r.Header.Get("Authorization"))
	if hasToken && (cfg.Bearer != "" || len(cfg.Tokens) > 0) {
		if c, ok := matchToken(got, cfg); ok {
			return c, nil
		}
	}
	if c, f, handled := identifyEdge(r, cfg, got, hasToken); handled {
		return c, f
	}
	if !hasToken {
		return caller{}, &authRefusal{code: edgeauth.CodeNoToken, missing: true}
	}
	return caller{}, &authRefusal{desc: "the bearer token is none of this route's tokens"}
}

// matchToken finds the handler's token got is, if any.
func matchToken(got string, cfg Config) (caller, bool) {
	// Every token is compared, in constant time, on hashes (which hide the tokens'
	// lengths), so that timing tells neither which token nearly matched nor how many
	// there are before the match.
	sum := sha256.Sum256([]byte(got))
	match := -1
	try := func(i int, secret string) {
		want := sha256.Sum256([]byte(secret))
		if subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			match = i
		}
	}
	if cfg.Bearer != "" {
		try(len(cfg.Tokens), cfg.Bearer)
	}
	for i, t := range cfg.Tokens {
		try(i, t.Secret)
	}
	switch {
	case match < 0:
		return caller{}, false
	case match == len(cfg.Tokens):
		return caller{authenticated: true, scheme: "bearer"}, true
	}
	return caller{principal: cfg.Tokens[match].Name, authenticated: true, scheme: "bearer"}, true
}

// principalName is how a principal named by an authentication in front is kept: as it
// is, unless it is too long or holds control characters to be kept and logged with
// every task (an identity provider's subject can be anything); then as a digest of it,
// the same for every request of that principal.
func principalName(p string) string {
	if len(p) <= maxPrincipalLen && validID(p) {
		return p
	}
	sum := sha256.Sum256([]byte(p))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// checkTokens validates the named tokens: names and secrets present, visible, unique.
func checkTokens(cfg Config) errs.List {
	var list errs.List
	bad := func(msg, fix string) { list = append(list, errs.New(CodeBearerToken, "a2a", msg, fix)) }
	names, secrets := map[string]bool{}, map[string]bool{cfg.Bearer: cfg.Bearer != ""}
	for i, t := range cfg.Tokens {
		switch {
		case t.Name == "" || len(t.Name) > maxPrincipalLen || !validID(t.Name):
			bad(fmt.Sprintf("token %d: principal name %q is empty, over %d bytes or holds control characters", i, t.Name, maxPrincipalLen),
				"name each token after the client it is for, such as team-a")
		case names[t.Name]:
			bad(fmt.Sprintf("token %d: principal name %q is used twice", i, t.Name), "give every token its own name")
		}
		names[t.Name] = true
		switch {
		case t.Secret == "":
			bad(fmt.Sprintf("token %q is empty", t.Name), "set the token's secret")
		case strings.ContainsFunc(t.Secret, func(r rune) bool { return r <= ' ' || r == 0x7f }):
			bad(fmt.Sprintf("token %q holds whitespace or control characters", t.Name), "use a token of visible characters only")
		case secrets[t.Secret]:
			bad(fmt.Sprintf("token %q has the same secret as another token", t.Name), "give every principal its own secret, or one shared token for all")
		}
		secrets[t.Secret] = true
	}
	return list
}

// contextKey is the key a context's state (its line of tasks, waiting task, threaded
// turns) is kept under: a context belongs to its principal, so two principals that
// happen to use the same context id never share one. The anonymous principal's key is
// the id itself (what stores written before principals hold); a named principal's is a
// control character, which client ids cannot hold, and a digest of principal and id,
// which keeps it as short as any id however long both are (the task store bounds keys).
func contextKey(principal, contextID string) string {
	if principal == "" {
		return contextID
	}
	sum := sha256.Sum256([]byte(principal + "\x00" + contextID))
	return "\x1e" + base64.RawURLEncoding.EncodeToString(sum[:18])
}
