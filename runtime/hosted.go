package runtime

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Defaults of a hosted capsule's contexts (docs/architecture.md "Tasks and contexts").
const (
	DefaultContextIdle = 15 * time.Minute
	DefaultMaxContexts = 1000
)

// ServeOptions configure a capsule the gateway hosts.
type ServeOptions struct {
	Session  SessionConfig // for every context's session
	Registry registry.Registry
	Lock     string // verify against this lock instead of the one beside the manifest
	// ContextIdle ends a context's session after it ran no task for this long
	// (0: DefaultContextIdle).
	ContextIdle time.Duration
	// MaxContexts bounds the contexts kept open; beyond it the least recently used idle
	// one is ended (0: DefaultMaxContexts).
	MaxContexts int
	// Pulls is the operator's trust policy for the capsule's runtime pulls (nil: none
	// allowed); Pins keeps their pins (nil: in memory; SetPins gives the task store).
	Pulls *PullPolicy
	Pins  taskstore.Pins
}

// Hosted is a staged capsule served by the gateway. Its state lives in contexts: each
// context (the A2A contextId) is a Murmur session of its own — workdir, records, trace,
// subprocess sandbox — opened by its first task and ended when idle, evicted or when the
// capsule closes. Tasks of one context run in order; contexts run side by side.
type Hosted struct {
	rt      *Runtime
	staged  *Staged
	opts    ServeOptions
	metrics *wasm.Metrics
	fetch   fetcher // FetchFile's client

	mu       sync.Mutex
	contexts map[string]*hostedContext
	idle     *list.List // contexts running no task, least recently used first
	closed   bool
	retired  atomic.Bool // takes no new task; the running ones finish
}

// hostedContext is one context's session and who is using it.
type hostedContext struct {
	id    string // the context id, as the session and its trace name it
	key   string // its key in Hosted.contexts: the principal's and the id (sessionKey)
	sess  *session
	run   sync.Mutex // held while a task of the context runs
	users int        // tasks running or waiting to run here (h.mu)
	elem  *list.Element
	timer *time.Timer
	ended bool
}

// Serve stages m for the gateway; tasks then run through RunTask until Close.
func (r *Runtime) Serve(ctx context.Context, m *manifest.Manifest, opts ServeOptions) (*Hosted, error) {
	staged, err := r.Stage(ctx, m, StageOptions{Registry: opts.Registry, Lock: opts.Lock})
	if err != nil {
		return nil, err
	}
	// A hosted capsule runs from its compiled modules and opened archives (shared by
	// every capsule naming the same bytes); its own copy of each archive's bytes would
	// cost a gateway hosting many capsules most of its memory.
	for i := range staged.Artifacts {
		staged.Artifacts[i].Data = nil
	}
	if opts.ContextIdle <= 0 {
		opts.ContextIdle = DefaultContextIdle
	}
	if opts.MaxContexts <= 0 {
		opts.MaxContexts = DefaultMaxContexts
	}
	staged.artifacts = newArtifactManager(r, staged, opts.Pulls, opts.Pins)
	r.engine.Metrics().Staged(staged.modules())
	return &Hosted{rt: r, staged: staged, opts: opts, metrics: r.engine.Metrics(),
		contexts: map[string]*hostedContext{}, idle: list.New()}, nil
}

// Staged returns the staged capsule.
func (h *Hosted) Staged() *Staged { return h.staged }

// SetPins makes the capsule keep its runtime pins in p (the gateway's task store, so
// that every replica of a fleet sees them); until then they are kept in memory.
func (h *Hosted) SetPins(p taskstore.Pins) { h.staged.artifacts.setPins(p) }

// RunTask runs one task to its end in its context (req.ContextID; a new context when
// empty), opening the context's session on its first task. A canceled ctx stops the
// running guest and ends the task canceled. Tasks of one context wait for each other:
// admission (single, queue, concurrency) is the A2A layer's job.
func (h *Hosted) RunTask(ctx context.Context, req TaskRequest) TaskOutcome {
	out, ok := h.TryRunTask(ctx, req)
	if !ok {
		return TaskOutcome{TaskID: req.TaskID, State: StateFailed, Result: "error: the capsule was unloaded"}
	}
	return out
}

// TryRunTask is RunTask that reports false, running nothing, when the capsule was closed
// or retired before the task could start (a reload replaced it), so the caller can run
// the task on the capsule that replaced it.
func (h *Hosted) TryRunTask(ctx context.Context, req TaskRequest) (TaskOutcome, bool) {
	if req.ContextID == "" {
		req.ContextID = ids.New("ctx_")
	}
	if req.Source == "" {
		req.Source = "a2a"
	}
	c := h.enter(req.Principal, req.ContextID)
	if c == nil {
		return TaskOutcome{}, false
	}
	defer h.leave(c)
	c.run.Lock()
	defer c.run.Unlock()
	if h.retired.Load() || h.isClosed() {
		// Closed while this task waited for its context: its session has ended.
		return TaskOutcome{}, false
	}
	if c.sess == nil {
		// A task.md run's answer is read from its folder (docs/operators.md).
		place := sessionPlace{contextID: c.id, folder: contextFolder(c.key), url: req.CapsuleURL, output: req.Source == "task_md"}
		sess, err := h.rt.openSession(h.staged, h.opts.Session, place)
		if err != nil {
			return TaskOutcome{TaskID: req.TaskID, State: StateFailed, Result: "error: " + err.Error()}, true
		}
		c.sess = sess
	}
	root := filepath.Join(h.opts.Session.WorkRoot, h.staged.Manifest.Name, contextFolder(c.key))
	if err := checkMark(root, req.Previous); err != nil {
		return TaskOutcome{TaskID: req.TaskID, State: StateFailed, Result: "error: " + err.Error()}, true
	}
	out := c.sess.run(ctx, req)
	out.Mark = leaveMark(root, req.TaskID)
	return out, true
}

