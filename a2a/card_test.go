package a2a

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func getCard(t *testing.T, srv *httptest.Server, path string, headers map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var card map[string]any
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, &card); err != nil {
			t.Fatalf("card is not JSON: %v: %s", err, body)
		}
	}
	return resp, card
}

func TestCard(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, CardVersion: CardV03})
	for _, tc := range []struct {
		name, path string
		headers    map[string]string
		wantURL    string
	}{
		{"agent-card.json", prefix + "/.well-known/agent-card.json", nil, endpoint(srv)},
		{"agent.json", prefix + "/.well-known/agent.json", nil, endpoint(srv)},
		{"public host", prefix + "/.well-known/agent-card.json",
			map[string]string{"Host": "gw.example.com:8443"}, "http://gw.example.com:8443/agents/hello/"},
		{"forwarded headers of an untrusted client", prefix + "/.well-known/agent-card.json",
			map[string]string{"Host": "gw.example.com", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "evil.example", "X-Forwarded-Prefix": "/evil"},
			"http://gw.example.com/agents/hello/"},
		{"other prefix", "/x/y/.well-known/agent-card.json", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, card := getCard(t, srv, tc.path, tc.headers)
			if tc.wantURL == "" {
				if resp.StatusCode != http.StatusNotFound {
					t.Fatalf("a path outside the mount: HTTP %d", resp.StatusCode)
				}
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d", resp.StatusCode)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if resp.Header.Get("ETag") == "" || resp.Header.Get("Cache-Control") == "" {
				t.Errorf("no ETag or Cache-Control: %v", resp.Header)
			}
			want := map[string]any{
				"name": "hello", "description": "greets people", "version": "1.2.3",
				"url": tc.wantURL, "protocolVersion": "0.3.0", "preferredTransport": "JSONRPC",
			}
			for k, v := range want {
				if card[k] != v {
					t.Errorf("%s = %v, want %v", k, card[k], v)
				}
			}
			ifaces := card["supportedInterfaces"].([]any)
			var got []string
			for _, i := range ifaces {
				m := i.(map[string]any)
				got = append(got, fmt.Sprint(m["protocolBinding"], " ", m["protocolVersion"], " ", m["url"]))
			}
			// HTTP+JSON 1.0 clients append "/message:send" to the url: no trailing slash.
			wantIfaces := []string{"JSONRPC 1.0 " + tc.wantURL, "JSONRPC 0.3 " + tc.wantURL,
				"HTTP+JSON 1.0 " + strings.TrimSuffix(tc.wantURL, "/"), "HTTP+JSON 0.3 " + tc.wantURL}
			if !slices.Equal(got, wantIfaces) {
				t.Errorf("supportedInterfaces %q, want %q", got, wantIfaces)
			}
			if got, want := mustJSON(card["additionalInterfaces"]), mustJSON([]map[string]string{{"url": tc.wantURL, "transport": "JSONRPC"}, {"url": tc.wantURL, "transport": "HTTP+JSON"}}); got != want {
				t.Errorf("additionalInterfaces %s, want %s", got, want)
			}
			caps := card["capabilities"].(map[string]any)
			if caps["streaming"] != true || caps["pushNotifications"] != false {
				t.Errorf("capabilities %v", caps)
			}
			if mustJSON(card["defaultInputModes"]) != `["text/plain"]` || mustJSON(card["defaultOutputModes"]) != `["text/plain"]` {
				t.Errorf("modes %v %v", card["defaultInputModes"], card["defaultOutputModes"])
			}
			if got := mustJSON(card["skills"]); got != `[{"description":"says hello","id":"greet","name":"Greet","tags":["demo"]}]` {
				t.Errorf("skills %s", got)
			}
			if card["securitySchemes"] != nil {
				t.Errorf("securitySchemes without auth: %v", card["securitySchemes"])
			}
		})
	}
}

