// Package edgeauth tells the gateway who a caller is: it verifies JWT/OIDC bearer
// tokens against an issuer's JWKS (fetched lazily, cached, refreshed within fixed
// bounds) and reads mTLS client certificates that the TLS layer already verified,
// returning an Identity (principal and claims) or an *errs.Error with a stable
// E-AUTH code. The accepted signature algorithms are a fixed list of asymmetric
// ones (RSA PKCS#1 v1.5 and PSS, ECDSA, Ed25519) that a configuration may only
// narrow, because letting the token pick its own algorithm is how "alg: none"
// and HMAC-with-the-public-key forgeries get through: the key decides the
// algorithm family here, never the token.
package edgeauth
