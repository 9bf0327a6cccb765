//go:build wasip1

// Command hostile-grow is a tool guest that, given input data "grow", allocates 1 MiB
// blocks and keeps every one of them until the memory runs out; any other input
// returns status passed.
package main

import (
	"strconv"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

var hoard [][]byte

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		if guest.Value(in.Data) == "grow" {
			for {
				b := make([]byte, 1<<20)
				for i := 0; i < len(b); i += 4096 {
					b[i] = 1 // touch every page
				}
				hoard = append(hoard, b)
			}
		}
		return tool.Result{Status: tool.Passed, Summary: guest.Some("ok " + strconv.Itoa(len(hoard)))}
	})
}

func main() {}
