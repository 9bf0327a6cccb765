package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Card paths, relative to the capsule's route prefix.
const (
	cardPath    = "/.well-known/agent-card.json"
	oldCardPath = "/.well-known/agent.json"
)

type cardInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

type cardInterface03 struct {
	URL       string `json:"url"`
	Transport string `json:"transport"`
}

type cardSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
}

type cardCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
}

// cardJSON is the agent card: the A2A 1.0 fields, plus the 0.3 fields (url,
// protocolVersion, preferredTransport, additionalInterfaces, security) so that a 0.3
// client reads the same document (SPEC §9).
type cardJSON struct {
	Name                 string            `json:"name"`
	Description          string            `json:"description"`
	Version              string            `json:"version"`
	SupportedInterfaces  []cardInterface   `json:"supportedInterfaces"`
	Capabilities         cardCapabilities  `json:"capabilities"`
	DefaultInputModes    []string          `json:"defaultInputModes"`
	DefaultOutputModes   []string          `json:"defaultOutputModes"`
	Skills               []cardSkill       `json:"skills"`
	SecuritySchemes      map[string]any    `json:"securitySchemes,omitempty"`
	SecurityRequirements []any             `json:"securityRequirements,omitempty"`
	Security             []map[string]any  `json:"security,omitempty"`
	URL                  string            `json:"url"`
	ProtocolVersion      string            `json:"protocolVersion"`
	PreferredTransport   string            `json:"preferredTransport"`
	AdditionalInterfaces []cardInterface03 `json:"additionalInterfaces"`
}

// buildCard renders the card for a request whose JSON-RPC endpoint is url.
func buildCard(cfg Config, url string) []byte {
	c := cardJSON{
		Name: cfg.Card.Name, Description: cfg.Card.Description, Version: cfg.Card.Version,
		SupportedInterfaces: []cardInterface{
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
		},
		Capabilities:         cardCapabilities{Streaming: true},
		DefaultInputModes:    []string{"text/plain"},
		DefaultOutputModes:   []string{"text/plain"},
		Skills:               []cardSkill{},
		URL:                  url,
		ProtocolVersion:      "0.3.0",
		PreferredTransport:   "JSONRPC",
		AdditionalInterfaces: []cardInterface03{{URL: url, Transport: "JSONRPC"}},
	}
	for _, s := range cfg.Card.Skills {
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		c.Skills = append(c.Skills, cardSkill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: tags})
	}
	if cfg.Bearer != "" {
		const desc = "a bearer token in the Authorization header"
		// One object in both shapes: 0.3 readers switch on "type", 1.0 (protobuf JSON)
		// readers on the oneof member; each ignores the other's fields.
		c.SecuritySchemes = map[string]any{"bearer": map[string]any{
			"type": "http", "scheme": "bearer", "description": desc,
			"httpAuthSecurityScheme": map[string]any{"scheme": "Bearer", "description": desc},
		}}
		c.Security = []map[string]any{{"bearer": []string{}}}
		c.SecurityRequirements = []any{map[string]any{"schemes": map[string]any{"bearer": map[string]any{"list": []string{}}}}}
	}
	b, _ := json.Marshal(c) // plain structs of strings: cannot fail
	return b
}

// endpointURL is the public URL of the capsule's JSON-RPC endpoint as this request
// reached it: scheme from TLS or X-Forwarded-Proto, the Host header, the route prefix.
func endpointURL(r *http.Request, escapedPrefix string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p != "" {
		p, _, _ = strings.Cut(p, ",")
		if p = strings.ToLower(strings.TrimSpace(p)); p == "http" || p == "https" {
			scheme = p
		}
	}
	return scheme + "://" + r.Host + escapedPrefix + "/"
}

// serveCard answers GET and HEAD for the card, with an ETag so clients can revalidate.
func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request, escapedPrefix string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the agent card is read with GET", http.StatusMethodNotAllowed)
		return
	}
	body := buildCard(h.config(), endpointURL(r, escapedPrefix))
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("Cache-Control", "public, max-age=60")
	hd.Set("Vary", "X-Forwarded-Proto")
	if etagMatches(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// etagMatches applies If-None-Match's weak comparison.
func etagMatches(header, etag string) bool {
	for _, c := range strings.Split(header, ",") {
		c = strings.TrimPrefix(strings.TrimSpace(c), "W/")
		if c == "*" || c == etag {
			return true
		}
	}
	return false
}

// cardPrefix returns the escaped route prefix when the request asks for the card.
func cardPrefix(r *http.Request) (string, bool) {
	p := r.URL.EscapedPath()
	for _, suffix := range []string{cardPath, oldCardPath} {
		if strings.HasSuffix(p, suffix) {
			return strings.TrimSuffix(p, suffix), true
		}
	}
	return "", false
}