func TestCardETag(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}})
	path := prefix + "/.well-known/agent-card.json"
	resp, _ := getCard(t, srv, path, nil)
	etag := resp.Header.Get("ETag")
	for _, tc := range []struct {
		name, inm string
		want      int
	}{
		{"same", etag, http.StatusNotModified},
		{"weak", "W/" + etag, http.StatusNotModified},
		{"in a list", `"x", ` + etag, http.StatusNotModified},
		{"other", `"x"`, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, _ := getCard(t, srv, path, map[string]string{"If-None-Match": tc.inm})
			if resp.StatusCode != tc.want {
				t.Fatalf("HTTP %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	// The card names the URL the client used, so another host gets another ETag.
	other, _ := getCard(t, srv, path, map[string]string{"Host": "other.example"})
	if other.Header.Get("ETag") == etag {
		t.Error("cards for two hosts share an ETag")
	}
}

func TestCardDeclaresBearer(t *testing.T) {
	_, srv := newServer(t, Config{Executor: &echoExec{}, Bearer: "s3cret", CardVersion: CardV03})
	resp, card := getCard(t, srv, prefix+"/.well-known/agent-card.json", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the card must stay public: HTTP %d", resp.StatusCode)
	}
	scheme := card["securitySchemes"].(map[string]any)["bearer"].(map[string]any)
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" {
		t.Errorf("0.3 scheme %v", scheme)
	}
	if v1 := scheme["httpAuthSecurityScheme"].(map[string]any); v1["scheme"] != "Bearer" {
		t.Errorf("1.0 scheme %v", v1)
	}
	if mustJSON(card["security"]) != `[{"bearer":[]}]` {
		t.Errorf("security %v", card["security"])
	}
	if mustJSON(card["securityRequirements"]) != `[{"schemes":{"bearer":{"list":[]}}}]` {
		t.Errorf("securityRequirements %v", card["securityRequirements"])
	}
}

// a2a10Card is A2A 1.0's AgentCard as its JSON carries it (the specification's
// a2a.proto, camelCase): the members each object may hold, nested shapes by path ("[]"
// for a list's items, "*" for a map's values). The 1.0 JSON schema refuses any other
// member (additionalProperties: false), which is why the default card holds no 0.3 field.
var a2a10Card = map[string][]string{
	"":                          {"name", "description", "supportedInterfaces", "provider", "version", "documentationUrl", "capabilities", "securitySchemes", "securityRequirements", "defaultInputModes", "defaultOutputModes", "skills", "signatures", "iconUrl"},
	"supportedInterfaces[]":     {"url", "protocolBinding", "tenant", "protocolVersion"},
	"capabilities":              {"streaming", "pushNotifications", "extensions", "extendedAgentCard"},
	"capabilities.extensions[]": {"uri", "description", "required", "params"},
	"skills[]":                  {"id", "name", "description", "tags", "examples", "inputModes", "outputModes", "securityRequirements"},
	"securitySchemes.*":         {"apiKeySecurityScheme", "httpAuthSecurityScheme", "oauth2SecurityScheme", "openIdConnectSecurityScheme", "mtlsSecurityScheme"},
	"securitySchemes.*.httpAuthSecurityScheme": {"description", "scheme", "bearerFormat"},
	"securityRequirements[]":                   {"schemes"},
	"securityRequirements[].schemes.*":         {"list"},
}

// a2a10Required are the AgentCard members A2A 1.0 marks REQUIRED.
var a2a10Required = []string{"name", "description", "version", "supportedInterfaces", "capabilities", "defaultInputModes", "defaultOutputModes", "skills"}

// TestDefaultCardIsA2A10: the card a client gets without asking for a version holds only
// A2A 1.0 AgentCard members, at every depth, and every member 1.0 requires — with and
// without auth, push, skills and input modes; the mixed card a 0.3 client asks for does
// not, which is why it is not the default.
func TestDefaultCardIsA2A10(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		headers map[string]string
		invalid string // a problem the card must have; "" for none
	}{
		{"plain", Config{}, nil, ""},
		{"bearer, push, inputs", Config{Bearer: "tok", Push: &PushPolicy{}, Inputs: Inputs{Modes: []string{"application/pdf"}}}, nil, ""},
		{"tokens", Config{Tokens: []Token{{Name: "a", Secret: "tok-a"}}}, nil, ""},
		{"the mixed card, asked for", Config{Bearer: "tok"}, map[string]string{"A2A-Version": "0.3"}, `the card holds "url"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Executor = &echoExec{}
			_, srv := newServer(t, tc.cfg)
			resp, card := getCard(t, srv, prefix+"/.well-known/agent-card.json", tc.headers)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("HTTP %d", resp.StatusCode)
			}
			problems := a2a10Problems(card)
			switch {
			case tc.invalid == "" && len(problems) > 0:
				t.Errorf("not an A2A 1.0 card: %q", problems)
			case tc.invalid != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.invalid) }):
				t.Errorf("problems %q lack %q", problems, tc.invalid)
			}
		})
	}
}

// a2a10Problems lists what keeps card from being an A2A 1.0 AgentCard: a required member
// missing, a member 1.0 does not have where it stands.
func a2a10Problems(card map[string]any) []string {
	var out []string
	for _, k := range a2a10Required {
		if _, ok := card[k]; !ok {
			out = append(out, "the card lacks "+k)
		}
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			allowed, shaped := a2a10Card[path]
			for k, sub := range v {
				if shaped && !slices.Contains(allowed, k) {
					out = append(out, fmt.Sprintf("%s holds %q", firstNonEmpty(path, "the card"), k))
				}
				next := k
				if path != "" {
					next = path + "." + k
				}
				if !shaped {
					next = path + ".*" // a map: its values share one shape
				}
				walk(next, sub)
			}
		case []any:
			for _, sub := range v {
				walk(path+"[]", sub)
			}
		}
	}
	walk("", card)
	return out
}
