// Package cli holds the logic of the `caddy capsule …` subcommands (docs/operators.md
// "Commands"), free of Caddy and cobra so tests drive it directly; caddymodule only wires
// it to Caddy's CLI.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/registry"
)

// Exit codes of every subcommand.
const (
	ExitOK      = 0 // done
	ExitRefused = 1 // refused, or the task failed
	ExitUsage   = 2 // the command line was wrong
)

// Env is what a subcommand reads and writes besides its arguments.
type Env struct {
	Stdout, Stderr io.Writer
	// DataDir is Caddy's data folder, which holds the default registry.
	DataDir string
	// Terminal reports whether Stderr is a terminal, for the progress bar.
	Terminal bool

	lookup   func(string) string // reads the environment (CAPSULE_REGISTRY) in tests; nil: os.Getenv
	progress *progress           // the current command's progress display
}

func (e *Env) getenv(k string) string {
	if e.lookup != nil {
		return e.lookup(k)
	}
	return os.Getenv(k)
}

// Common is the flags every subcommand takes.
type Common struct {
	Registry string // --registry
	JSON     bool   // --json
}

// RegistryDir resolves --registry by registry.LocalDir, the rule the gateway follows
// too: the flag, else $CAPSULE_REGISTRY, else <DataDir>/capsule/registry.
func (e *Env) RegistryDir(flag string) (string, error) {
	return registry.LocalDir(flag, e.getenv, e.DataDir)
}

// fail reports err (text on stderr, or a JSON object on stdout) and returns ExitRefused.
func (e *Env) fail(c Common, err error) int {
	if c.JSON {
		e.writeJSON(map[string]any{"ok": false, "errors": errorObjects(err)})
	} else {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(e.Stderr, "error:", line)
		}
	}
	return ExitRefused
}

// warn prints warnings on stderr in both modes (JSON goes to stdout only).
func (e *Env) warn(ws []*errs.Error) {
	for _, w := range ws {
		fmt.Fprintln(e.Stderr, "warning:", w.Error())
	}
}

func (e *Env) writeJSON(v any) {
	enc := json.NewEncoder(e.Stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// errorObject is one refusal in --json output.
type errorObject struct {
	Code     string `json:"code,omitempty"`
	Message  string `json:"message"`
	Position string `json:"position,omitempty"`
	Path     string `json:"path,omitempty"`
	Fix      string `json:"fix,omitempty"`
}

func errorObjects(err error) []errorObject {
	var list errs.List
	if errors.As(err, &list) {
		out := make([]errorObject, 0, len(list))
		for _, e := range list {
			out = append(out, errorObject{e.Code, e.Error(), e.Pos, e.Path, e.Fix})
		}
		return out
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return []errorObject{{e.Code, err.Error(), e.Pos, e.Path, e.Fix}}
	}
	return []errorObject{{Message: err.Error()}}
}
