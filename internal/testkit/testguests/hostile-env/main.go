//go:build wasip1

// Command hostile-env is a tool guest that reports everything it can learn of its
// environment: os.Environ() one per line in data, and whether it could read the
// process environment through /proc in summary.
package main

import (
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(tool.Input) tool.Result {
		proc := "no /proc"
		if b, err := os.ReadFile("/proc/self/environ"); err == nil {
			proc = "read /proc/self/environ: " + string(b)
		}
		return tool.Result{
			Status:  tool.Passed,
			Summary: guest.Some(proc),
			Data:    guest.Some(strings.Join(os.Environ(), "\n")),
		}
	})
}

func main() {}
