package harnesstest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Provider is a stand-in model provider on 127.0.0.1 serving the two streamed APIs the
// harnesses speak: POST /v1/messages (Anthropic Messages, stream: true) and POST
// /v1/responses (OpenAI Responses, stream: true), as its Script says. Any other path is
// answered 404 and recorded.
type Provider struct {
	URL    string
	script Script

	mu        sync.Mutex
	requests  []Request
	requested chan struct{} // closed at the first model request
	once      sync.Once
}

// Requested is closed when the first model request arrives.
func (p *Provider) Requested() <-chan struct{} { return p.requested }

// Script is how a Provider answers. Each request is answered with Answer as one text
// message, unless Tool is set, the request offers a tool whose name ends with Tool and
// the conversation holds no tool result yet: then with one call of that tool with
// ToolInput. Status, when set, answers every model request with that HTTP status and an
// error body in the API's shape carrying ErrorMessage (401: a bad key, 429: out of quota).
type Script struct {
	Answer          string
	Tool, ToolInput string
	Status          int
	ErrorMessage    string
	// Thinking, when set, is streamed before each text answer as the model's thinking
	// (a thinking block; a reasoning item with a summary).
	Thinking string
	// Stall, when set, starts each answer's stream and then writes nothing more until
	// the client goes away: a turn in progress, for interrupting.
	Stall bool
}

// Request is one request the provider received.
type Request struct {
	Method, Path, Auth string
	Body               []byte
}

// Stand-in usage figures, so tests can tell each member apart in the harness's output.
const (
	InputTokens         = 11
	OutputTokens        = 7
	CacheReadTokens     = 5
	CacheCreationTokens = 3
	ReasoningTokens     = 2
)

// NewProvider starts a provider answering as s says, closed when t ends.
func NewProvider(t testing.TB, s Script) *Provider {
	t.Helper()
	p := &Provider{script: s, requested: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Requests returns what the provider received so far.
func (p *Provider) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	auth := r.Header.Get("x-api-key")
	if auth == "" {
		auth = r.Header.Get("Authorization")
	}
	p.mu.Lock()
	p.requests = append(p.requests, Request{Method: r.Method, Path: r.URL.Path, Auth: auth, Body: body})
	p.mu.Unlock()
	api := r.Method == http.MethodPost && (r.URL.Path == "/v1/messages" || r.URL.Path == "/v1/responses")
	if api {
		p.once.Do(func() { close(p.requested) })
	}
	switch {
	case api && p.script.Status != 0:
		p.fail(w, r.URL.Path)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/messages":
		p.messages(r.Context(), w, body)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/responses":
		p.responses(r.Context(), w, body)
	default:
		http.NotFound(w, r)
	}
}

// toolName returns the offered tool name ending with p.script.Tool, or "".
func (p *Provider) toolName(tools []json.RawMessage) string {
	if p.script.Tool == "" {
		return ""
	}
	for _, raw := range tools {
		var names []string
		collectNames(raw, &names)
		for _, n := range names {
			if n == p.script.Tool || strings.HasSuffix(n, "__"+p.script.Tool) || strings.HasSuffix(n, "."+p.script.Tool) {
				return n
			}
		}
	}
	return ""
}

// responsesTool finds the offered tool named p.script.Tool, or ending with "__"+p.script.Tool, among
// the Responses API's tools: a function, or a function inside a namespace (how Codex
// offers an MCP server's tools), whose name it returns too.
func (p *Provider) responsesTool(tools []json.RawMessage) (name, namespace string) {
	if p.script.Tool == "" {
		return "", ""
	}
	type fn struct {
		Type, Name string
		Tools      []fn
	}
	for _, raw := range tools {
		var t fn
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		switch {
		case t.Type == "namespace":
			for _, in := range t.Tools {
				if in.Name == p.script.Tool {
					return in.Name, t.Name
				}
			}
		case t.Name == p.script.Tool || strings.HasSuffix(t.Name, "__"+p.script.Tool):
			return t.Name, ""
		}
	}
	return "", ""
}

// collectNames gathers every "name" string in a JSON value (tools may nest).
func collectNames(raw json.RawMessage, out *[]string) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for k, v := range obj {
			var s string
			if k == "name" && json.Unmarshal(v, &s) == nil {
				*out = append(*out, s)
				continue
			}
			collectNames(v, out)
		}
		return
	}
	var arr []json.RawMessage
	if json.Unmarshal(raw, &arr) == nil {
		for _, v := range arr {
			collectNames(v, out)
		}
	}
}

