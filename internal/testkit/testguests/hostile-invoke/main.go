//go:build wasip1

// Command hostile-invoke is a script capsule guest that abuses murmur:tool-registry/invoke.
// $HOSTILE_INVOKE picks the abuse:
//
//	descend  a Go recursion 1,000 frames deep, each frame invoking the tool "echo" with
//	         its depth and checking the answer; writes "descended N" to /out/result.txt
//	recurse  invokes the tool "self" with $HOSTILE_DEPTH+1, meaning to recurse 1,000
//	         deep when the host re-enters this capsule for "self"; every level appends
//	         "enter N" to /out/levels.txt, and a level whose invoke fails appends
//	         "N: err: <message>" and returns normally (no trap)
package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

const target = 1000

func descend(n int) error {
	if n == target {
		return nil
	}
	want := strconv.Itoa(n)
	res, err := guest.Invoke("echo", guest.ToolInput{Data: guest.Some(want)})
	if err != nil {
		return fmt.Errorf("invoke %d: %w", n, err)
	}
	if got := guest.Value(res.Data); got != want {
		return fmt.Errorf("invoke %d: echo answered %q", n, got)
	}
	return descend(n + 1)
}

func appendLine(line string) error {
	if err := os.MkdirAll("/out", 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile("/out/levels.txt", os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func recurse() error {
	depth, _ := strconv.Atoi(os.Getenv("HOSTILE_DEPTH"))
	if err := appendLine("enter " + strconv.Itoa(depth)); err != nil {
		return err
	}
	if depth+1 >= target {
		return nil
	}
	if _, err := guest.Invoke("self", guest.ToolInput{Data: guest.Some(strconv.Itoa(depth + 1))}); err != nil {
		return appendLine(strconv.Itoa(depth) + ": err: " + err.Error())
	}
	return nil
}

func init() {
	capsule.Handle(func() error {
		switch os.Getenv("HOSTILE_INVOKE") {
		case "descend":
			if err := descend(0); err != nil {
				return err
			}
			if err := os.MkdirAll("/out", 0o755); err != nil {
				return err
			}
			return os.WriteFile("/out/result.txt", []byte("descended "+strconv.Itoa(target)), 0o644)
		case "recurse":
			return recurse()
		}
		return nil
	})
}

func main() {}
