package runtime

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// wasmHook is the HookGuest of a staged hook module: each call runs in a fresh instance
// with the hook's grants, its output in the session's logs and its imports served by the
// session (hookscope.go).
type wasmHook struct {
	engine *wasm.Engine
	mod    *wasm.Module
	grants wasm.Grants
	// sess serves the hook's imports and holds its logs; entry grants it what it reads.
	sess  *session
	entry *manifest.HookGrants
}

// Call lowers record for fn, calls the module and returns its answer; the guest's
// err(string) is an error. A function the module does not export answers none.
func (w *wasmHook) Call(ctx context.Context, fn string, record any) (HookOutput, error) {
	ans, err := w.answer(ctx, fn, record)
	return HookOutput{Case: ans.Case, Text: ans.Text}, err
}

// answer is Call's raw answer, with a write-manifests answer's manifests.
func (w *wasmHook) answer(ctx context.Context, fn string, record any) (murmur.HookAnswer, error) {
	if murmur.HookExport(w.mod, fn) == "" {
		return murmur.HookAnswer{Case: OutputNone}, nil
	}
	v, err := hookValue(record)
	if err != nil {
		return murmur.HookAnswer{}, fmt.Errorf("%s: %w", fn, err)
	}
	g := w.grants
	imports := &murmur.Imports{Who: w.mod.Artifact}
	if w.sess != nil { // a hook outside a session (at stage, a test's) has no logs and imports nothing
		g.Stdout, g.Stderr = w.sess.log(w.mod.Artifact+".stdout.log"), w.sess.log(w.mod.Artifact+".stderr.log")
		imports.Hook = w.sess.hookImports(w.entry)
	}
	ans, err := murmur.CallHook(murmur.WithImports(ctx, imports), w.engine, w.mod, g, fn, v)
	switch {
	case err != nil:
		return murmur.HookAnswer{}, err
	case ans.Failed:
		return murmur.HookAnswer{}, fmt.Errorf("hook %s answered err: %s", w.mod.Artifact, ans.Text)
	}
	return ans, nil
}

// hookValue is the generic value (wit/abi) of a murmur:hook record.
func hookValue(record any) (any, error) {
	opt := func(s *string) abi.Option {
		if s == nil {
			return abi.Option{}
		}
		return abi.Option{Some: true, Value: *s}
	}
	switch r := record.(type) {
	case StageRecord:
		allow := make([]any, len(r.ShellAllow))
		for i, b := range r.ShellAllow {
			allow[i] = b
		}
		return []any{allow}, nil
	case SessionContextRecord:
		caps := make([]any, len(r.Capabilities))
		for i, c := range r.Capabilities {
			caps[i] = c
		}
		return []any{r.CapsuleName, r.CapsuleVersion, r.SessionID, r.Model, caps}, nil
	case TaskStartRecord:
		return []any{r.TaskID, r.ContextID, r.Source, r.InputBytes, r.BudgetTokens, r.ContextWindow, r.PriorTokens}, nil
	case InferenceRecord:
		return []any{r.Turn, r.InputTokens, r.OutputTokens, r.Decision, opt(r.ToolName), abi.Option{}, abi.Option{}, abi.Option{}}, nil
	case ToolEventRecord:
		o := abi.Option{}
		if r.Outcome != nil {
			o = abi.Option{Some: true, Value: []any{r.Outcome.OutputBytes, r.Outcome.DurationMS, r.Outcome.Status}}
		}
		return []any{r.Turn, r.ToolName, r.InputBytes, r.Input, o}, nil
	case ShellEventRecord:
		argv := make([]any, len(r.Argv))
		for i, a := range r.Argv {
			argv[i] = a
		}
		o := abi.Option{}
		if c := r.Outcome; c != nil {
			o = abi.Option{Some: true, Value: []any{c.ExitCode, c.Stdout, c.Stderr, c.StdoutBytes, c.StderrBytes, c.DurationMS}}
		}
		return []any{r.Turn, r.Binary, r.Command, argv, opt(r.Script), opt(r.Recipe), o}, nil
	case TaskEndRecord:
		return []any{r.TaskID, r.ExitStatus}, nil
	case CompactionRecord:
		msgs := make([]any, len(r.Messages))
		for i, m := range r.Messages {
			msgs[i] = []any{m.Role, m.Content, abi.Option{}, abi.Option{}, abi.Option{}}
		}
		return []any{msgs, r.SessionTokens, r.Threshold, opt(r.Model), opt(r.SystemPrompt)}, nil
	case SessionEndRecord:
		return []any{r.TotalTurns, r.TotalInputTokens, r.TotalOutputTokens, r.TotalToolCalls, r.TotalShellCalls, r.DurationMS, r.ExitStatus}, nil
	}
	return nil, fmt.Errorf("%T records are not lowered to a wasm hook by this release", record)
}

// hookSink builds the sink running s's staged hooks in manifest order for sess, calls
// bounded by ctx, or nil when it has none. Hooks are granted nothing by default — no
// network, no environment — but the session's out/ folder as their root, where an audit
// hook keeps its records; a hook's entry in the manifest may grant it variables of the
// capsule's env.allow, reading the task and conversation, and lower limits
// (docs/reference/manifest.md "Hook grants"). Each call is bounded by the hook's
// deadline.
func (r *Runtime) hookSink(ctx context.Context, s *Staged, gfs *guestfs.FS, sess *session, lookup func(string) (string, bool)) *HookSink {
	m := s.Manifest
	var hooks []*Hook
	for _, a := range s.Artifacts {
		mod := s.Hooks[a.Name]
		if a.Role != manifest.RoleHook || mod == nil || a.Archive == nil {
			continue
		}
		ref := m.Artifact(a.Name)
		var entry *manifest.HookGrants
		var env []string
		if ref != nil && ref.Capabilities != nil {
			entry = ref.Capabilities
			for _, n := range entry.Env.Allow {
				if v, ok := lookup(n); ok {
					env = append(env, n+"="+v)
				}
			}
		}
		d := m.HookDeadline(ref)
		g := wasm.Grants{FS: gfs, Env: env, MemoryBytes: m.HookMemory(ref), Deadline: d, Snapshot: snapshotPolicy(ref), Meter: &sess.meter}
		hooks = append(hooks, &Hook{Name: a.Name, Manifest: a.Archive.Manifest(), Deadline: d,
			Guest: &wasmHook{engine: r.engine, mod: mod, grants: g, sess: sess, entry: entry}})
	}
	if len(hooks) == 0 {
		return nil
	}
	return NewHookSink(ctx, hooks...)
}
