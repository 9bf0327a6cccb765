//go:build wasip1

// Command anthropic-messages is an inference driver for the Anthropic Messages API
// (docs/reference/driver-protocol.md "Shipped drivers"): it translates the driver JSON
// (docs/reference/driver-protocol.md "Input") to POST {endpoint}/v1/messages and the
// answer back. It never holds an API key: the host adds it to the request.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/examples/drivers/internal/driver"
	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

const provider = "anthropic-messages"

// APIVersion is the anthropic-version header sent with every request.
const APIVersion = "2023-06-01"

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   []block         `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

type message struct {
	Role    string  `json:"role"`
	Content []block `json:"content"`
}

type toolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type request struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	System    string    `json:"system,omitempty"`
	Messages  []message `json:"messages"`
	Tools     []toolDef `json:"tools,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
}

type response struct {
	Type       string  `json:"type"`
	Content    []block `json:"content"`
	StopReason *string `json:"stop_reason"`
	Usage      struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// translate builds the Messages request: text stays text, tool_call becomes tool_use, and
// a tool message becomes a tool_result block of a user message. Consecutive messages of
// the same provider role are merged, so every tool result answering one assistant turn
// lands in the single user message that must follow it.
func translate(in *driver.Input) request {
	req := request{Model: in.Model, MaxTokens: in.MaxTokens, System: in.System}
	for _, m := range in.Messages {
		role := m.Role
		var blocks []block
		if m.Role == "tool" {
			role = "user"
			res := block{Type: "tool_result", ToolUseID: m.ToolCallID, IsError: m.IsError}
			for _, b := range m.Content {
				if b.Type == "text" && b.Text != "" {
					res.Content = append(res.Content, block{Type: "text", Text: b.Text})
				}
			}
			blocks = []block{res}
		} else {
			for _, b := range m.Content {
				switch b.Type {
				case "text":
					if b.Text != "" { // the API refuses empty text blocks
						blocks = append(blocks, block{Type: "text", Text: b.Text})
					}
				case "tool_call":
					blocks = append(blocks, block{Type: "tool_use", ID: b.ID, Name: b.Name, Input: b.Input})
				}
			}
		}
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == role {
			req.Messages[n-1].Content = append(req.Messages[n-1].Content, blocks...)
			continue
		}
		if blocks == nil {
			blocks = []block{}
		}
		req.Messages = append(req.Messages, message{Role: role, Content: blocks})
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, toolDef{Name: t.Name, Description: t.Description, InputSchema: t.Parameters})
	}
	return req
}

// decode maps a 2xx Messages response to the driver output.
func decode(body []byte) driver.Output {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return driver.Fail("%s: malformed response body: %v: %s", provider, err, driver.Clip(string(body)))
	}
	if r.Type == "error" {
		return driver.Fail("%s: %s", provider, driver.ErrorMessage(body))
	}
	if r.StopReason == nil {
		return driver.Fail("%s: malformed response body: no stop_reason: %s", provider, driver.Clip(string(body)))
	}
	out := driver.Output{Usage: driver.Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens}}
	calls := 0
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			out.Content = append(out.Content, driver.Block{Type: "text", Text: b.Text})
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return driver.Fail("%s: malformed response body: a tool_use block without id or name", provider)
			}
			input := b.Input
			if len(input) == 0 || string(input) == "null" {
				input = json.RawMessage(`{}`)
			}
			out.Content = append(out.Content, driver.Block{Type: "tool_call", ID: b.ID, Name: b.Name, Input: input})
			calls++
		}
	}
	switch *r.StopReason {
	case "tool_use":
		if calls == 0 {
			return driver.Fail("%s: stop_reason tool_use without a tool_use block", provider)
		}
		out.StopReason = driver.StopToolCall
	case "end_turn", "stop_sequence", "refusal":
		out.StopReason = driver.StopEndTurn
	case "max_tokens":
		out.StopReason = driver.StopMaxTokens
	default:
		return driver.Fail("%s: unsupported stop_reason %q", provider, *r.StopReason)
	}
	return out
}

