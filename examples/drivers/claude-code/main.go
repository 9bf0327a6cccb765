//go:build wasip1

// Command claude-code is a process driver for Claude Code (`claude`): the translation in
// package claudecode, exported over murmur:driver/process@0.6.0
// (docs/reference/process-drivers.md "Shipped drivers").
package main

import (
	"github.com/capsulegate/capsulegate/examples/drivers/claude-code/claudecode"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

func init() { process.Handle(claudecode.New()) }

func main() {}
