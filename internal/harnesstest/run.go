package harnesstest

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Result is what one run of a harness printed.
type Result struct {
	Lines  []string // stdout, line by line
	Stderr string
	Err    error // the exit error, nil for status 0
}

// Run runs bin with args in dir, with an environment of PATH (so a node-script CLI
// finds node) plus env, for at most two minutes, and returns what it printed.
func Run(t testing.TB, dir, bin string, args, env []string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader("")
	err := cmd.Run()
	var lines []string
	sc := bufio.NewScanner(&out)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return Result{Lines: lines, Stderr: errb.String(), Err: err}
}
