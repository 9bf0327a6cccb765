//go:build wasip1

// Command hostile-link is a tool guest that plants links of its own to escape its
// workdir (hostile-fs only follows links planted for it). Its input data is
// "<op> <a> <b>":
//
//	symlink T N  os.Symlink(T, N), then read N
//	link A B     os.Link(A, B), then read B
//
// Success is status passed with what was read in data; failure is status failed with
// the error in summary. It is a guest of its own because path_symlink and path_link
// become wasi:filesystem functions the component host does not serve, so hostile-fs
// stays usable as a component.
package main

import (
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/tool"
)

func run(op, a, b string) (string, error) {
	var err error
	switch op {
	case "symlink":
		err = os.Symlink(a, b)
	case "link":
		err = os.Link(a, b)
	default:
		return "", os.ErrInvalid
	}
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(b)
	return string(data), err
}

func init() {
	tool.Handle(func(in tool.Input) tool.Result {
		f := strings.Fields(guest.Value(in.Data))
		if len(f) != 3 {
			return tool.Result{Status: tool.Passed, Summary: guest.Some("ok")}
		}
		data, err := run(f[0], f[1], f[2])
		if err != nil {
			return tool.Result{Status: tool.Failed, Summary: guest.Some(err.Error())}
		}
		return tool.Result{Status: tool.Passed, Data: guest.Some(data)}
	})
}

func main() {}
