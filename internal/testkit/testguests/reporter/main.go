//go:build wasip1

// Command reporter is a script capsule for the peer tests: it counts the words of its
// task text with its wordcount tool (murmur:tool-registry/invoke), answers with the
// tool's summary as text, and gives a file beside it: out/report.txt, "report: " and the
// task's text, as an artifact of media type text/plain.
package main

import (
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
	"github.com/capsulegate/capsulegate/wit/guest/parts"
)

func init() {
	capsule.Handle(func() error {
		task, err := os.ReadFile("task.md")
		if err != nil {
			return err
		}
		text := strings.TrimSpace(string(task))
		res, err := guest.Invoke("wordcount", guest.ToolInput{Data: guest.Some(text)})
		if err != nil {
			return err
		}
		if err := os.MkdirAll("out", 0o755); err != nil {
			return err
		}
		if err := os.WriteFile("out/report.txt", []byte("report: "+text+"\n"), 0o644); err != nil {
			return err
		}
		if err := parts.WriteAnswer(parts.Answer{Artifacts: []parts.Artifact{{Name: "report", Parts: []parts.AnswerPart{
			parts.File("report.txt", "text/plain", "report.txt")}}}}); err != nil {
			return err
		}
		return os.WriteFile("out/result.txt", []byte(guest.Value(res.Summary)), 0o644)
	})
}

func main() {}
