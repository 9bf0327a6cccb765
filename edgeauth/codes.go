package edgeauth

import (
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/errs"
)

// part is the errs.Error part every refusal of this package carries.
const part = "auth"

// Stable codes of this package's refusals; docs/errors.md lists them.
const (
	// CodeConfig marks a JWTConfig that cannot work, or a certificate field name CheckCertField refuses.
	CodeConfig = "E-AUTH-001"
	// CodeMalformed marks a token that is not a compact JWS, has an undecodable header or claims, or is over 16 KiB.
	CodeMalformed = "E-AUTH-002"
	// CodeAlgorithm marks a token whose alg is not accepted, or does not fit the key its kid names.
	CodeAlgorithm = "E-AUTH-003"
	// CodeUnknownKey marks a token whose key is not in the issuer's JWKS, even after a bounded refresh.
	CodeUnknownKey = "E-AUTH-004"
	// CodeSignature marks a token whose signature does not verify under the issuer's key.
	CodeSignature = "E-AUTH-005"
	// CodeExpired marks a token without exp, or whose exp is past beyond the allowed clock skew.
	CodeExpired = "E-AUTH-006"
	// CodeNotYetValid marks a token whose nbf or iat is in the future beyond the allowed clock skew.
	CodeNotYetValid = "E-AUTH-007"
	// CodeIssuer marks a token whose iss is not the configured issuer.
	CodeIssuer = "E-AUTH-008"
	// CodeAudience marks a token whose aud holds none of the configured audiences.
	CodeAudience = "E-AUTH-009"
	// CodePrincipalClaim marks a token whose principal claim is missing, not a string, or empty.
	CodePrincipalClaim = "E-AUTH-010"
	// CodeJWKS marks a JWKS that could not be fetched or parsed while no keys are known.
	CodeJWKS = "E-AUTH-011"
	// CodeNoClientCert marks an mTLS connection without a verified client certificate, or whose chosen name is empty.
	CodeNoClientCert = "E-AUTH-012"
	// CodeNoToken marks a request without a bearer token.
	CodeNoToken = "E-AUTH-013"
)

// maxDescription bounds Description so a header stays short.
const maxDescription = 200

// Description returns "<code>: <message>" cleaned for RFC 6750's error_description:
// printable ASCII without quotes or backslashes, at most 200 bytes, so a caller can
// put it in WWW-Authenticate as is. It returns "" for a nil error.
func Description(err error) string {
	if err == nil {
		return ""
	}
	var s string
	var e *errs.Error
	if errors.As(err, &e) {
		s = e.Code + ": " + e.Msg
	} else {
		// An error from elsewhere may carry internal detail; say nothing specific.
		s = "authentication failed"
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteByte('\'')
		case r == '\\':
			b.WriteByte('/')
		case r >= 0x20 && r <= 0x7e:
			b.WriteRune(r)
		default:
			b.WriteByte('?')
		}
		if b.Len() >= maxDescription {
			break
		}
	}
	out := b.String()
	if len(out) > maxDescription {
		out = out[:maxDescription]
	}
	return strings.TrimRight(out, " ")
}

// maxShown bounds how much of an untrusted value a message repeats.
const maxShown = 100

// clip cuts an untrusted value to about 100 bytes, on a rune boundary, so a
// message never echoes a whole token or an attacker's megabyte.
func clip(s string) string {
	if len(s) <= maxShown {
		return s
	}
	n := maxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
