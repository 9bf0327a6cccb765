//go:build linux

package shell_test

import (
	"context"
	"fmt"
	"os"

	"github.com/capsulegate/capsulegate/runtime/shell"
)

// A session's sandbox: created once, used for every shell and native tool call, closed
// at the end. The binary must let the wrapper run first: this package's init does it.
func Example() {
	work, _ := os.MkdirTemp("", "work-")
	records, _ := os.MkdirTemp("", "records-")
	defer os.RemoveAll(work)
	defer os.RemoveAll(records)

	sb, err := shell.New(shell.Config{
		Workdir: work,
		Records: records,
		Env:     []string{"LANG=C.UTF-8"},
		Allow:   []string{"bash"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close()
	for _, w := range sb.Warnings() {
		fmt.Fprintln(os.Stderr, w) // W-SEC-001 and friends, when the host is weaker
	}
	res, err := sb.RunShell(context.Background(), "bash", []byte(`{"command": "echo hello > greeting.txt && cat greeting.txt"}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Text)
	// Output:
	// $ echo hello > greeting.txt && cat greeting.txt
	// Exit code: 0
	// Stdout:
	// hello
	// Stderr:
}