// streamEvent is the part of a Messages streaming event the driver reads.
type streamEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	Message      *response
	ContentBlock *block `json:"content_block"`
	Delta        struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		Thinking    string  `json:"thinking"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *struct {
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
}

// assembler rebuilds the Messages response from its streaming events, emitting text
// and thinking to the host as their deltas arrive.
type assembler struct {
	r       response
	partial map[int]*bytes.Buffer // tool_use input JSON, by block index
	errBody []byte
}

func (a *assembler) event(ev driver.Event) error {
	var e streamEvent
	if err := json.Unmarshal([]byte(ev.Data), &e); err != nil {
		return fmt.Errorf("malformed stream event %q: %v: %s", ev.Name, err, driver.Clip(ev.Data))
	}
	switch e.Type {
	case "message_start":
		if e.Message != nil {
			a.r.Type, a.r.Usage = e.Message.Type, e.Message.Usage
		}
	case "content_block_start":
		if e.ContentBlock == nil || e.Index != len(a.r.Content) {
			return fmt.Errorf("stream event content_block_start: block %d out of order", e.Index)
		}
		b := *e.ContentBlock
		if b.Type == "tool_use" {
			b.Input = nil // the deltas carry it
			a.partial[e.Index] = &bytes.Buffer{}
		}
		a.r.Content = append(a.r.Content, b)
	case "content_block_delta":
		if e.Index < 0 || e.Index >= len(a.r.Content) {
			return fmt.Errorf("stream event content_block_delta: no block %d", e.Index)
		}
		b := &a.r.Content[e.Index]
		switch e.Delta.Type {
		case "text_delta":
			b.Text += e.Delta.Text
			if e.Delta.Text != "" {
				guest.EmitChunk(e.Delta.Text)
			}
		case "thinking_delta":
			b.Thinking += e.Delta.Thinking
			if e.Delta.Thinking != "" {
				guest.EmitThinkingChunk(e.Delta.Thinking)
			}
		case "input_json_delta":
			if p := a.partial[e.Index]; p != nil {
				p.WriteString(e.Delta.PartialJSON)
			}
		}
	case "content_block_stop":
		if p := a.partial[e.Index]; p != nil && e.Index < len(a.r.Content) {
			a.r.Content[e.Index].Input = json.RawMessage(bytes.TrimSpace(p.Bytes()))
		}
	case "message_delta":
		if e.Delta.StopReason != nil {
			a.r.StopReason = e.Delta.StopReason
		}
		if e.Usage != nil {
			a.r.Usage.OutputTokens = e.Usage.OutputTokens
		}
	case "error":
		a.errBody = []byte(ev.Data)
		return errStop
	}
	return nil
}

var errStop = errors.New("stop")

func call(in *driver.Input, endpoint string) driver.Output {
	req := translate(in)
	req.Stream = true
	body, err := json.Marshal(req)
	if err != nil {
		return driver.Fail("%s: cannot encode the request: %v", provider, err)
	}
	a := &assembler{r: response{Type: "message"}, partial: map[int]*bytes.Buffer{}}
	whole, msg := driver.PostStream(provider, endpoint+"/v1/messages",
		[]guest.Pair{{Key: "anthropic-version", Value: APIVersion}}, body, a.event)
	switch {
	case a.errBody != nil:
		return driver.Fail("%s: %s", provider, driver.ErrorMessage(a.errBody))
	case msg != "":
		return driver.Output{StopReason: driver.StopError, Error: msg}
	case whole != nil:
		return decode(whole)
	}
	assembled, err := json.Marshal(a.r)
	if err != nil {
		return driver.Fail("%s: cannot assemble the streamed answer: %v", provider, err)
	}
	return decode(assembled)
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result { return driver.Run(in, call) })
}

func main() {}
