//go:build wasip1

// Command gateway is a script capsule for the gateway's tests: it hands its task text to
// the gatetool tool and writes the tool's answer, with MURMUR_CAPSULE_VERSION so reload
// tests can tell which version ran, and MURMUR_CAPSULE_URL when it has one; the task
// "read MURMUR.md" answers with that file.
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
