package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/otlpexport"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

// RunFlags are `caddy capsule run`'s own flags.
type RunFlags struct {
	Task     string // text, or @file
	Workdir  string
	WorkRoot string // where sessions and their records live
	CacheDir string // compiled-module cache
}

// Run runs one task of a capsule to the end; it exits 0 only if the task completed
// (docs/operators.md "Running a capsule once").
func Run(ctx context.Context, e *Env, c Common, manifestPath string, f RunFlags) int {
	m, opts, err := e.prepare(c, manifestPath)
	if err != nil {
		return e.fail(c, err)
	}
	task := f.Task
	if file, ok := strings.CutPrefix(task, "@"); ok {
		data, err := os.ReadFile(file)
		if err != nil {
			return e.fail(c, errs.Wrap(err, CodeTaskFile, "runtime", "cannot read the task file "+file, "check the path after @"))
		}
		task = string(data)
	}
	rt, err := runtime.New(ctx, wasm.WithCacheDir(f.CacheDir))
	if err != nil {
		return e.fail(c, err)
	}
	defer rt.Close(context.WithoutCancel(ctx))
	session := runtime.SessionConfig{WorkRoot: f.WorkRoot, Stderr: e.Stderr, Sinks: []runtime.Sink{progressSink{e.Stderr}}}
	if ep := m.Observability.OtelEndpoint; ep != "" {
		// The run's spans go where the manifest says, flushed before the command ends.
		tp, err := otlpexport.NewProvider(otlpexport.Spec{Endpoint: ep, Sampling: 1, Instance: "caddy-capsule-run"})
		if err != nil {
			return e.fail(c, errs.Wrap(err, CodeTaskFile, "runtime", "cannot export traces to observability.otel_endpoint "+ep, "check the endpoint"))
		}
		defer func() {
			if err := otlpexport.Shutdown(tp); err != nil {
				fmt.Fprintln(e.Stderr, "warning: the run's spans could not all be exported to", ep+":", err)
			}
		}()
		session.Tracer = tp
	}
	res, err := rt.RunOnce(ctx, m, runtime.RunOptions{Registry: opts.Registry, Progress: opts.Progress, Workdir: f.Workdir, Task: task,
		Session: session})
	e.progress.done()
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		e.writeJSON(res)
	} else {
		fmt.Fprintf(e.Stderr, "%s %s: session %s %s (records in %s)\n", m.Name, m.Version, res.SessionID, res.Status, res.Records)
		fmt.Fprintln(e.Stdout, res.Result)
	}
	if res.Status != runtime.StateCompleted {
		return ExitRefused
	}
	return ExitOK
}

// progressSink prints one stderr line per model turn, tool call, shell command and
// denial, so a person watching a run sees it move; the trace has the full record.
type progressSink struct{ w io.Writer }

// Event prints the events a person follows.
func (p progressSink) Event(ev *runtime.Event) error {
	switch d := ev.Data.(type) {
	case runtime.Inference:
		line := fmt.Sprintf("turn %d: %s (%d ms)", d.Turn, d.StopReason, d.DurationMS)
		if len(d.Tools) > 0 {
			line += " → " + strings.Join(d.Tools, ", ")
		}
		if d.Error != "" {
			line += ": " + d.Error
		}
		fmt.Fprintln(p.w, line)
	case runtime.ToolCall:
		fmt.Fprintf(p.w, "  %s %s: %s (%d ms)\n", d.Kind, d.ToolName, d.Status, d.DurationMS)
	case runtime.ShellRun:
		fmt.Fprintf(p.w, "  $ %s (exit %d)\n", d.Command, d.ExitCode)
	case runtime.NetworkDenied:
		fmt.Fprintf(p.w, "  network denied: %s → %s:%d\n", d.Who, d.Host, d.Port)
	}
	return nil
}

