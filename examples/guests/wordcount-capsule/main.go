//go:build wasip1

// Command wordcount-capsule is an example script capsule: it reads its task, asks the
// wordcount tool to count it, and writes a one-line report to out/result.txt.
package main

import (
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

func init() {
	capsule.Handle(func() error {
		task, err := os.ReadFile("/task.md")
		if err != nil {
			return fmt.Errorf("reading the task: %w", err)
		}
		res, err := guest.Invoke("wordcount", guest.ToolInput{Data: guest.Some(string(task))})
		if err != nil {
			return fmt.Errorf("invoking wordcount: %w", err)
		}
		if res.Status != guest.StatusPassed {
			return fmt.Errorf("wordcount did not pass: %s", guest.Value(res.Summary))
		}
		report := fmt.Sprintf("The task has %s. Details: %s\n", guest.Value(res.Summary), guest.Value(res.Data))
		return os.WriteFile("/out/result.txt", []byte(report), 0o644)
	})
}

func main() {}
