package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// writeStream answers with evs as server-sent events, each after its delay, flushed as
// it is written so the client reads it before the next one is due.
func (h *Handler) writeStream(w http.ResponseWriter, r *http.Request, evs []StreamEvent) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	flush()
	for i, ev := range evs {
		if ev.DelayMS > 0 {
			t := time.NewTimer(time.Duration(ev.DelayMS) * time.Millisecond)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		if h.BeforeEvent != nil {
			h.BeforeEvent(r, i, len(evs))
		}
		var b bytes.Buffer
		if ev.Event != "" {
			fmt.Fprintf(&b, "event: %s\n", ev.Event)
		}
		b.WriteString("data: ")
		var s string
		if json.Unmarshal(ev.Data, &s) == nil {
			b.WriteString(s)
		} else if err := json.Compact(&b, ev.Data); err != nil {
			b.Write(bytes.Join(bytes.Fields(ev.Data), []byte(" "))) // validated at load; never here
		}
		b.WriteString("\n\n")
		if _, err := w.Write(b.Bytes()); err != nil {
			return
		}
		flush()
	}
}

// synthesize turns a whole response body into the provider's streaming events, for a
// client that asks for a stream from a cassette recorded without one. The events carry
// no delays.
func synthesize(provider string, body json.RawMessage) ([]StreamEvent, error) {
	if provider == Responses {
		return synthesizeResponses(body)
	}
	var events []StreamEvent
	add := func(name string, v any) {
		data, _ := json.Marshal(v)
		events = append(events, StreamEvent{Event: name, Data: data})
	}
	if provider == Anthropic {
		var msg map[string]json.RawMessage
		if err := json.Unmarshal(body, &msg); err != nil {
			return nil, err
		}
		var content []map[string]json.RawMessage
		if c, ok := msg["content"]; ok {
			if err := json.Unmarshal(c, &content); err != nil {
				return nil, fmt.Errorf("content: %w", err)
			}
		}
		var usage map[string]json.RawMessage
		json.Unmarshal(msg["usage"], &usage)
		start := map[string]json.RawMessage{}
		for k, v := range msg {
			start[k] = v
		}
		start["content"], start["stop_reason"], start["stop_sequence"] = json.RawMessage(`[]`), json.RawMessage(`null`), json.RawMessage(`null`)
		add("message_start", map[string]any{"type": "message_start", "message": start})
		for i, blk := range content {
			var typ string
			json.Unmarshal(blk["type"], &typ)
			head := map[string]any{"type": typ}
			var delta map[string]any
			switch typ {
			case "text":
				var text string
				json.Unmarshal(blk["text"], &text)
				head["text"], delta = "", map[string]any{"type": "text_delta", "text": text}
			case "thinking":
				var text string
				json.Unmarshal(blk["thinking"], &text)
				head["thinking"], delta = "", map[string]any{"type": "thinking_delta", "thinking": text}
			case "tool_use":
				head["id"], head["name"], head["input"] = blk["id"], blk["name"], map[string]any{}
				input := blk["input"]
				if len(input) == 0 {
					input = json.RawMessage(`{}`)
				}
				var compact bytes.Buffer
				json.Compact(&compact, input)
				delta = map[string]any{"type": "input_json_delta", "partial_json": compact.String()}
			default:
				for k, v := range blk {
					head[k] = v
				}
			}
			add("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": head})
			if delta != nil {
				add("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": delta})
			}
			add("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
		}
		out := json.RawMessage(`0`)
		if v, ok := usage["output_tokens"]; ok {
			out = v
		}
		add("message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": msg["stop_reason"], "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
		add("message_stop", map[string]any{"type": "message_stop"})
		return events, nil
	}
	var resp struct {
		ID      string          `json:"id"`
		Created json.RawMessage `json:"created"`
		Model   string          `json:"model"`
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Role      string            `json:"role"`
				Content   *string           `json:"content"`
				Refusal   *string           `json:"refusal"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	chunk := func(choices []any, usage json.RawMessage) map[string]any {
		c := map[string]any{"id": resp.ID, "object": "chat.completion.chunk", "model": resp.Model, "choices": choices}
		if len(resp.Created) > 0 {
			c["created"] = resp.Created
		}
		if usage != nil {
			c["usage"] = usage
		}
		return c
	}
	for _, ch := range resp.Choices {
		delta := map[string]any{"role": "assistant"}
		if ch.Message.Content != nil {
			delta["content"] = *ch.Message.Content
		}
		if ch.Message.Refusal != nil {
			delta["refusal"] = *ch.Message.Refusal
		}
		add("", chunk([]any{map[string]any{"index": ch.Index, "delta": delta, "finish_reason": nil}}, nil))
		for i, raw := range ch.Message.ToolCalls {
			var tc map[string]any
			json.Unmarshal(raw, &tc)
			tc["index"] = i
			add("", chunk([]any{map[string]any{"index": ch.Index, "delta": map[string]any{"tool_calls": []any{tc}}, "finish_reason": nil}}, nil))
		}
		add("", chunk([]any{map[string]any{"index": ch.Index, "delta": map[string]any{}, "finish_reason": ch.FinishReason}}, nil))
	}
	if len(resp.Usage) > 0 {
		add("", chunk([]any{}, resp.Usage))
	}
	events = append(events, StreamEvent{Data: json.RawMessage(`"[DONE]"`)})
	return events, nil
}
