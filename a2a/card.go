package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
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
	Streaming         bool            `json:"streaming"`
	PushNotifications bool            `json:"pushNotifications"`
	ExtendedAgentCard bool            `json:"extendedAgentCard,omitempty"` // 1.0
	Extensions        []cardExtension `json:"extensions,omitempty"`
}

// cardExtension is an AgentExtension: here, the statement of who may see a task.
type cardExtension struct {
	URI         string `json:"uri"`
	Description string `json:"description"`
	Required    bool   `json:"required"`
}

// principalsURI names the extension by which the card says how tasks are scoped
// (docs/reference/a2a.md "Principals").
const principalsURI = "https://github.com/capsulegate/capsulegate/blob/main/docs/reference/a2a.md#principals"

// peersURI names the extension by which the card says the capsule takes peer tasks
// (docs/reference/a2a.md "Peer tasks").
const peersURI = "https://github.com/capsulegate/capsulegate/blob/main/docs/reference/a2a.md#peer-tasks"

// principalsNote is what the card says about task visibility.
func principalsNote(cfg Config) cardExtension {
	d := "Tasks belong to the principal whose credentials created them; another principal's task answers task not found, and ListTasks lists the caller's own tasks."
	if !authConfigured(cfg) {
		d = "This agent authenticates no one by itself: unless a proxy in front of it names callers, every caller is one anonymous principal, and any caller can read, cancel, subscribe to and list every task."
	}
	return cardExtension{URI: principalsURI, Description: d}
}

// cardJSON is the agent card: the A2A 1.0 fields, plus the 0.3 fields (url,
// protocolVersion, preferredTransport, additionalInterfaces, security) so that a 0.3
// client reads the same document (docs/reference/a2a.md, "The agent card"). The strict
// 1.0 card leaves the 0.3 fields out.
type cardJSON struct {
	Name                string           `json:"name"`
	Description         string           `json:"description"`
	Version             string           `json:"version"`
	SupportedInterfaces []cardInterface  `json:"supportedInterfaces"`
	Capabilities        cardCapabilities `json:"capabilities"`
	DefaultInputModes   []string         `json:"defaultInputModes"`
	DefaultOutputModes  []string         `json:"defaultOutputModes"`
	Skills              []cardSkill      `json:"skills"`
	SecuritySchemes     map[string]any   `json:"securitySchemes,omitempty"`
	// SupportsExtended is 0.3's flag for the authenticated extended card.
	SupportsExtended     bool              `json:"supportsAuthenticatedExtendedCard,omitempty"`
	SecurityRequirements []any             `json:"securityRequirements,omitempty"`
	Security             []map[string]any  `json:"security,omitempty"`
	URL                  string            `json:"url,omitempty"`
	ProtocolVersion      string            `json:"protocolVersion,omitempty"`
	PreferredTransport   string            `json:"preferredTransport,omitempty"`
	AdditionalInterfaces []cardInterface03 `json:"additionalInterfaces,omitempty"`
}

