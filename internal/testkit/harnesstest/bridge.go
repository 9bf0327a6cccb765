package harnesstest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Bridge is a stand-in for the runtime's tool bridge: an MCP server over Streamable
// HTTP (JSON answers, no server-sent events) on 127.0.0.1 offering one tool, "echo",
// which answers "echo: <text>". Every request must carry Authorization: Bearer Token;
// one that does not is answered 401 and counted in Unauthorized.
type Bridge struct {
	URL, Token string

	mu           sync.Mutex
	calls        []json.RawMessage
	methods      []string
	unauthorized int
}

// EchoTool is the bridge's one tool.
const EchoTool = "echo"

// NewBridge starts a bridge requiring token, closed when t ends.
func NewBridge(t testing.TB, token string) *Bridge {
	t.Helper()
	b := &Bridge{Token: token}
	srv := httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(srv.Close)
	b.URL = srv.URL + "/mcp"
	return b
}

// Calls returns the arguments of every tools/call so far.
func (b *Bridge) Calls() []json.RawMessage {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]json.RawMessage(nil), b.calls...)
}

// Methods returns every JSON-RPC method received so far.
func (b *Bridge) Methods() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.methods...)
}

// Unauthorized counts the requests refused for a missing or wrong token.
func (b *Bridge) Unauthorized() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.unauthorized
}

func (b *Bridge) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+b.Token {
		b.mu.Lock()
		b.unauthorized++
		b.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		w.WriteHeader(http.StatusOK)
		return
	default: // no server-initiated stream
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.methods = append(b.methods, msg.Method)
	b.mu.Unlock()
	if msg.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(msg.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-06-18"
		}
		result = obj{"protocolVersion": p.ProtocolVersion, "capabilities": obj{"tools": obj{}},
			"serverInfo": obj{"name": "capsulegate-bridge-stand-in", "version": "0.0.0"}}
	case "ping":
		result = obj{}
	case "tools/list":
		result = obj{"tools": []any{obj{"name": EchoTool, "description": "Echoes its text back.",
			"inputSchema": obj{"type": "object", "properties": obj{"text": obj{"type": "string"}}, "required": []string{"text"}}}}}
	case "tools/call":
		var p struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		json.Unmarshal(msg.Params, &p)
		b.mu.Lock()
		b.calls = append(b.calls, p.Arguments)
		b.mu.Unlock()
		var in struct {
			Text string `json:"text"`
		}
		json.Unmarshal(p.Arguments, &in)
		result = obj{"content": []any{obj{"type": "text", "text": "echo: " + in.Text}}, "isError": false}
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(obj{"jsonrpc": "2.0", "id": msg.ID, "error": obj{"code": -32601, "message": "method not found: " + msg.Method}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(obj{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}
