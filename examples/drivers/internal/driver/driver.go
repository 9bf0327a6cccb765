// Package driver holds what the example inference drivers share: the driver JSON (the
// runtime's request and the driver's answer, docs/reference/driver-protocol.md "Input"
// and "Output"), its validation, and the plumbing from a murmur:tool/run call to a
// provider round trip.
package driver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
)

// Environment variables the runtime sets for a driver.
const (
	EnvEndpoint = "MURMUR_INFERENCE_ENDPOINT"
	EnvModel    = "MURMUR_INFERENCE_MODEL"
)

// Stop reasons of the driver output.
const (
	StopToolCall  = "tool_call"
	StopEndTurn   = "end_turn"
	StopMaxTokens = "max_tokens"
	StopError     = "error"
)

// Block is a content block: {"type":"text","text"} or {"type":"tool_call","id","name","input"}.
type Block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Message is one message of the conversation; ToolCallID and IsError are set on role "tool".
type Message struct {
	Role       string  `json:"role"`
	Content    []Block `json:"content"`
	ToolCallID string  `json:"tool_call_id,omitempty"`
	IsError    bool    `json:"is_error,omitempty"`
}

// Tool is a tool offered to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// Input is the driver JSON the runtime passes in tool-input.data.
type Input struct {
	Model          string    `json:"model"`
	MaxTokens      int       `json:"max_tokens"`
	System         string    `json:"system"`
	Messages       []Message `json:"messages"`
	Tools          []Tool    `json:"tools"`
	ContinuationID string    `json:"continuation_id"`
}

// Usage counts tokens of one inference.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

// Output is the driver JSON returned in tool-result.data.
type Output struct {
	StopReason string  `json:"stop_reason"`
	Content    []Block `json:"content"`
	Usage      Usage   `json:"usage"`
	Error      string  `json:"error,omitempty"`
}

// Fail returns the output of a provider failure.
func Fail(format string, args ...any) Output {
	return Output{StopReason: StopError, Error: fmt.Sprintf(format, args...)}
}

// Parse decodes and checks the driver input.
func Parse(data *string) (*Input, error) {
	if data == nil || strings.TrimSpace(*data) == "" {
		return nil, errors.New("no input data: want the driver JSON {model, max_tokens, system, messages, tools}")
	}
	var in Input
	dec := json.NewDecoder(strings.NewReader(*data))
	if err := dec.Decode(&in); err != nil {
		return nil, fmt.Errorf("input data is not the driver JSON: %v", err)
	}
	if dec.More() {
		return nil, errors.New("input data is not the driver JSON: data after the object")
	}
	if in.Model == "" {
		in.Model = os.Getenv(EnvModel)
	}
	if in.Model == "" {
		return nil, fmt.Errorf("input names no model (and %s is not set)", EnvModel)
	}
	if in.MaxTokens <= 0 {
		return nil, fmt.Errorf("max_tokens is %d: want a positive number", in.MaxTokens)
	}
	if len(in.Messages) == 0 {
		return nil, errors.New("messages is empty: want at least one user message")
	}
	for i, m := range in.Messages {
		switch m.Role {
		case "user", "assistant", "tool":
		default:
			return nil, fmt.Errorf("messages[%d]: role %q: want user, assistant or tool", i, m.Role)
		}
		if m.Role == "tool" && m.ToolCallID == "" {
			return nil, fmt.Errorf("messages[%d]: a tool message needs tool_call_id", i)
		}
		for j, b := range m.Content {
			switch {
			case b.Type == "text":
			case b.Type == "tool_call" && m.Role == "assistant":
				if b.ID == "" || b.Name == "" {
					return nil, fmt.Errorf("messages[%d].content[%d]: a tool_call needs id and name", i, j)
				}
				if len(bytes.TrimSpace(b.Input)) == 0 || string(bytes.TrimSpace(b.Input)) == "null" {
					in.Messages[i].Content[j].Input = json.RawMessage(`{}`)
				}
			case b.Type == "tool_call":
				return nil, fmt.Errorf("messages[%d].content[%d]: a tool_call block belongs to an assistant message, not %q", i, j, m.Role)
			default:
				return nil, fmt.Errorf("messages[%d].content[%d]: block type %q: want text or tool_call", i, j, b.Type)
			}
		}
	}
	for i, t := range in.Tools {
		if t.Name == "" {
			return nil, fmt.Errorf("tools[%d] has no name", i)
		}
		if p := bytes.TrimSpace(t.Parameters); len(p) == 0 || string(p) == "null" {
			in.Tools[i].Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
	}
	return &in, nil
}

// Endpoint returns the provider base URL from the environment, without a trailing '/'.
func Endpoint() (string, error) {
	ep := strings.TrimRight(strings.TrimSpace(os.Getenv(EnvEndpoint)), "/")
	if ep == "" {
		return "", fmt.Errorf("%s is not set: the runtime passes the provider endpoint there", EnvEndpoint)
	}
	return ep, nil
}

// Text joins the text blocks of content.
func Text(content []Block, sep string) string {
	var parts []string
	for _, b := range content {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, sep)
}

// Post sends body as JSON to url with headers and returns the response body of a 2xx
// answer; any other outcome is a provider error message (the provider's own message when
// its error body carries one).
func Post(provider, url string, headers []guest.Pair, body []byte) ([]byte, string) {
	hs := append([]guest.Pair{{Key: "content-type", Value: "application/json"}}, headers...)
	resp, err := guest.HTTPSend(guest.HTTPRequest{Method: "POST", URL: url, Headers: hs, Body: body})
	if err != nil {
		return nil, fmt.Sprintf("%s: request failed: %v", provider, err)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return nil, fmt.Sprintf("%s: HTTP %d: %s", provider, resp.Status, ErrorMessage(resp.Body))
	}
	return resp.Body, ""
}

// ErrorMessage reads a provider error body: Anthropic's {"type":"error","error":{"type",
// "message"}} and OpenAI's {"error":{"message","type","code"}} both carry error.message;
// anything else is quoted, clipped.
func ErrorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			if obj.Type != "" {
				return obj.Type + ": " + obj.Message
			}
			return obj.Message
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return s
		}
	}
	return Clip(strings.TrimSpace(string(body)))
}

// Clip bounds s for messages.
func Clip(s string) string {
	const n = 500
	if s == "" {
		return "(empty body)"
	}
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && s[i]&0xC0 == 0x80 {
		i--
	}
	return s[:i] + "…"
}

// Run is a driver's whole murmur:tool/run: parse the input, find the endpoint, call the
// provider, and encode its output. A bad input or configuration is status error; a provider
// failure is status passed with stop_reason "error", which the runtime reads.
func Run(in guest.ToolInput, call func(in *Input, endpoint string) Output) guest.ToolResult {
	req, err := Parse(in.Data)
	if err != nil {
		return guest.ToolResult{Status: guest.StatusError, Summary: guest.Some("driver: " + err.Error())}
	}
	ep, err := Endpoint()
	if err != nil {
		return guest.ToolResult{Status: guest.StatusError, Summary: guest.Some("driver: " + err.Error())}
	}
	out := call(req, ep)
	if out.Content == nil {
		out.Content = []Block{}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return guest.ToolResult{Status: guest.StatusError, Summary: guest.Some("driver: cannot encode the output: " + err.Error())}
	}
	summary := out.StopReason
	if out.StopReason == StopError {
		summary = "error: " + out.Error
	}
	return guest.ToolResult{Status: guest.StatusPassed, Summary: guest.Some(summary), Data: guest.Some(string(data))}
}