// Doctor reports on a process capsule's harness: found, version, login state, the
// variables it needs; it exits 0 only when nothing stands in the way of a run.
func Doctor(ctx context.Context, e *Env, c Common, manifestPath, cacheDir, store string) int {
	m, opts, err := e.prepare(c, manifestPath)
	if err != nil {
		return e.fail(c, err)
	}
	var pins []taskstore.RuntimePin
	if store != "" {
		if pins, err = runtimePins(ctx, e, store, m.Name); err != nil {
			return e.fail(c, err)
		}
		if !m.IsProcess() {
			// A capsule without a harness: the pins are the whole report.
			if c.JSON {
				e.writeJSON(map[string]any{"ok": true, "runtime_pins": pinsJSON(pins)})
			} else {
				printPins(e, m.Name, pins)
			}
			return ExitOK
		}
	}
	rt, err := runtime.New(ctx, wasm.WithCacheDir(cacheDir))
	if err != nil {
		return e.fail(c, err)
	}
	defer rt.Close(context.WithoutCancel(ctx))
	rep, err := rt.Doctor(ctx, m, runtime.StageOptions{Registry: opts.Registry, Progress: opts.Progress}, nil)
	e.progress.done()
	if err != nil {
		return e.fail(c, err)
	}
	if c.JSON {
		out := map[string]any{"ok": len(rep.Problems) == 0, "harness": rep}
		if store != "" {
			out["runtime_pins"] = pinsJSON(pins)
		}
		e.writeJSON(out)
	} else {
		if store != "" {
			printPins(e, m.Name, pins)
		}
		found := "not found"
		if rep.Path != "" {
			found = rep.Path
		}
		fmt.Fprintf(e.Stdout, "harness %s (driver %s)\n  binary   %s: %s\n", rep.Harness, rep.Driver, rep.Binary, found)
		if rep.Version != "" {
			tested := "not one the driver was tested with"
			if rep.Tested {
				tested = "tested"
			}
			fmt.Fprintf(e.Stdout, "  version  %s (%s: %s)\n", rep.Version, tested, strings.Join(rep.TestedVersions, ", "))
		}
		fmt.Fprintf(e.Stdout, "  login    %s: %s\n", rep.Login, rep.LoginDetail)
		for _, v := range rep.RequiredEnv {
			state := "set"
			if !v.Present {
				state = "NOT SET"
			}
			fmt.Fprintf(e.Stdout, "  env      %s %s\n", v.Name, state)
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(e.Stdout, "problem: %s\n", p)
		}
	}
	if len(rep.Problems) > 0 {
		return ExitRefused
	}
	return ExitOK
}

// runtimePins reads the capsule's runtime pins from the task store named by store.
func runtimePins(ctx context.Context, e *Env, store, capsule string) ([]taskstore.RuntimePin, error) {
	dsn, isPG, err := database(e, store)
	if err != nil {
		return nil, err
	}
	if isPG {
		db, err := pgstore.Open(ctx, dsn, pgstore.Options{ReadOnly: true})
		if err != nil {
			return nil, err
		}
		defer db.Close()
		return db.RuntimePins(ctx, capsule)
	}
	db, err := taskdb.Open(dsn, taskdb.Options{ReadOnly: true, LockTimeout: storeLockWait})
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return db.RuntimePins(ctx, capsule)
}

func pinsJSON(pins []taskstore.RuntimePin) []map[string]any {
	out := []map[string]any{}
	for _, p := range pins {
		out = append(out, map[string]any{"name": p.Name, "version": p.Version, "sha256": p.SHA256, "registry": p.Registry,
			"origin": p.Origin, "pulled": p.Pulled, "by": p.By})
	}
	return out
}

// printPins writes the runtime pins as doctor reports them.
func printPins(e *Env, capsule string, pins []taskstore.RuntimePin) {
	if len(pins) == 0 {
		fmt.Fprintf(e.Stdout, "runtime pins of %s: none\n", capsule)
		return
	}
	fmt.Fprintf(e.Stdout, "runtime pins of %s (pulled by the capsule while it ran; never in murmur.lock):\n", capsule)
	for _, p := range pins {
		fmt.Fprintf(e.Stdout, "  %s %s  origin: %s  sha256:%s  from %s  pulled %s", p.Name, p.Version, p.Origin, p.SHA256, p.Registry,
			p.Pulled.UTC().Format(time.RFC3339))
		if p.By != "" {
			fmt.Fprintf(e.Stdout, " by task %s", p.By)
		}
		fmt.Fprintln(e.Stdout)
	}
}

