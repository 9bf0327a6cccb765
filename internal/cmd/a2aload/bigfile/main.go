//go:build wasip1

// Command bigfile is the script capsule of bigfile.sh: the wordcount capsule's work (read
// the task, ask the wordcount tool, write out/result.txt), and a 1 MiB file per task
// beside it, out/big.bin, different in every task, as a capsule that produces files does.
package main

import (
	"bytes"
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
		// The task's text, repeated to 1 MiB: the bytes change with every task.
		big := bytes.Repeat(append(task, '\n'), 1<<20/(len(task)+1)+1)[:1<<20]
		if err := os.WriteFile("/out/big.bin", big, 0o644); err != nil {
			return fmt.Errorf("writing out/big.bin: %w", err)
		}
		report := fmt.Sprintf("The task has %s; out/big.bin holds %d bytes\n", guest.Value(res.Summary), len(big))
		return os.WriteFile("/out/result.txt", []byte(report), 0o644)
	})
}

func main() {}
