//go:build wasip1

// Command reopenhook is a blocking on-task-end hook that reopens each completed task
// once, asking the model to check its work; a marker file in its folder (the session's
// out/) remembers the tasks it reopened, since each call is a fresh instance.
package main

import (
	"errors"
	"io/fs"
	"os"

	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

// Message is what a reopened task is told, as its next user turn.
const Message = "reopenhook: check your work"

func init() {
	hook.Handle(hook.Handlers{TaskEnd: func(e hook.TaskEndEvent) (hook.Output, error) {
		if e.ExitStatus != "completed" {
			return hook.None(), nil
		}
		marker := "/reopened-" + e.TaskID
		if _, err := os.Stat(marker); err == nil {
			return hook.None(), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return hook.Output{}, err
		}
		if err := os.WriteFile(marker, nil, 0o644); err != nil {
			return hook.Output{}, err
		}
		return hook.ReopenTask(Message), nil
	}})
}

func main() {}
