//go:build wasip1

// Command envdump-driver is a minimal OpenAI-chat driver that also writes everything it
// can learn to /out/envdump.txt: its whole environment, and the status, headers and body
// of the provider's answer. Secrets tests read the dump to prove the gateway key never
// reached the guest.
package main

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

type input struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content []struct {
			Type, Text string
		} `json:"content"`
	} `json:"messages"`
}

func fail(msg string) tool.Result {
	return tool.Result{Status: tool.Error, Summary: guest.Some("envdump-driver: " + msg)}
}

func run(in tool.Input) tool.Result {
	var req input
	if err := json.Unmarshal([]byte(guest.Value(in.Data)), &req); err != nil || len(req.Messages) == 0 {
		return fail("input is not the driver JSON")
	}
	var text []string
	for _, b := range req.Messages[0].Content {
		text = append(text, b.Text)
	}
	body, _ := json.Marshal(map[string]any{"model": req.Model,
		"messages": []map[string]string{{"role": "user", "content": strings.Join(text, "\n")}}})
	resp, err := guest.HTTPSend(guest.HTTPRequest{Method: "POST", URL: os.Getenv("MURMUR_INFERENCE_ENDPOINT") + "/v1/chat/completions",
		Headers: []guest.Pair{{Key: "content-type", Value: "application/json"}}, Body: body})
	var dump strings.Builder
	dump.WriteString("# environment\n")
	for _, kv := range os.Environ() {
		dump.WriteString(kv + "\n")
	}
	if err != nil {
		dump.WriteString("# http error\n" + err.Error() + "\n")
	} else {
		dump.WriteString("# http response headers\n")
		for _, h := range resp.Headers {
			dump.WriteString(h.Key + ": " + h.Value + "\n")
		}
		dump.WriteString("# http response body\n" + string(resp.Body) + "\n")
	}
	if err := os.WriteFile("/out/envdump.txt", []byte(dump.String()), 0o644); err != nil {
		return fail("writing /out/envdump.txt: " + err.Error())
	}
	if err != nil {
		return fail("provider request: " + err.Error())
	}
	var chat struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(resp.Body, &chat) != nil || len(chat.Choices) == 0 {
		return fail("provider answered HTTP " + strconv.Itoa(int(resp.Status)) + ": " + string(resp.Body))
	}
	out, _ := json.Marshal(map[string]any{"stop_reason": "end_turn",
		"content": []map[string]string{{"type": "text", "text": chat.Choices[0].Message.Content}}})
	return tool.Result{Status: tool.Passed, Data: guest.Some(string(out))}
}

func init() { tool.Handle(run) }

func main() {}
