package edgeauth

import "strings"

// BearerToken returns the token of an Authorization header "Bearer <token>" (the
// scheme in any case, spaces around trimmed), or false when the header is empty,
// names another scheme, or carries no token.
func BearerToken(authorizationHeader string) (string, bool) {
	h := strings.Trim(authorizationHeader, " \t")
	i := strings.IndexAny(h, " \t")
	if i < 0 || !strings.EqualFold(h[:i], "bearer") {
		return "", false
	}
	t := strings.Trim(h[i:], " \t")
	if t == "" {
		return "", false
	}
	return t, true
}
