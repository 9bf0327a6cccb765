package runtime

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// RunOptions configure a one-shot run (caddy capsule run).
type RunOptions struct {
	Session  SessionConfig
	Registry registry.Registry
	Progress func(registry.Progress)
	Workdir  string // optional accessible workdir replacing <session>/work
	Task     string // the task text, written to work/task.md
	// Pulls is the trust policy of the run's runtime pulls (nil: none allowed); their
	// pins last as long as the run.
	Pulls *PullPolicy
}

// RunResult is the outcome of a one-shot run; its fields are the --json output.
type RunResult struct {
	SessionID string `json:"session_id"`
	Capsule   string `json:"capsule"`
	Status    string `json:"status"`
	Result    string `json:"result"`
	Workdir   string `json:"workdir"`
	Records   string `json:"records"`
}

// RunOnce stages the capsule, creates a session, runs its task to the end and returns
// the outcome. A refusal before the session exists is returned as an error and leaves no
// workdir; a task that fails still returns a result, with Status failed.
func (r *Runtime) RunOnce(ctx context.Context, m *manifest.Manifest, opts RunOptions) (*RunResult, error) {
	staged, err := r.Stage(ctx, m, StageOptions{Registry: opts.Registry, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	staged.artifacts = newArtifactManager(r, staged, opts.Pulls, nil)
	defer staged.artifacts.close()
	if opts.Session.Stderr != nil {
		for _, w := range staged.Warnings {
			fmt.Fprintln(opts.Session.Stderr, "warning:", w.Error())
		}
	}
	sess, err := r.openSession(staged, opts.Session, sessionPlace{workdir: opts.Workdir})
	if err != nil {
		return nil, err
	}
	out := sess.run(ctx, TaskRequest{Source: "cli", Text: opts.Task})
	if err := sess.end(out.State); err != nil {
		return nil, err // a trace that cannot be written fails the session loudly
	}
	return &RunResult{SessionID: sess.id, Capsule: m.Name, Status: out.State, Result: out.Result,
		Workdir: sess.layout.Work, Records: sess.layout.Root}, nil
}
