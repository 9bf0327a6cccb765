package runtime

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// ServeOptions configure a capsule the gateway hosts.
type ServeOptions struct {
	Registry  registry.Registry
	WorkRoot  string
	LookupEnv func(string) (string, bool)
	Progress  func(registry.Progress)
	Lock      string // verify against this lock instead of the one beside the manifest
	// Sinks receive every event of the capsule's session besides trace and metrics.
	Sinks []Sink
	// DNSUpstream and Stderr are as in RunOptions.
	DNSUpstream string
	Stderr      io.Writer
	// NetLogger receives the policy proxy's log (denials); nil discards it.
	NetLogger *slog.Logger
}

// Hosted is a staged capsule served by the gateway: one long-lived session whose tasks
// arrive over A2A and run one at a time, since they share the session's workdir.
type Hosted struct {
	staged  *Staged
	sess    *session
	metrics *wasm.Metrics

	mu      sync.Mutex // held while a task runs
	closed  bool
	retired atomic.Bool // takes no new task; the running one finishes
}

// Serve stages m and opens its session for the gateway; tasks then run through RunTask
// until Close.
func (r *Runtime) Serve(ctx context.Context, m *manifest.Manifest, opts ServeOptions) (*Hosted, error) {
	staged, err := r.Stage(ctx, m, StageOptions{Registry: opts.Registry, Progress: opts.Progress, Lock: opts.Lock})
	if err != nil {
		return nil, err
	}
	sess, err := r.openSession(staged, sessionOptions{WorkRoot: opts.WorkRoot, LookupEnv: opts.LookupEnv, Sinks: opts.Sinks,
		DNSUpstream: opts.DNSUpstream, Stderr: opts.Stderr, NetLogger: opts.NetLogger})
	if err != nil {
		return nil, err
	}
	r.engine.Metrics().Staged(staged.modules())
	return &Hosted{staged: staged, sess: sess, metrics: r.engine.Metrics()}, nil
}

// Staged returns the staged capsule.
func (h *Hosted) Staged() *Staged { return h.staged }

// SessionID returns the id of the capsule's session (its records folder's name).
func (h *Hosted) SessionID() string { return h.sess.id }

// Layout returns where the session's workdir and records are.
func (h *Hosted) Layout() *Layout { return h.sess.layout }

// RunTask runs one task to its end. A canceled ctx stops the running guest and ends the
// task canceled. A task that arrives while another runs waits for it: admission (single,
// queue) is the A2A layer's job.
func (h *Hosted) RunTask(ctx context.Context, req TaskRequest) TaskOutcome {
	out, ok := h.TryRunTask(ctx, req)
	if !ok {
		return TaskOutcome{TaskID: req.TaskID, State: StateFailed, Result: "error: the capsule was unloaded"}
	}
	return out
}

// TryRunTask is RunTask that reports false, running nothing, when the capsule was closed
// before the task could start (a reload replaced it), so the caller can run the task on
// the capsule that replaced it.
func (h *Hosted) TryRunTask(ctx context.Context, req TaskRequest) (TaskOutcome, bool) {
	if h.retired.Load() {
		return TaskOutcome{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.retired.Load() {
		return TaskOutcome{}, false
	}
	if req.Source == "" {
		req.Source = "a2a"
	}
	return h.sess.run(ctx, req), true
}

// Retire makes the capsule take no new task from now on (TryRunTask reports false) while
// the task running on it, if any, goes on: a reload replaced it.
func (h *Hosted) Retire() { h.retired.Store(true) }

// Close waits for the running task, then ends the session (session_end) and closes its
// files; later tasks fail.
func (h *Hosted) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.metrics.Unstaged(h.staged.modules())
	return h.sess.end(StateCompleted)
}
