//go:build wasip1

// Command echo is a tool guest that returns its input data.
package main

import (
	"strconv"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		if guest.Value(in.Data) == "panic" {
			panic("asked to")
		}
		return tool.Result{
			Status:   tool.Passed,
			Summary:  guest.Some("echo"),
			Data:     in.Data,
			Metadata: []tool.Pair{{Key: "len", Value: strconv.Itoa(len(guest.Value(in.Data)))}},
		}
	})
}

func main() {}
