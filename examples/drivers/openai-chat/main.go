//go:build wasip1

// Command openai-chat is an inference driver for the OpenAI Chat Completions API, which
// most local and hosted model servers also speak (docs/reference/driver-protocol.md
// "Shipped drivers"): it translates the driver JSON (docs/reference/driver-protocol.md
// "Input") to POST {endpoint}/v1/chat/completions and the answer back. It never holds an
// API key: the host adds it to the request.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/capsulegate/capsulegate/examples/drivers/internal/driver"
	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

const provider = "openai-chat"

type function struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	ID       string   `json:"id"`
	Type     string   `json:"type"`
	Function function `json:"function"`
}

type message struct {
	Role       string     `json:"role"`
	Content    *string    `json:"content"` // null on an assistant message that only calls tools
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type functionDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

type toolDef struct {
	Type     string      `json:"type"`
	Function functionDef `json:"function"`
}

type request struct {
	Model     string    `json:"model"`
	MaxTokens int       `json:"max_tokens"`
	Messages  []message `json:"messages"`
	Tools     []toolDef `json:"tools,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
	// StreamOptions asks for the usage in the stream's last chunk.
	StreamOptions *streamOptions `json:"stream_options,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type choice struct {
	Message struct {
		Content   *string    `json:"content"`
		Refusal   *string    `json:"refusal"`
		ToolCalls []toolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

type response struct {
	Choices []choice `json:"choices"`
	Usage   struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func str(s string) *string { return &s }

// translate builds the Chat Completions request: the system prompt is the first message
// (role system); text blocks are joined into a string content; assistant tool_call blocks
// become tool_calls with the input as a JSON string; a tool message stays role tool with
// its tool_call_id (an error result's text is prefixed "error: ", as the API has no flag).
func translate(in *driver.Input) request {
	req := request{Model: in.Model, MaxTokens: in.MaxTokens}
	if in.System != "" {
		req.Messages = append(req.Messages, message{Role: "system", Content: str(in.System)})
	}
	for _, m := range in.Messages {
		text := driver.Text(m.Content, "\n\n")
		switch m.Role {
		case "user":
			req.Messages = append(req.Messages, message{Role: "user", Content: str(text)})
		case "assistant":
			msg := message{Role: "assistant"}
			for _, b := range m.Content {
				if b.Type == "tool_call" {
					var args bytes.Buffer
					if json.Compact(&args, b.Input) != nil {
						args.Reset()
						args.WriteString("{}")
					}
					msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: b.ID, Type: "function",
						Function: function{Name: b.Name, Arguments: args.String()}})
				}
			}
			if text != "" || len(msg.ToolCalls) == 0 {
				msg.Content = str(text)
			}
			req.Messages = append(req.Messages, msg)
		case "tool":
			if m.IsError {
				text = "error: " + text
			}
			req.Messages = append(req.Messages, message{Role: "tool", ToolCallID: m.ToolCallID, Content: str(text)})
		}
	}
	for _, t := range in.Tools {
		req.Tools = append(req.Tools, toolDef{Type: "function",
			Function: functionDef{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
	}
	return req
}

// decode maps a 2xx Chat Completions response (its first choice) to the driver output.
func decode(body []byte) driver.Output {
	var r response
	if err := json.Unmarshal(body, &r); err != nil {
		return driver.Fail("%s: malformed response body: %v: %s", provider, err, driver.Clip(string(body)))
	}
	if len(r.Choices) == 0 {
		if bytes.Contains(body, []byte(`"error"`)) {
			return driver.Fail("%s: %s", provider, driver.ErrorMessage(body))
		}
		return driver.Fail("%s: malformed response body: no choices: %s", provider, driver.Clip(string(body)))
	}
	c := r.Choices[0]
	out := driver.Output{Usage: driver.Usage{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens}}
	if c.Message.Content != nil && *c.Message.Content != "" {
		out.Content = append(out.Content, driver.Block{Type: "text", Text: *c.Message.Content})
	} else if c.Message.Refusal != nil && *c.Message.Refusal != "" {
		out.Content = append(out.Content, driver.Block{Type: "text", Text: *c.Message.Refusal})
	}
	for _, tc := range c.Message.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return driver.Fail("%s: malformed response body: a tool call without id or function name", provider)
		}
		input := json.RawMessage(`{}`)
		if a := bytes.TrimSpace([]byte(tc.Function.Arguments)); len(a) > 0 {
			var v map[string]any
			if err := json.Unmarshal(a, &v); err != nil {
				return driver.Fail("%s: tool call %s (%s): arguments are not a JSON object: %v: %s",
					provider, tc.ID, tc.Function.Name, err, driver.Clip(tc.Function.Arguments))
			}
			if v != nil {
				input = json.RawMessage(a)
			}
		}
		out.Content = append(out.Content, driver.Block{Type: "tool_call", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	finish := ""
	if c.FinishReason != nil {
		finish = *c.FinishReason
	}
	switch {
	case finish == "length":
		out.StopReason = driver.StopMaxTokens
	case len(c.Message.ToolCalls) > 0:
		// Some servers answer finish_reason "stop" with tool calls: the calls decide.
		out.StopReason = driver.StopToolCall
	case finish == "tool_calls" || finish == "function_call":
		return driver.Fail("%s: finish_reason %q without a tool call", provider, finish)
	case finish == "content_filter":
		return driver.Fail("%s: the answer was withheld by the provider's content filter", provider)
	default: // "stop", or none from a lenient server
		out.StopReason = driver.StopEndTurn
	}
	return out
}

// chunk is the part of a chat.completion.chunk the driver reads.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string `json:"content"`
			ReasoningContent *string `json:"reasoning_content"`
			Refusal          *string `json:"refusal"`
			ToolCalls        []struct {
				Index    int      `json:"index"`
				ID       string   `json:"id"`
				Type     string   `json:"type"`
				Function function `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// assembler rebuilds the first choice's message from the stream's chunks, emitting its
// text (and reasoning, from servers that send reasoning_content) as it arrives.
type assembler struct {
	r       response
	content strings.Builder
	refusal strings.Builder
	errBody []byte
}

func (a *assembler) event(ev driver.Event) error {
	if strings.TrimSpace(ev.Data) == "[DONE]" {
		return nil
	}
	var c chunk
	if err := json.Unmarshal([]byte(ev.Data), &c); err != nil {
		return fmt.Errorf("malformed stream chunk: %v: %s", err, driver.Clip(ev.Data))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		a.errBody = []byte(ev.Data)
		return errStop
	}
	if c.Usage != nil {
		a.r.Usage.PromptTokens, a.r.Usage.CompletionTokens = c.Usage.PromptTokens, c.Usage.CompletionTokens
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		if len(a.r.Choices) == 0 {
			a.r.Choices = make([]choice, 1)
		}
		m := &a.r.Choices[0]
		if d := ch.Delta.Content; d != nil && *d != "" {
			a.content.WriteString(*d)
			guest.EmitChunk(*d)
		}
		if d := ch.Delta.ReasoningContent; d != nil && *d != "" {
			guest.EmitThinkingChunk(*d)
		}
		if d := ch.Delta.Refusal; d != nil {
			a.refusal.WriteString(*d)
		}
		for _, tc := range ch.Delta.ToolCalls {
			if tc.Index < 0 || tc.Index > len(m.Message.ToolCalls) {
				return fmt.Errorf("malformed stream chunk: tool call %d out of order", tc.Index)
			}
			if tc.Index == len(m.Message.ToolCalls) {
				m.Message.ToolCalls = append(m.Message.ToolCalls, toolCall{Type: "function"})
			}
			t := &m.Message.ToolCalls[tc.Index]
			if tc.ID != "" {
				t.ID = tc.ID
			}
			t.Function.Name += tc.Function.Name
			t.Function.Arguments += tc.Function.Arguments
		}
		if ch.FinishReason != nil {
			m.FinishReason = ch.FinishReason
		}
	}
	return nil
}

var errStop = errors.New("stop")

func call(in *driver.Input, endpoint string) driver.Output {
	req := translate(in)
	req.Stream, req.StreamOptions = true, &streamOptions{IncludeUsage: true}
	body, err := json.Marshal(req)
	if err != nil {
		return driver.Fail("%s: cannot encode the request: %v", provider, err)
	}
	a := &assembler{}
	whole, msg := driver.PostStream(provider, endpoint+"/v1/chat/completions", nil, body, a.event)
	switch {
	case a.errBody != nil:
		return driver.Fail("%s: %s", provider, driver.ErrorMessage(a.errBody))
	case msg != "":
		return driver.Output{StopReason: driver.StopError, Error: msg}
	case whole != nil:
		return decode(whole)
	}
	if len(a.r.Choices) == 1 {
		if a.content.Len() > 0 {
			a.r.Choices[0].Message.Content = str(a.content.String())
		}
		if a.refusal.Len() > 0 {
			a.r.Choices[0].Message.Refusal = str(a.refusal.String())
		}
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
