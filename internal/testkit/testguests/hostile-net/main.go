//go:build wasip1

// Command hostile-net is a tool guest that sends GET <input data> through
// capsulegate:http/outgoing (the data is the URL, or a model's {"url": …}). A response is status passed with metadata status and
// location and the body in data; a refusal is status failed with the host's message
// in summary.
package main

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		target := guest.Value(in.Data)
		var call struct{ URL string }
		if strings.HasPrefix(target, "{") && json.Unmarshal([]byte(target), &call) == nil {
			target = call.URL
		}
		resp, err := guest.HTTPSend(guest.HTTPRequest{Method: "GET", URL: target})
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
