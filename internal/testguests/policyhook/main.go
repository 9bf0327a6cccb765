//go:build wasip1

// Command policyhook is a blocking on-tool-call hook that denies, before it runs, any
// call whose tool name or input contains "rm".
package main

import (
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

func init() {
	hook.Handle(hook.Handlers{ToolCall: func(e hook.ToolEvent) (hook.Output, error) {
		// Only the decision point can be refused; a call that ran is just observed.
		if e.Outcome == nil && (strings.Contains(e.ToolName, "rm") || strings.Contains(e.Input, "rm")) {
			return hook.Deny("policyhook: " + e.ToolName + " mentions rm, which this capsule may not run"), nil
		}
		return hook.None(), nil
	}})
}

func main() {}
