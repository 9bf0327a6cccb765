//go:build wasip1

// Command messenger is a script capsule for the peer tests: it reads its task text
// (task.md) as lines, each "send URL MESSAGE-ID TEXT…", sends each through
// murmur:message/send in order, and writes one line per message to out/result.txt:
// "ok: TASK-ID STATE: ANSWER" (the answer the runtime saved under peers/TASK-ID/) or
// "error: " and the host's error string. Blank lines are skipped.
package main

import (
	"os"
	"path"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/capsule"
	"github.com/capsulegate/capsulegate/wit/guest/message"
)

func init() {
	capsule.Handle(func() error {
		task, err := os.ReadFile("task.md")
		if err != nil {
			return err
		}
		var out strings.Builder
		for line := range strings.Lines(string(task)) {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if len(f) < 4 || f[0] != "send" {
				out.WriteString("error: messenger: want send URL MESSAGE-ID TEXT\n")
				continue
			}
			res, err := message.Send(f[1], message.Message{MessageID: f[2], Text: strings.Join(f[3:], " ")})
			if err != nil {
				out.WriteString("error: " + strings.Join(strings.Fields(err.Error()), " ") + "\n")
				continue
			}
			answer, _ := os.ReadFile(path.Join("peers", res.TaskID, "answer.txt"))
			out.WriteString("ok: " + res.TaskID + " " + res.State + ": " + strings.Join(strings.Fields(string(answer)), " ") + "\n")
		}
		if err := os.MkdirAll("out", 0o755); err != nil {
			return err
		}
		return os.WriteFile("out/result.txt", []byte(out.String()), 0o644)
	})
}

func main() {}
