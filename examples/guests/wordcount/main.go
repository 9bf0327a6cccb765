//go:build wasip1

// Command wordcount is an example wasm tool: it counts the words, lines and bytes of
// the text it is given as input data. Given no text, it asks the client for one (over
// A2A the task turns input-required until the answer comes), and it streams a progress
// line as it goes.
package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		text := guest.Value(in.Data)
		if strings.TrimSpace(text) == "" {
			text = guest.RequestInput("Which text should I count the words of?")
		}
		guest.EmitChunk(fmt.Sprintf("Counting the words of %d bytes of text…\n", len(text)))
		words := len(strings.Fields(text))
		lines := strings.Count(text, "\n")
		if text != "" && !strings.HasSuffix(text, "\n") {
			lines++
		}
		return tool.Result{
			Status:  tool.Passed,
			Summary: guest.Some(fmt.Sprintf("%d words", words)),
			Data:    guest.Some(fmt.Sprintf(`{"words": %d, "lines": %d, "bytes": %d}`, words, lines, len(text))),
			Metadata: []tool.Pair{
				{Key: "words", Value: strconv.Itoa(words)},
			},
		}
	})
}

func main() {}