// markFile is where a context's folder names the last task that left files in it,
// beside its workdir where no guest reaches.
const markFile = ".context-mark"

// checkMark refuses a task whose context's files another gateway wrote (prev) when this
// gateway's folder of the context does not hold them: its work_root is not the one the
// other gateway wrote to. Never a silently missing file.
func checkMark(root string, prev Previous) error {
	if prev.Mark == "" {
		return nil
	}
	got, _ := os.ReadFile(filepath.Join(root, markFile))
	if string(got) == prev.Mark {
		return nil // the folder is shared: it holds what that task left
	}
	return errs.New(CodeContextMoved, "runtime",
		fmt.Sprintf("this context's files were written by task %s on gateway %s, and this gateway's work_root does not hold them", prev.Mark, prev.Gateway),
		"mount work_root on storage every gateway of the fleet shares (docs/operators.md \"Running several gateways\"), or start a new context").At(root, "")
}

// leaveMark names taskID in the context's folder when its workdir holds files, for the
// next task of the context on another gateway (checkMark); "" when it holds none.
func leaveMark(root, taskID string) string {
	entries, err := os.ReadDir(filepath.Join(root, "work"))
	if err != nil || len(entries) == 0 {
		return ""
	}
	if err := atomicfile.Write(filepath.Join(root, markFile), []byte(taskID), 0o644); err != nil {
		return ""
	}
	return taskID
}

func (h *Hosted) isClosed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closed
}

// enter finds or makes principal's context id and counts one more user of it; nil when
// the capsule takes no more tasks.
func (h *Hosted) enter(principal, id string) *hostedContext {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.retired.Load() {
		return nil
	}
	key := sessionKey(principal, id)
	c := h.contexts[key]
	if c == nil {
		c = &hostedContext{id: id, key: key}
		h.contexts[key] = c
		h.evictLocked()
	}
	h.unfileLocked(c)
	c.users++
	return c
}

// unfileLocked takes c off the idle list and stops its idle timer.
func (h *Hosted) unfileLocked(c *hostedContext) {
	if c.elem != nil {
		h.idle.Remove(c.elem)
		c.elem = nil
	}
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// leave counts a user out; the last one files the context as idle and arms its timer.
func (h *Hosted) leave(c *hostedContext) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.users--; c.users > 0 || c.ended {
		return
	}
	if c.sess == nil { // its session never opened: nothing to keep
		delete(h.contexts, c.key)
		return
	}
	c.elem = h.idle.PushBack(c)
	c.timer = time.AfterFunc(h.opts.ContextIdle, func() { h.expire(c) })
}

// expire ends a context that stayed idle for ContextIdle.
func (h *Hosted) expire(c *hostedContext) {
	h.mu.Lock()
	if c.users > 0 || c.ended {
		h.mu.Unlock()
		return
	}
	h.dropLocked(c)
	h.mu.Unlock()
	c.end()
}

// evictLocked ends the least recently used idle contexts while there are too many.
func (h *Hosted) evictLocked() {
	for len(h.contexts) > h.opts.MaxContexts && h.idle.Len() > 0 {
		c := h.idle.Front().Value.(*hostedContext)
		h.dropLocked(c)
		go c.end() // outside h.mu: ending writes session_end
	}
}

// dropLocked forgets an idle context; the caller ends its session.
func (h *Hosted) dropLocked(c *hostedContext) {
	c.ended = true
	h.unfileLocked(c)
	delete(h.contexts, c.key)
}

// end waits for the context's running task, if any, then ends its session
// (session_end) and closes its files.
func (c *hostedContext) end() error {
	c.run.Lock()
	defer c.run.Unlock()
	if c.sess == nil {
		return nil
	}
	sess := c.sess
	c.sess = nil
	return sess.end(StateCompleted)
}

// Contexts returns how many contexts have an open session or a task on the way.
func (h *Hosted) Contexts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.contexts)
}

// Retire makes the capsule take no new task from now on (TryRunTask reports false) while
// the tasks running on it go on: a reload replaced it.
func (h *Hosted) Retire() { h.retired.Store(true) }

// Close takes no more tasks, waits for the running ones, then ends every context's
// session (session_end) and closes its files. It returns the first error.
func (h *Hosted) Close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	var all []*hostedContext
	for _, c := range h.contexts {
		c.ended = true
		if c.timer != nil {
			c.timer.Stop()
		}
		all = append(all, c)
	}
	h.contexts, h.idle = map[string]*hostedContext{}, list.New()
	h.mu.Unlock()
	var first error
	for _, c := range all {
		if err := c.end(); err != nil && first == nil {
			first = err
		}
	}
	h.metrics.Unstaged(h.staged.modules())
	h.staged.artifacts.close()
	return first
}

// contextFolder names the folder of the context keyed key under its capsule's:
// "ctx_" and 32 hex digits of a digest of the key. Every session of the context — after an
// idle end, a reload, a restart or a crash — opens the same folder, so the context's
// workdir keeps what its tasks wrote; the digest keeps principals' contexts apart and
// the name short and safe whatever the client sent.
func contextFolder(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "ctx_" + hex.EncodeToString(sum[:16])
}

// sessionKey keys a context by its principal and id: contexts belong to principals, and
// NUL, which neither a principal's name nor a context id holds, keeps the pair apart.
func sessionKey(principal, contextID string) string {
	if principal == "" {
		return contextID
	}
	return principal + "\x00" + contextID
}
