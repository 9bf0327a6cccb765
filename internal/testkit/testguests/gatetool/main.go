//go:build wasip1

// Command gatetool is a tool for the gateway's tests. Its input picks what it does:
// "spin" says "spinning" and burns CPU until the call is stopped (cancel, deadline), "ask" requests input and
// answers with it, "barrier <url>" answers with the body of a GET of url (tests use a
// server that holds requests until others arrive), anything else is echoed back in three
// streamed chunks.
package main

import (
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

var sink uint64

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		text := guest.Value(in.Data)
		if url, ok := strings.CutPrefix(text, "barrier "); ok {
			resp, err := guest.HTTPSend(guest.HTTPRequest{Method: "GET", URL: url})
			if err != nil {
				return tool.Result{Status: tool.Error, Summary: guest.Some(err.Error())}
			}
			text = string(resp.Body)
		}
		switch text {
		case "spin":
			guest.EmitChunk("spinning\n") // tells the test the tool is running
			for i := uint64(0); ; i++ {
				sink += i
			}
		case "ask":
			text = "answered " + guest.RequestInput("what should I say?")
		}
		for _, part := range []string{"echo: ", text, "\n"} {
			guest.EmitChunk(part)
		}
		return tool.Result{Status: tool.Passed, Summary: guest.Some("echoed"), Data: guest.Some(text)}
	})
}

func main() {}