// buildCard renders the card for a request whose JSON-RPC endpoint is url (HTTP+JSON is
// served beside it, under the same prefix); strict
// leaves out the 0.3 top-level fields.
func buildCard(cfg Config, url string, strict bool) []byte {
	c := cardJSON{
		Name: cfg.Card.Name, Description: cfg.Card.Description, Version: cfg.Card.Version,
		// HTTP+JSON clients append their routes to the url: 1.0's add "/message:send",
		// so theirs has no trailing slash (a doubled one would be cleaned, and redirected,
		// by many routers); 0.3's JS SDK strips the slash before adding "/v1/...", and the
		// 0.3 TCK resolves "v1/..." against the url, which needs it
		// (docs/reference/a2a.md "HTTP+JSON (REST)").
		SupportedInterfaces: []cardInterface{
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"},
			{URL: url, ProtocolBinding: "JSONRPC", ProtocolVersion: "0.3"},
			{URL: strings.TrimSuffix(url, "/"), ProtocolBinding: "HTTP+JSON", ProtocolVersion: "1.0"},
			{URL: url, ProtocolBinding: "HTTP+JSON", ProtocolVersion: "0.3"},
		},
		Capabilities: cardCapabilities{Streaming: true, PushNotifications: cfg.Push != nil, ExtendedAgentCard: authConfigured(cfg),
			Extensions: []cardExtension{principalsNote(cfg)}},
		DefaultInputModes:  cfg.Inputs.cardModes(),
		DefaultOutputModes: withTextPlain(cfg.Card.OutputModes),
		Skills:             []cardSkill{},
	}
	if !strict {
		c.SupportsExtended = authConfigured(cfg)
		c.URL, c.ProtocolVersion, c.PreferredTransport = url, "0.3.0", "JSONRPC"
		c.AdditionalInterfaces = []cardInterface03{{URL: url, Transport: "JSONRPC"}, {URL: url, Transport: "HTTP+JSON"}}
	}
	for _, s := range cfg.Card.Skills {
		tags := s.Tags
		if tags == nil {
			tags = []string{}
		}
		c.Skills = append(c.Skills, cardSkill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: tags})
	}
	if cfg.GRPC != "" {
		c.SupportedInterfaces = append(c.SupportedInterfaces, cardInterface{URL: cfg.GRPC, ProtocolBinding: "GRPC", ProtocolVersion: "1.0"})
	}
	if cfg.AcceptPeers {
		c.Capabilities.Extensions = append(c.Capabilities.Extensions, cardExtension{URI: peersURI,
			Description: "This capsule takes tasks from other capsules' runtimes; each such task is owned by a principal derived from the calling capsule and the principal it acts for."})
	}
	for _, x := range cfg.Card.Extensions {
		c.Capabilities.Extensions = append(c.Capabilities.Extensions, cardExtension{URI: x.URI, Description: x.Description})
	}
	if authConfigured(cfg) {
		c.SecuritySchemes = map[string]any{}
		// Each scheme is one alternative requirement: any one of them authenticates.
		add := func(name string, scheme map[string]any) {
			c.SecuritySchemes[name] = scheme
			c.SecurityRequirements = append(c.SecurityRequirements, map[string]any{"schemes": map[string]any{name: map[string]any{"list": []string{}}}})
			if !strict {
				c.Security = append(c.Security, map[string]any{name: []string{}})
			}
		}
		if cfg.Bearer != "" || len(cfg.Tokens) > 0 || cfg.JWT != nil {
			desc, format := "a bearer token in the Authorization header", ""
			if cfg.JWT != nil {
				desc, format = "a JWT issued by "+cfg.JWT.Issuer()+" in the Authorization header (RFC 6750)", "JWT"
				if cfg.Bearer != "" || len(cfg.Tokens) > 0 {
					desc = "a bearer token, or a JWT issued by " + cfg.JWT.Issuer() + ", in the Authorization header (RFC 6750)"
				}
			}
			http := map[string]any{"scheme": "Bearer", "description": desc}
			if format != "" {
				http["bearerFormat"] = format
			}
			scheme := map[string]any{"httpAuthSecurityScheme": http}
			if !strict {
				// One object in both shapes: 0.3 readers switch on "type", 1.0 (protobuf
				// JSON) readers on the oneof member; each ignores the other's fields.
				scheme["type"], scheme["scheme"], scheme["description"] = "http", "bearer", desc
				if format != "" {
					scheme["bearerFormat"] = format
				}
			}
			add("bearer", scheme)
		}
		if cfg.ClientCert != "" {
			const desc = "a client certificate the gateway's TLS verifies; its " + "name is the principal"
			scheme := map[string]any{"mtlsSecurityScheme": map[string]any{"description": desc}}
			if !strict {
				scheme["type"], scheme["description"] = "mutualTLS", desc
			}
			add("mtls", scheme)
		}
	}
	b, _ := json.Marshal(c) // plain structs of strings: cannot fail
	return b
}

// requestVersion is the A2A version a request asks for: the A2A-Version header, else
// the A2A-Version query parameter (A2A 1.0 allows either).
func requestVersion(r *http.Request) string {
	if v := r.Header.Get("A2A-Version"); v != "" {
		return v
	}
	return r.URL.Query().Get("A2A-Version")
}

// strictCard reports whether r gets the 1.0-only card rather than the mixed 0.3 + 1.0 one
// (docs/reference/a2a.md "The agent card"): under CardV10 always; by default unless the
// client asks for 0.3 (A2A-Version), since no mixed card validates against A2A 1.0's
// schema; under CardV03, for routes serving 0.3 clients that do not ask, only when the
// client asks for 1.0.
func strictCard(r *http.Request, cfg Config) bool {
	asked := requestVersion(r)
	d, ok := parseVersion(asked)
	switch cfg.CardVersion {
	case CardV10:
		return true
	case CardV03:
		return ok && d == v10
	}
	return !ok || asked == "" || d == v10
}

// serveCard answers GET and HEAD for the card, with an ETag and Last-Modified so clients
// can revalidate.
func (h *Handler) serveCard(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "the agent card is read with GET", http.StatusMethodNotAllowed)
		return
	}
	cfg, modified := h.configFor(r)
	body := buildCard(cfg, h.endpoint(r, cfg), strictCard(r, cfg))
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	hd := w.Header()
	hd.Set("ETag", etag)
	hd.Set("Last-Modified", modified.UTC().Format(http.TimeFormat))
	hd.Set("Cache-Control", "public, max-age=60")
	// The card names the URL the client used and speaks the version it asked for.
	hd.Set("Vary", "Host, X-Forwarded-Proto, X-Forwarded-Host, X-Forwarded-Prefix, A2A-Version")
	if notModified(r, etag, modified) {
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

// notModified applies If-None-Match, or, when the client sent none, If-Modified-Since
// (RFC 9110 §13.1.3).
func notModified(r *http.Request, etag string, modified time.Time) bool {
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		return etagMatches(inm, etag)
	}
	ims, err := http.ParseTime(r.Header.Get("If-Modified-Since"))
	return err == nil && !modified.Truncate(time.Second).After(ims)
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

// cardPrefix returns what precedes the card's well-known path in the escaped path p,
// and whether p names the card at all.
func cardPrefix(p string) (string, bool) {
	for _, suffix := range []string{cardPath, oldCardPath} {
		if strings.HasSuffix(p, suffix) {
			return strings.TrimSuffix(p, suffix), true
		}
	}
	return "", false
}
