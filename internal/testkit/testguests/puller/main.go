//go:build wasip1

// Command puller is a script capsule for the artifact-manager tests: it reads its task
// text (task.md) as lines of commands, runs each in order through
// murmur:artifact-manager/manage (and murmur:tool-registry/invoke), and writes one line
// per command to out/result.txt: "ok: " and the value as compact JSON, or "error: " and
// the host's error string (its line breaks as spaces). Blank lines are skipped.
//
//	list                  artifacts.List
//	describe NAME         artifacts.Describe
//	search QUERY          artifacts.Search (QUERY: the rest of the line)
//	pull NAME VERSION     artifacts.Pull
//	remove NAME           artifacts.Remove
//	diagnostics           artifacts.Diagnostics
//	invoke NAME INPUT     guest.Invoke with data INPUT (the rest of the line); its value
//	                      is {"status","summary","data"}
//
// A command it does not know, or one with the wrong arguments, is an "error: puller: …"
// line. Paths are relative, so the guest finds them as a core module (preopen "/") and
// as a component (preopen ".") alike.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/artifacts"
	"github.com/capsulegate/capsulegate/wit/guest/capsule"
)

func init() {
	capsule.Handle(func() error {
		task, err := os.ReadFile("task.md")
		if err != nil {
			return err
		}
		var out strings.Builder
		for line := range strings.Lines(string(task)) {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			v, err := run(line)
			if err != nil {
				out.WriteString("error: " + strings.Join(strings.Fields(strings.ReplaceAll(err.Error(), "\n", " ")), " ") + "\n")
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			out.WriteString("ok: " + string(b) + "\n")
		}
		if err := os.MkdirAll("out", 0o755); err != nil {
			return err
		}
		return os.WriteFile("out/result.txt", []byte(out.String()), 0o644)
	})
}

// invoked is the value of an invoke command.
type invoked struct {
	Status  string  `json:"status"`
	Summary *string `json:"summary"`
	Data    *string `json:"data"`
}

func run(line string) (any, error) {
	cmd, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	args := strings.Fields(rest)
	want := func(n int, usage string) error {
		if len(args) != n {
			return fmt.Errorf("puller: usage: %s", usage)
		}
		return nil
	}
	switch cmd {
	case "list":
		if err := want(0, "list"); err != nil {
			return nil, err
		}
		list, err := artifacts.List()
		return nonNil(list), err
	case "describe":
		if err := want(1, "describe NAME"); err != nil {
			return nil, err
		}
		return artifacts.Describe(args[0])
	case "search":
		list, err := artifacts.Search(rest)
		return nonNil(list), err
	case "pull":
		if err := want(2, "pull NAME VERSION"); err != nil {
			return nil, err
		}
		return artifacts.Pull(args[0], args[1])
	case "remove":
		if err := want(1, "remove NAME"); err != nil {
			return nil, err
		}
		return artifacts.Remove(args[0])
	case "diagnostics":
		if err := want(0, "diagnostics"); err != nil {
			return nil, err
		}
		st, err := artifacts.Diagnostics()
		st.Installed = nonNil(st.Installed)
		return st, err
	case "invoke":
		name, input, _ := strings.Cut(rest, " ")
		if name == "" {
			return nil, fmt.Errorf("puller: usage: invoke NAME INPUT")
		}
		res, err := guest.Invoke(name, guest.ToolInput{Data: guest.Some(input)})
		if err != nil {
			return nil, err
		}
		return invoked{Status: res.Status.String(), Summary: res.Summary, Data: res.Data}, nil
	}
	return nil, fmt.Errorf("puller: unknown command %q", cmd)
}

func nonNil(s []artifacts.Summary) []artifacts.Summary {
	if s == nil {
		return []artifacts.Summary{}
	}
	return s
}

func main() {}
