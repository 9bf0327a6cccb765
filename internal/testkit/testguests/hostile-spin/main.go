//go:build wasip1

// Command hostile-spin is a tool guest that, given input data "spin", loops forever
// without calling the host or yielding; given "sleep N", sleeps N seconds in one
// WASI poll_oneoff; given "exit N", calls proc_exit(N) mid-call; given "panic", panics
// (a nil map write); any other input returns status passed.
package main

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

var sink uint64

func spin() {
	for i := uint64(1); ; i++ {
		sink = sink*31 + i
	}
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		if guest.Value(in.Data) == "spin" {
			spin()
		}
		if n, ok := strings.CutPrefix(guest.Value(in.Data), "exit "); ok {
			code, _ := strconv.Atoi(n)
			os.Exit(code)
		}
		if guest.Value(in.Data) == "panic" {
			var m map[string]int
			m["boom"] = 1
		}
		if n, ok := strings.CutPrefix(guest.Value(in.Data), "sleep "); ok {
			secs, _ := strconv.Atoi(n)
			time.Sleep(time.Duration(secs) * time.Second)
		}
		return tool.Result{Status: tool.Passed, Summary: guest.Some("ok")}
	})
}

func main() {}
