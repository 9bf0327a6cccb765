//go:build wasip1

// Command codex is a process driver for the Codex CLI (`codex exec --json`): the
// translation in package codexdriver, exported over murmur:driver/process@0.6.0
// (docs/reference/process-drivers.md "Shipped drivers").
package main

import (
	"github.com/capsulegate/capsulegate/examples/drivers/codex/codexdriver"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

func init() { process.Handle(codexdriver.New()) }

func main() {}
