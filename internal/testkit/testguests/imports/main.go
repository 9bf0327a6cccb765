//go:build wasip1

// Command imports is a tool guest that calls every host import except invoke and
// reports what it got back in its result.
package main

import (
	"strconv"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		guest.EmitChunk("chunk")
		guest.EmitThinkingChunk("thinking")
		guest.ToolCallStarted("id1", "echo")
		guest.ToolCallInputBytes("id1", 1<<40)
		answer := guest.RequestInput("name?")
		resp, err := guest.HTTPSend(guest.HTTPRequest{
			Method: "POST", URL: guest.Value(in.Data),
			Headers: []guest.Pair{{Key: "X-A", Value: "1"}, {Key: "X-B", Value: ""}},
			Body:    []byte("ping"),
		})
		if err != nil {
			return tool.Result{Status: tool.Failed, Summary: guest.Some(err.Error()), Data: guest.Some(answer)}
		}
		md := []tool.Pair{{Key: "status", Value: strconv.Itoa(int(resp.Status))}, {Key: "body", Value: string(resp.Body)}}
		return tool.Result{Status: tool.Passed, Data: guest.Some(answer), Metadata: append(md, resp.Headers...)}
	})
}

func main() {}
