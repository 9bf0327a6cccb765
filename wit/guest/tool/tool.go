// Package tool makes a Go program a murmur tool guest: importing it exports
// murmur:tool/run@0.1.0#run (and its cabi_post), and Handle installs the function it calls.
//
//	//go:build wasip1
//	package main
//
//	import "github.com/capsulegate/capsulegate/wit/guest/tool"
//
//	func init() { tool.Handle(func(in tool.Input) tool.Result { ... }) }
//	func main() {}
package tool

import "github.com/capsulegate/capsulegate/wit/guest"

type (
	Input  = guest.ToolInput
	Result = guest.ToolResult
	Status = guest.Status
	Pair   = guest.Pair
)

const (
	Passed = guest.StatusPassed
	Failed = guest.StatusFailed
	Error  = guest.StatusError
)

var handler func(Input) Result

// Handle installs h as the tool's run function; call it from an init function, since
// the host may call run right after _initialize. A panic in h becomes status error.
func Handle(h func(Input) Result) { handler = h }
