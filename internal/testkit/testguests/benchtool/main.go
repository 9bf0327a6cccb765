//go:build wasip1

// Command benchtool is the guest of the runtime benchmarks: a tool that returns its
// input data uppercased, with one metadata pair.
package main

import (
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		data := strings.ToUpper(guest.Value(in.Data))
		return tool.Result{
			Status:   tool.Passed,
			Data:     &data,
			Metadata: []tool.Pair{{Key: "len", Value: strconv.Itoa(len(data))}},
		}
	})
}

func main() {}
