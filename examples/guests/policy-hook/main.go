//go:build wasip1

// Command policy-hook is a blocking hook that refuses, before it runs, anything that
// would run rm: a shell command whose binary or argv names rm or whose script invokes
// it (on-shell), or a tool call whose name or input has rm as a word (on-tool-call).
// Its artifact (examples/artifacts/policy-hook) binds it to on-shell with commit_policy
// deny; the same module bound to on-tool-call guards the other tools.
package main

import (
	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

func init() {
	hook.Handle(hook.Handlers{Shell: onShell, ToolCall: onToolCall})
}

// onShell refuses a command that runs rm. Only the decision point (no outcome yet) can
// be refused; a command that ran is just observed.
func onShell(e hook.ShellEvent) (hook.Output, error) {
	if e.Outcome != nil {
		return hook.None(), nil
	}
	if why := shellRunsRm(e.Binary, e.Argv, e.Script); why != "" {
		return hook.Deny("policy-hook: " + why + ", and this capsule may not run rm"), nil
	}
	return hook.None(), nil
}

// onToolCall refuses a tool call that mentions rm, before it runs.
func onToolCall(e hook.ToolEvent) (hook.Output, error) {
	if e.Outcome == nil && (mentionsRm(e.ToolName) || mentionsRm(e.Input)) {
		return hook.Deny("policy-hook: " + e.ToolName + " mentions rm, which this capsule may not run"), nil
	}
	return hook.None(), nil
}
