//go:build wasip1

// Command conformance-io is the conformance capsule's tool: what a script capsule's own
// module cannot do itself (its world imports tools only), this tool does for it. Given
// {"ask": prompt} it asks the A2A client for input and returns the answer's text (the
// answer's parts are then in the workdir's in/); given {"chunks": [...]} it streams each
// chunk of the task's answer.
package main

import (
	"encoding/json"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

// input is the tool's input data.
type input struct {
	Ask    *string  `json:"ask"`
	Chunks []string `json:"chunks"`
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		var req input
		if err := json.Unmarshal([]byte(guest.Value(in.Data)), &req); err != nil {
			return tool.Result{Status: tool.Failed, Summary: guest.Some("input is not {\"ask\": prompt} or {\"chunks\": [...]}: " + err.Error())}
		}
		if req.Ask != nil {
			return tool.Result{Status: tool.Passed, Summary: guest.Some(guest.RequestInput(*req.Ask))}
		}
		for _, c := range req.Chunks {
			guest.EmitChunk(c)
		}
		return tool.Result{Status: tool.Passed}
	})
}

func main() {}
