//go:build wasip1

// Command gateway is a script capsule for the gateway's tests: it hands its task text to
// the gatetool tool and writes the tool's answer, with MURMUR_CAPSULE_VERSION so reload
// tests can tell which version ran, and MURMUR_CAPSULE_URL when it has one; the task
// "read MURMUR.md" answers with that file, "keep <text>" keeps text in its context's
// folder (kept.txt) and "recall" answers with what is kept there.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

func init() {
	capsule.Handle(func() error {
		task, err := os.ReadFile("/task.md")
		if err != nil {
			return err
		}
		if text, ok := strings.CutPrefix(strings.TrimSpace(string(task)), "keep "); ok {
			if err := os.WriteFile("/kept.txt", []byte(text), 0o644); err != nil {
				return err
			}
			return os.WriteFile("/out/result.txt", []byte("kept"), 0o644)
		}
		if strings.TrimSpace(string(task)) == "recall" {
			kept, err := os.ReadFile("/kept.txt")
			if err != nil {
				return err
			}
			return os.WriteFile("/out/result.txt", kept, 0o644)
		}
		if strings.TrimSpace(string(task)) == "read MURMUR.md" { // what a guest finds when it looks
			md, err := os.ReadFile("/MURMUR.md")
			if err != nil {
				return err
			}
			return os.WriteFile("/out/result.txt", md, 0o644)
		}
		res, err := guest.Invoke("gatetool", guest.ToolInput{Data: guest.Some(strings.TrimSpace(string(task)))})
		if err != nil {
			return err
		}
		if res.Status != guest.StatusPassed {
			return fmt.Errorf("gatetool: %s", guest.Value(res.Summary))
		}
		answer := fmt.Sprintf("%s (version %s)", guest.Value(res.Data), os.Getenv("MURMUR_CAPSULE_VERSION"))
		if url := os.Getenv("MURMUR_CAPSULE_URL"); url != "" {
			answer += " at " + url
		}
		return os.WriteFile("/out/result.txt", []byte(answer), 0o644)
	})
}

func main() {}