// Explain prints the capsule's effective grants as it would be staged on this host
// (runtime.Explain, the object session_start records as grants): it stages the capsule
// (verifying its lock), detects the sandbox tier when the capsule has shell, native or
// harness tools, and runs nothing.
func Explain(ctx context.Context, e *Env, c Common, manifestPath, cacheDir string) int {
	m, opts, err := e.prepare(c, manifestPath)
	if err != nil {
		return e.fail(c, err)
	}
	rt, err := runtime.New(ctx, wasm.WithCacheDir(cacheDir))
	if err != nil {
		return e.fail(c, err)
	}
	defer rt.Close(context.WithoutCancel(ctx))
	staged, err := rt.Stage(ctx, m, runtime.StageOptions{Registry: opts.Registry, Progress: opts.Progress})
	e.progress.done()
	if err != nil {
		return e.fail(c, err)
	}
	g := runtime.Explain(staged, runtime.Host{})
	if g.Shell != nil {
		g.Shell.OnHost(shell.DetectTier()) // detected only for a capsule that has a sandbox
	}
	if c.JSON {
		e.writeJSON(map[string]any{"ok": true, "capsule": m.Name, "version": m.Version, "grants": g})
		return ExitOK
	}
	w := e.Stdout
	fmt.Fprintf(w, "%s %s: effective grants on this host\n\nfile system (what a guest sees)\n", m.Name, m.Version)
	for _, p := range g.Filesystem {
		fmt.Fprintf(w, "  %-11s %s (%s)\n", p.Path, p.What, p.Access)
	}
	fmt.Fprintf(w, "\nnetwork (capabilities.network.allow)\n")
	if len(g.Reach) == 0 {
		fmt.Fprintf(w, "  nothing\n")
	}
	for _, r := range g.Reach {
		fmt.Fprintf(w, "  %-30s %s to %s, port %s: %s\n", r.Rule, r.Scheme, r.Host, r.Port, r.Addresses)
	}
	fmt.Fprintf(w, "  refused whatever a name resolves to: %s\n  %s\n", strings.Join(g.Refused, ", "), g.Narrowing)
	fmt.Fprintf(w, "\nenvironment: %s\n", listOrNone(g.Env))
	fmt.Fprintf(w, "\nartifacts\n")
	for _, a := range g.Artifacts {
		fmt.Fprintf(w, "  %-20s %-7s runs as %s; env %s; network %s; files %s", a.Name, a.Role, a.Runs, listOrNone(a.Env), listOrNone(a.Network), a.Filesystem)
		if a.MemoryBytes > 0 {
			fmt.Fprintf(w, "; %d bytes, %gs a call", a.MemoryBytes, a.DeadlineSeconds)
		}
		fmt.Fprintln(w)
	}
	if sh := g.Shell; sh != nil {
		fmt.Fprintf(w, "\nshell sandbox: binaries %s; this host gives tier %s", listOrNone(sh.Binaries), sh.Tier)
		if sh.MinTier != "" {
			fmt.Fprintf(w, " (the capsule asks for at least %s)", sh.MinTier)
		}
		fmt.Fprintln(w)
		for _, r := range sh.Reasons {
			fmt.Fprintf(w, "  why not stronger: %s\n", r)
		}
		for _, u := range sh.Unprotected {
			fmt.Fprintf(w, "  NOT PROTECTED HERE: %s\n", u)
		}
	}
	if l := g.Limits; l != nil {
		fmt.Fprintf(w, "\nlimits: %d bytes and %gs per tool call", g.MemoryBytes, g.DeadlineSeconds)
		if l.MaxTurns > 0 {
			fmt.Fprintf(w, "; max turns %d", l.MaxTurns)
		}
		fmt.Fprintf(w, "; peer depth %d, peer calls %d\n", l.PeerDepth, l.PeerCalls)
	}
	for _, h := range g.Hooks {
		fmt.Fprintf(w, "hook %s: answers %s (%s); its answer can %s; reads %s; env %s\n", h.Name, h.Binding, h.Mode, listOrNone(h.Powers), listOrNone(h.Reads), listOrNone(h.Env))
	}
	for _, p := range g.Peers {
		state := "granted by network.allow"
		if !p.Granted {
			state = "NOT granted by network.allow"
		}
		fmt.Fprintf(w, "peer %s: %s (%s)\n", p.Name, p.URL, state)
	}
	return ExitOK
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