type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return sse{w, f}
}

func (s sse) event(name string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if s.f != nil {
		s.f.Flush()
	}
}

type obj = map[string]any

func (p *Provider) messages(ctx context.Context, w http.ResponseWriter, body []byte) {
	var req struct {
		Model    string            `json:"model"`
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tool := ""
	if !strings.Contains(string(body), `"tool_result"`) {
		tool = p.toolName(req.Tools)
	}
	s := newSSE(w)
	s.event("message_start", obj{"type": "message_start", "message": obj{
		"id": "msg_stand_in", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": obj{"input_tokens": InputTokens, "output_tokens": 1, "cache_read_input_tokens": CacheReadTokens, "cache_creation_input_tokens": CacheCreationTokens},
	}})
	if p.script.Stall {
		<-ctx.Done()
		return
	}
	stop, index := "end_turn", 0
	if tool != "" {
		stop = "tool_use"
		s.event("content_block_start", obj{"type": "content_block_start", "index": 0,
			"content_block": obj{"type": "tool_use", "id": "toolu_stand_in", "name": tool, "input": obj{}}})
		s.event("content_block_delta", obj{"type": "content_block_delta", "index": 0,
			"delta": obj{"type": "input_json_delta", "partial_json": p.script.ToolInput}})
	} else {
		if p.script.Thinking != "" {
			s.event("content_block_start", obj{"type": "content_block_start", "index": 0, "content_block": obj{"type": "thinking", "thinking": ""}})
			for _, part := range halves(p.script.Thinking) {
				s.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "thinking_delta", "thinking": part}})
			}
			s.event("content_block_delta", obj{"type": "content_block_delta", "index": 0, "delta": obj{"type": "signature_delta", "signature": "c3RhbmQtaW4="}})
			s.event("content_block_stop", obj{"type": "content_block_stop", "index": 0})
			index = 1
		}
		s.event("content_block_start", obj{"type": "content_block_start", "index": index, "content_block": obj{"type": "text", "text": ""}})
		for _, part := range halves(p.script.Answer) {
			s.event("content_block_delta", obj{"type": "content_block_delta", "index": index, "delta": obj{"type": "text_delta", "text": part}})
		}
	}
	s.event("content_block_stop", obj{"type": "content_block_stop", "index": index})
	s.event("message_delta", obj{"type": "message_delta", "delta": obj{"stop_reason": stop, "stop_sequence": nil},
		"usage": obj{"output_tokens": OutputTokens}})
	s.event("message_stop", obj{"type": "message_stop"})
}

// halves splits s in two, so a streamed answer arrives as more than one delta.
func halves(s string) []string {
	if len(s) < 2 {
		return []string{s}
	}
	i := len(s) / 2
	for i < len(s) && (s[i]&0xC0) == 0x80 {
		i++
	}
	return []string{s[:i], s[i:]}
}

