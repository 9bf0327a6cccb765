package mcpbridge

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// guard is the HTTP front of the bridge: it refuses what must never reach the MCP layer.
type guard struct {
	b    *Bridge
	next http.Handler
}

func (g *guard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Host and Origin first: a page in a browser that rebound a name to this address
	// learns nothing more than a refusal.
	if !g.b.hosts[strings.ToLower(r.Host)] {
		http.Error(w, "forbidden: unexpected Host", http.StatusForbidden)
		return
	}
	for _, origin := range r.Header.Values("Origin") {
		if !g.originAllowed(origin) {
			http.Error(w, "forbidden: unexpected Origin", http.StatusForbidden)
			return
		}
	}
	if !g.authorized(r.Header.Values("Authorization")) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpbridge"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	g.next.ServeHTTP(w, r)
}

// originAllowed reports whether an Origin header names the bridge itself over http.
func (g *guard) originAllowed(origin string) bool {
	host, ok := strings.CutPrefix(strings.ToLower(origin), "http://")
	return ok && g.b.hosts[host]
}

// authorized reports whether the request carries exactly one Authorization header with
// the bridge's bearer token, compared in constant time.
func (g *guard) authorized(values []string) bool {
	if len(values) != 1 {
		return false
	}
	scheme, cred, ok := strings.Cut(values[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), []byte(g.b.token)) == 1
}
