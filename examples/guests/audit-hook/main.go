//go:build wasip1

// Command audit-hook is an async hook with no binding and commit_policy none: it appends
// one JSON line per session event, {"event": <lifecycle function>, "record": <its
// record>}, to /audit.jsonl, the root of the folder the host grants it (the session's
// out/ folder). Its artifact is examples/artifacts/audit-hook.
package main

import (
	"encoding/json"
	"os"

	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

// record appends {"event": fn, "record": rec} as one line; each call runs in a fresh
// instance, so the file is opened every time.
func record[E any](fn string) func(E) (hook.Output, error) {
	return func(rec E) (hook.Output, error) {
		line, err := json.Marshal(struct {
			Event  string `json:"event"`
			Record E      `json:"record"`
		}{fn, rec})
		if err != nil {
			return hook.Output{}, err
		}
		f, err := os.OpenFile("/audit.jsonl", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return hook.Output{}, err
		}
		if _, err := f.Write(append(line, '\n')); err != nil {
			f.Close()
			return hook.Output{}, err
		}
		return hook.None(), f.Close()
	}
}

func init() {
	hook.Handle(hook.Handlers{
		SessionStart: record[hook.SessionContext]("on-session-start"),
		TaskStart:    record[hook.TaskStartEvent]("on-task-start"),
		Inference:    record[hook.InferenceEvent]("on-inference"),
		ToolCall:     record[hook.ToolEvent]("on-tool-call"),
		Shell:        record[hook.ShellEvent]("on-shell"),
		Compaction:   record[hook.CompactionEvent]("on-compaction"),
		TaskEnd:      record[hook.TaskEndEvent]("on-task-end"),
		SessionEnd:   record[hook.SessionEndEvent]("on-session-end"),
	})
}

func main() {}