func (p *Provider) responses(ctx context.Context, w http.ResponseWriter, body []byte) {
	var req struct {
		Model string            `json:"model"`
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tool, namespace := "", ""
	if !strings.Contains(string(body), `"function_call_output"`) {
		tool, namespace = p.responsesTool(req.Tools)
	}
	resp := obj{"id": "resp_stand_in", "object": "response", "created_at": 1700000000, "status": "in_progress", "model": req.Model, "output": []any{}}
	s := newSSE(w)
	s.event("response.created", obj{"type": "response.created", "response": resp})
	s.event("response.in_progress", obj{"type": "response.in_progress", "response": resp})
	if p.script.Stall {
		<-ctx.Done()
		return
	}
	var item obj
	var output []any
	at := 0 // the output index of the answer
	if tool != "" {
		item = obj{"type": "function_call", "id": "fc_stand_in", "call_id": "call_stand_in", "name": tool, "arguments": p.script.ToolInput, "status": "completed"}
		added := obj{"type": "function_call", "id": "fc_stand_in", "call_id": "call_stand_in", "name": tool, "arguments": "", "status": "in_progress"}
		if namespace != "" {
			item["namespace"], added["namespace"] = namespace, namespace
		}
		s.event("response.output_item.added", obj{"type": "response.output_item.added", "output_index": 0, "item": added})
		s.event("response.function_call_arguments.delta", obj{"type": "response.function_call_arguments.delta", "item_id": "fc_stand_in", "output_index": 0, "delta": p.script.ToolInput})
		s.event("response.function_call_arguments.done", obj{"type": "response.function_call_arguments.done", "item_id": "fc_stand_in", "output_index": 0, "arguments": p.script.ToolInput})
	} else {
		if p.script.Thinking != "" {
			summary := obj{"type": "summary_text", "text": p.script.Thinking}
			s.event("response.output_item.added", obj{"type": "response.output_item.added", "output_index": 0,
				"item": obj{"type": "reasoning", "id": "rs_stand_in", "summary": []any{}}})
			s.event("response.reasoning_summary_part.added", obj{"type": "response.reasoning_summary_part.added", "item_id": "rs_stand_in", "output_index": 0, "summary_index": 0,
				"part": obj{"type": "summary_text", "text": ""}})
			for _, d := range halves(p.script.Thinking) {
				s.event("response.reasoning_summary_text.delta", obj{"type": "response.reasoning_summary_text.delta", "item_id": "rs_stand_in", "output_index": 0, "summary_index": 0, "delta": d})
			}
			s.event("response.reasoning_summary_text.done", obj{"type": "response.reasoning_summary_text.done", "item_id": "rs_stand_in", "output_index": 0, "summary_index": 0, "text": p.script.Thinking})
			s.event("response.reasoning_summary_part.done", obj{"type": "response.reasoning_summary_part.done", "item_id": "rs_stand_in", "output_index": 0, "summary_index": 0, "part": summary})
			reasoning := obj{"type": "reasoning", "id": "rs_stand_in", "summary": []any{summary}}
			s.event("response.output_item.done", obj{"type": "response.output_item.done", "output_index": 0, "item": reasoning})
			output = append(output, reasoning)
			at = 1
		}
		part := obj{"type": "output_text", "text": p.script.Answer, "annotations": []any{}}
		item = obj{"type": "message", "id": "msg_stand_in", "status": "completed", "role": "assistant", "content": []any{part}}
		s.event("response.output_item.added", obj{"type": "response.output_item.added", "output_index": at,
			"item": obj{"type": "message", "id": "msg_stand_in", "status": "in_progress", "role": "assistant", "content": []any{}}})
		s.event("response.content_part.added", obj{"type": "response.content_part.added", "item_id": "msg_stand_in", "output_index": at, "content_index": 0,
			"part": obj{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, d := range halves(p.script.Answer) {
			s.event("response.output_text.delta", obj{"type": "response.output_text.delta", "item_id": "msg_stand_in", "output_index": at, "content_index": 0, "delta": d})
		}
		s.event("response.output_text.done", obj{"type": "response.output_text.done", "item_id": "msg_stand_in", "output_index": at, "content_index": 0, "text": p.script.Answer})
		s.event("response.content_part.done", obj{"type": "response.content_part.done", "item_id": "msg_stand_in", "output_index": at, "content_index": 0, "part": part})
	}
	s.event("response.output_item.done", obj{"type": "response.output_item.done", "output_index": at, "item": item})
	done := obj{"id": "resp_stand_in", "object": "response", "created_at": 1700000000, "status": "completed", "model": req.Model, "output": append(output, item),
		"usage": obj{"input_tokens": InputTokens + CacheReadTokens, "input_tokens_details": obj{"cached_tokens": CacheReadTokens},
			"output_tokens": OutputTokens, "output_tokens_details": obj{"reasoning_tokens": ReasoningTokens}, "total_tokens": InputTokens + CacheReadTokens + OutputTokens}}
	s.event("response.completed", obj{"type": "response.completed", "response": done})
}

// fail answers p.script.Status with an error body in the shape of the API at path.
func (p *Provider) fail(w http.ResponseWriter, path string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.script.Status)
	kind := map[int]string{401: "authentication_error", 403: "permission_error", 429: "rate_limit_error", 529: "overloaded_error"}[p.script.Status]
	if kind == "" {
		kind = "api_error"
	}
	if path == "/v1/messages" {
		json.NewEncoder(w).Encode(obj{"type": "error", "error": obj{"type": kind, "message": p.script.ErrorMessage}})
		return
	}
	code := map[int]string{401: "invalid_api_key", 429: "insufficient_quota"}[p.script.Status]
	json.NewEncoder(w).Encode(obj{"error": obj{"message": p.script.ErrorMessage, "type": kind, "code": code}})
}
