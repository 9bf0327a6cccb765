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
	"path/filepath"
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

// RegistrySource resolves --registry by registry.Choose, the rule the gateway follows
// too: the flag, else $CAPSULE_REGISTRY, else the folder <DataDir>/capsule/registry.
func (e *Env) RegistrySource(flag string) (registry.Source, error) {
	return registry.Choose(flag, e.getenv, e.DataDir)
}

// OpenRegistry opens the registry --registry names. A remote one takes its credentials
// from the environment ($NEXUS_API_KEY; the Docker credential config) and keeps what
// it verifies in the gateway's default artifact cache, <DataDir>/capsule/cache/artifacts,
// so that an install warms the cache of a gateway sharing the data folder.
// Only commands that resolve artifacts (withCache) use the cache: publish and search
// never read it.
func (e *Env) OpenRegistry(flag string, withCache bool) (registry.Registry, registry.Source, error) {
	src, err := e.RegistrySource(flag)
	if err != nil {
		return nil, src, err
	}
	if !src.Remote() {
		return registry.NewLocal(src.Dir), src, nil
	}
	opts := registry.OpenOptions{Getenv: e.getenv}
	if withCache {
		if opts.Cache, err = registry.OpenCache(filepath.Join(e.DataDir, "capsule", "cache", "artifacts"), 0); err != nil {
			return nil, src, err
		}
	}
	reg, err := registry.Open(src, opts)
	return reg, src, err
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
