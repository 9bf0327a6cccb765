//go:build wasip1

// Command counter is a tool for the init-snapshot tests: it answers how many times its
// run was called in this instance, the SNAP_TEST variable, and a value computed during
// package initialisation, so a test can tell a fresh instance, the environment it was
// started with, and a lost init state apart.
package main

import (
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

var (
	calls   int
	fromEnv = os.Getenv("SNAP_TEST") // read by package init, so it lives in the snapshot
	table   = func() map[string]int {
		m := map[string]int{}
		for i := range 1000 {
			m[fmt.Sprint(i)] = i * i
		}
		return m
	}()
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		calls++
		data := fmt.Sprintf("calls=%d init-env=%s env=%s table[31]=%d", calls, fromEnv, os.Getenv("SNAP_TEST"), table["31"])
		return tool.Result{Status: tool.Passed, Data: guest.Some(data)}
	})
}

func main() {}
