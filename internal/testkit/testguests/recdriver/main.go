//go:build wasip1

// Command recdriver is a driver that needs no provider: it appends every driver input it
// gets, as one line, to /out/driver-inputs.jsonl, so tests assert on what the host sent,
// and answers from the last message. A user message "call <tool> <text>" asks for that
// tool with {"text": <text>}; a tool result is answered "the tool said: <result>";
// anything else "you said: <text>". With driver config {"continuation": true} it returns
// continuation_id "cont-<n>", n one more than the id it was given (1 without one); with
// {"continuation": "metadata"} it returns it as tool-result metadata, as upstream's do.
// With {"tokens_per_message": K} it reports usage.input_tokens of K per input message.
package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

type block struct {
	Type  string          `json:"type"`
	Text  string          `json:"text,omitempty"`
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
}

type input struct {
	Messages []struct {
		Role    string  `json:"role"`
		Content []block `json:"content"`
	} `json:"messages"`
	ContinuationID string `json:"continuation_id"`
}

func fail(msg string) tool.Result {
	return tool.Result{Status: tool.Error, Summary: guest.Some("recdriver: " + msg)}
}

func run(in tool.Input) tool.Result {
	data := guest.Value(in.Data)
	f, err := os.OpenFile("/out/driver-inputs.jsonl", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return fail(err.Error())
	}
	_, err = f.WriteString(data + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err.Error())
	}
	var req input
	if err := json.Unmarshal([]byte(data), &req); err != nil || len(req.Messages) == 0 {
		return fail("input is not the driver JSON, or holds no message")
	}
	last := req.Messages[len(req.Messages)-1]
	text := ""
	if len(last.Content) > 0 {
		text = last.Content[0].Text
	}
	out := map[string]any{"stop_reason": "end_turn", "content": []block{{Type: "text", Text: "you said: " + text}}}
	switch f := strings.SplitN(text, " ", 3); {
	case last.Role == "tool":
		out["content"] = []block{{Type: "text", Text: "the tool said: " + text}}
	case last.Role == "user" && len(f) == 3 && f[0] == "call":
		arg, _ := json.Marshal(map[string]string{"text": f[2]})
		out["stop_reason"] = "tool_call"
		out["content"] = []block{{Type: "text", Text: "Calling " + f[1] + "."}, {Type: "tool_call", ID: "call_" + f[2], Name: f[1], Input: arg}}
	}
	var cfg struct {
		TokensPerMessage int `json:"tokens_per_message"`
	}
	json.Unmarshal([]byte(os.Getenv("MURMUR_INFERENCE_DRIVER_CONFIG")), &cfg)
	if cfg.TokensPerMessage > 0 {
		out["usage"] = map[string]int{"input_tokens": cfg.TokensPerMessage * len(req.Messages), "output_tokens": 1}
	}
	var meta []tool.Pair
	n, _ := strconv.Atoi(strings.TrimPrefix(req.ContinuationID, "cont-"))
	switch cfg := os.Getenv("MURMUR_INFERENCE_DRIVER_CONFIG"); {
	case strings.Contains(cfg, `"continuation":true`):
		out["continuation_id"] = "cont-" + strconv.Itoa(n+1)
	case strings.Contains(cfg, `"continuation":"metadata"`):
		meta = []tool.Pair{{Key: "continuation_id", Value: "cont-" + strconv.Itoa(n+1)}}
	}
	b, _ := json.Marshal(out)
	return tool.Result{Status: tool.Passed, Data: guest.Some(string(b)), Metadata: meta}
}

func init() { tool.Handle(run) }

func main() {}
