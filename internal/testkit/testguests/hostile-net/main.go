//go:build wasip1

// Command hostile-net is a tool guest that sends GET <input data> through
// capsulegate:http/outgoing. A response is status passed with metadata status and
// location and the body in data; a refusal is status failed with the host's message
// in summary.
package main

import (
	"strconv"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		resp, err := guest.HTTPSend(guest.HTTPRequest{Method: "GET", URL: guest.Value(in.Data)})
		if err != nil {
			return tool.Result{Status: tool.Failed, Summary: guest.Some(err.Error())}
		}
		md := []tool.Pair{{Key: "status", Value: strconv.Itoa(int(resp.Status))}}
		for _, h := range resp.Headers {
			if h.Key == "location" {
				md = append(md, tool.Pair{Key: "location", Value: h.Value})
			}
		}
		return tool.Result{Status: tool.Passed, Data: guest.Some(string(resp.Body)), Metadata: md}
	})
}

func main() {}
