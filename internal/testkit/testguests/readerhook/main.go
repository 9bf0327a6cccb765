//go:build wasip1

// Command readerhook is a blocking hook bound to every event that reads what the hook
// world offers — the task in scope (murmur:task-io/read), the conversation
// (murmur:conversation/read, in pages of two), a token count and, at on-task-end, one
// completion through the capsule's driver — and appends what it got, one JSON line per
// event, to /reader.jsonl in its out/ folder. Its env var READER_TAG, when granted, is
// written too.
package main

import (
	"encoding/json"
	"os"

	"github.com/capsulegate/capsulegate/wit/guest/hook"
)

type report struct {
	Event     string   `json:"event"`
	Tag       string   `json:"tag"`
	InputLen  uint64   `json:"input_len"`
	InputErr  string   `json:"input_err,omitempty"`
	AsGiven   string   `json:"as_given"`
	Original  string   `json:"original"`
	Output    string   `json:"output"`
	OutputErr string   `json:"output_err,omitempty"`
	Roles     []string `json:"roles"` // newest first, every page
	Contents  []string `json:"contents"`
	Pages     int      `json:"pages"`
	Total     uint32   `json:"total"`
	ConvErr   string   `json:"conv_err,omitempty"`
	Tokens    uint64   `json:"tokens"`
	Infer     string   `json:"infer,omitempty"`
	InferErr  string   `json:"infer_err,omitempty"`
	InferIn   uint64   `json:"infer_in,omitempty"`
	Model     string   `json:"model,omitempty"`
}

// readAll reads a text in windows of 3 bytes, so the host's windowing is exercised.
func readAll(read func(off, max uint64) (string, error), n uint64) (string, error) {
	var out string
	for uint64(len(out)) < n {
		s, err := read(uint64(len(out)), 3)
		if err != nil {
			return out, err
		}
		if s == "" {
			s, err = read(uint64(len(out)), 8) // a character wider than 3 bytes
			if err != nil || s == "" {
				return out, err
			}
		}
		out += s
	}
	return out, nil
}

func observe(event string) (hook.Output, error) {
	r := report{Event: event, Tag: os.Getenv("READER_TAG"), Roles: []string{}, Contents: []string{}, Tokens: hook.CountTokens("twelve bytes")}
	if n, err := hook.InputLen(hook.AsGiven); err != nil {
		r.InputErr = err.Error()
	} else {
		r.InputLen = n
		r.AsGiven, _ = readAll(func(off, max uint64) (string, error) { return hook.ReadInput(hook.AsGiven, off, max) }, n)
		m, _ := hook.InputLen(hook.Original)
		r.Original, _ = readAll(func(off, max uint64) (string, error) { return hook.ReadInput(hook.Original, off, max) }, m)
	}
	if n, err := hook.OutputLen(); err != nil {
		r.OutputErr = err.Error()
	} else {
		r.Output, _ = readAll(hook.ReadOutput, n)
	}
	var cursor *string
	for {
		page, err := hook.ReadMessages(cursor, 2)
		if err != nil {
			r.ConvErr = err.Error()
			break
		}
		r.Pages++
		r.Total = page.Total
		for _, m := range page.Messages {
			r.Roles = append(r.Roles, m.Role)
			r.Contents = append(r.Contents, m.Content)
		}
		if cursor = page.NextCursor; cursor == nil {
			break
		}
	}
	if event == "on-task-end" {
		resp, err := hook.Infer(hook.InferenceRequest{Messages: []hook.Message{{Role: "user", Content: "judge this"}}})
		if err != nil {
			r.InferErr = err.Error()
		} else {
			r.Infer, r.InferIn, r.Model = resp.Text, resp.InputTokens, resp.ModelUsed
		}
	}
	f, err := os.OpenFile("/reader.jsonl", os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return hook.Output{}, err
	}
	defer f.Close()
	line, _ := json.Marshal(r)
	_, err = f.Write(append(line, '\n'))
	return hook.None(), err
}

func init() {
	hook.Handle(hook.Handlers{
		TaskStart: func(hook.TaskStartEvent) (hook.Output, error) { return observe("on-task-start") },
		ToolCall: func(e hook.ToolEvent) (hook.Output, error) {
			if e.Outcome == nil {
				return hook.None(), nil
			}
			return observe("on-tool-call")
		},
		TaskEnd: func(hook.TaskEndEvent) (hook.Output, error) { return observe("on-task-end") },
	})
}

func main() {}
