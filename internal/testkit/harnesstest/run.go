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

// Running is a harness started by Start.
type Running struct {
	// Lines delivers stdout line by line; it is closed when stdout ends.
	Lines <-chan string
	cmd   *exec.Cmd
	errb  *bytes.Buffer
	done  chan struct{}
}

// Start starts bin as Run does and returns at once; t's end kills it if it still runs.
func Start(t testing.TB, dir, bin string, args, env []string) *Running {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
	cmd.Stdin = strings.NewReader("")
	errb := new(bytes.Buffer)
	cmd.Stderr = errb
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	r := &Running{Lines: lines, cmd: cmd, errb: errb, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer close(lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		cancel()
		r.cmd.Wait()
	})
	return r
}

// Signal sends sig to the harness.
func (r *Running) Signal(sig os.Signal) error { return r.cmd.Process.Signal(sig) }

// Wait reads the rest of stdout (lines not yet taken from Lines) and waits for the exit.
func (r *Running) Wait() Result {
	var rest []string
	for l := range r.Lines {
		rest = append(rest, l)
	}
	<-r.done
	err := r.cmd.Wait()
	return Result{Lines: rest, Stderr: r.errb.String(), Err: err}
}
