package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"

	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// MaxGuestLog caps what one guest may write to its stdout or stderr log per session.
const MaxGuestLog = 1 << 20

// SessionConfig is what a capsule's sessions take from whoever runs them: where their
// folders go and what of the host they reach. RunOptions and ServeOptions each carry one.
type SessionConfig struct {
	WorkRoot string // <work_root>: sessions and their records live below it
	// LookupEnv reads the host environment for env.allow; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// Sleep waits between provider retries; nil waits on a real timer (tests pass a fake clock).
	Sleep func(ctx context.Context, d time.Duration) error
	// Sinks receive the sessions' events besides the trace and the metrics (the CLI's
	// progress lines, the gateway's SSE subscribers come per task).
	Sinks []Sink
	// DNSUpstream is the upstream DNS server of the shell tools' pinning resolver
	// ("host:port"); "" uses the host's first nameserver.
	DNSUpstream string
	// SandboxHelper is the binary shell and native tool commands start as their sandbox
	// wrapper (shell.Config.WrapperPath, checked with shell.CheckHelper); "" takes
	// capsulegate-sandbox next to this executable, else this executable.
	SandboxHelper string
	// Stderr receives the sandbox tier, the wrapper and W-SEC warnings at launch, and in
	// RunOnce the stage warnings (W-RUN-…); nil: bootstrap.log only.
	Stderr io.Writer
	// NetLogger receives the policy proxy's log (denials); nil discards it.
	NetLogger *slog.Logger
	// HarnessInactivity is how long a process capsule's harness may print nothing before
	// its turn is interrupted; 0 is DefaultHarnessInactivity.
	HarnessInactivity time.Duration
	// Tracer exports the sessions' OpenTelemetry spans (spans.go); nil exports none.
	Tracer trace.TracerProvider
	// Peers sends the sessions' peer messages (peers.go); nil: a capsule listing peers
	// gets no send_message tool, and its guests' messages are refused.
	Peers Peers
}

// sessionStart describes a staged capsule for the trace: its tools and effective grants
// (names, never values).
func sessionStart(s *Staged) SessionStart {
	m := s.Manifest
	// The same object `caddy capsule explain` prints; the sandbox's tier is the session's
	// own (sandbox_tier), detected when its first shell tool needs it.
	st := SessionStart{Capsule: m.Name, Version: m.Version, SandboxTier: "wasm", ToolsDeclared: []string{}, Grants: Explain(s, Host{})}
	for _, a := range m.Artifacts {
		if a.Runtime == manifest.RoleTool || a.Runtime == manifest.RoleSkill {
			st.ToolsDeclared = append(st.ToolsDeclared, a.Name)
		}
	}
	if m.Inference != nil {
		st.Model, st.MaxTurns = m.Inference.Model, m.Inference.MaxTurns
	}
	return st
}

// session holds what the guests of one session share.
type session struct {
	rt     *Runtime
	staged *Staged
	fs     *guestfs.FS
	// work is the workdir, reached through its root: the host's own reads and writes there
	// go through it. A new gateway context's is made when something first needs it.
	work *guestfs.Dir
	// held keeps task.md and out/result.txt in memory for the guests; flushed to the
	// folder before a subprocess starts in it (beforeSubprocess), and at close flushed
	// (a run's) or settled (a gateway context's).
	held *guestfs.Held
	// inbox names the files of the last task's message held in in/ (writeInbox).
	inbox []string
	// settle: the session serves a gateway context, whose folder gets no new copy of the
	// held files when the session ends (close).
	settle bool
	// prep makes the workdir's out/ and MURMUR.md when something first needs them (a
	// gateway context's; a run's at once) and keeps MURMUR.md's capsule URL.
	prep *workdirPrep
	env  []string
	http *murmur.Outgoing
	logs string

	mu      sync.Mutex
	writers map[string]*cappedFile

	id      string
	layout  *Layout
	start   time.Time
	trace   *TraceSink
	sessEvt string // session_start, parent of every task
	tasks   int

	stream *Stream
	// hooks runs the session's hook modules on its stream, with hookFS (its out/) as
	// their root; both nil without hooks.
	hooks  *HookSink
	hookFS *guestfs.FS
	// hookCancel ends the context the hooks' calls run under, when the session closes.
	hookCancel context.CancelFunc
	// current is the task running, for reporters that are not handed it (the policy
	// proxy's and resolver's denials); tasks of a session run one at a time.
	current atomic.Pointer[task]
	shell   *shellTools
	// driverEnv and driverHTTP are what an agent capsule's driver gets beyond the grants
	// every guest has: the MURMUR_INFERENCE_* values, and its gateway endpoint with the key.
	driverEnv  []string
	driverHTTP *murmur.Outgoing
	toolCalls  atomic.Int64
	shellCalls atomic.Int64 // the shell commands among toolCalls
	denials    atomic.Int64
	// harnessInactivity bounds a harness's silence (SessionConfig.HarnessInactivity).
	harnessInactivity time.Duration
	// compactHook summarises a conversation being compacted before the driver is asked
	// (compaction.go); nil until the on-compaction hook fills it.
	compactHook summariser
	// spans makes the session's OpenTelemetry spans; nil without a tracer.
	spans *spanSink
	// meter adds up every guest call of the session, traffic every byte its policy
	// dialers and proxy exchange: a task's receipt is what they counted while it ran.
	meter   wasm.Meter
	traffic netpolicy.Traffic
	// peers sends the session's peer messages (nil: none).
	peers Peers
	// turnPulled is what the capsule pulled, as the current agent turn read it: what the
	// turn offers and dispatches to, without reading the pins again per call.
	turnPulled map[string]*pulledTool
}

// traced returns ctx carrying the span context of task t, so that what the task sends
// (provider requests) carries its trace context.
func (s *session) traced(ctx context.Context, t *task) context.Context {
	if sc := s.spans.contextOf(t.evt); sc.IsValid() {
		return trace.ContextWithSpanContext(ctx, sc)
	}
	return ctx
}

// openSession creates the session's folders, its event stream (trace, metrics and the
// caller's sinks) and what its guests share, and emits session_start. On failure nothing
// is left open.
func (r *Runtime) openSession(s *Staged, o SessionConfig, at sessionPlace) (_ *session, err error) {
	m := s.Manifest
	id := ids.New("ses_")
	name := id
	if at.folder != "" {
		name = at.folder
	}
	// A gateway context's folder waits for its readers: its workdir and out/ are made when
	// first needed (unless its hooks' root is there), and it gets no new copy of the task
	// files when the session ends (settle). A run's folder, or a task.md run's, is its
	// output.
	settle := at.folder != "" && !at.output
	lazy := settle && len(s.Hooks) == 0
	l, err := NewLayout(o.WorkRoot, m.Name, name, at.workdir, lazy)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil && at.folder == "" {
			// A refused session leaves nothing behind (a --workdir of the user's stays; a
			// context's folder keeps what its earlier sessions wrote).
			os.RemoveAll(l.Root)
		}
	}()
	// The workdir is reached through its root from here on: a context's folder holds what
	// earlier sessions' tools left, links among it, and none may lead the host out. A new
	// context's is made when something first reaches it (NewLayout's lazy).
	var work *guestfs.Dir
	if l.lazy {
		work = guestfs.LazyDir(l.Work)
	} else if work, err = guestfs.OpenDir(l.Work); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			work.Close()
		}
	}()
	// The receipt sink before the metrics sink: it sends each task's receipt on as an
	// event of its own, which the metrics and the trace then record.
	sinks := []Sink{newReceiptSink(s), metricsSink{m: r.metrics, capsule: m.Name}}
	var trace *TraceSink
	if m.Trace.Capture != "none" {
		if trace, err = NewTraceSink(l.Trace, m.Trace.Capture == "content"); err != nil {
			return nil, err
		}
		sinks = append(sinks, trace)
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	// The session is filled in below; its hooks reach it only once it runs.
	sess := &session{}
	hookCtx, hookCancel := context.WithCancel(context.Background())
	var hooks *HookSink
	held := guestfs.NewHeld(work)
	prep := &workdirPrep{work: work, fresh: l.fresh, url: at.url, md: func(url string) []byte { return murmurMD(s, id, url) }}
	var hookFS *guestfs.FS
	if len(s.Hooks) > 0 {
		if hookFS, err = guestfs.NewIn(work, "out", guestfs.Hold(held)); err != nil {
			hookCancel()
			return nil, err
		}
		hooks = r.hookSink(hookCtx, s, hookFS, sess, o.LookupEnv)
		sinks = append(sinks, hooks)
	}
	sinks = append(sinks, o.Sinks...)
	var spans *spanSink
	if o.Tracer != nil {
		spans = newSpanSink(o.Tracer, s)
		sinks = append(sinks, spans)
	}
	stream := NewStream(id, sinks...)
	defer func() {
		if err != nil && trace != nil {
			trace.Close()
		}
		if err != nil && hooks != nil {
			hooks.Close()
			hookFS.Close()
		}
		if err != nil {
			hookCancel()
		}
	}()
	if !lazy { // a run's workdir, or a context's whose hooks reach out/ from the start
		if err := prep.make(); err != nil {
			return nil, err
		}
	}
	scope := filepath.Clean(filepath.FromSlash(m.Capabilities.Filesystem.Scope))
	if scope != "." { // the workdir itself needs no asking: that costs a mkdir per session
		root, err := work.Root()
		if err != nil {
			return nil, err
		}
		if err := root.MkdirAll(scope, 0o755); err != nil {
			return nil, err
		}
	}
	opts := []guestfs.Option{guestfs.Hold(held), guestfs.Before(prep.make)}
	if rel, err := filepath.Rel(scope, "MURMUR.md"); err == nil && filepath.IsLocal(rel) {
		// MURMUR.md is read-only to guests (docs/reference/guest-abi.md "Files").
		opts = append(opts, guestfs.Protect(rel))
	}
	gfs, err := guestfs.NewIn(work, scope, opts...)
	if err != nil {
		return nil, err
	}
	lookup := o.LookupEnv
	*sess = session{rt: r, staged: s, fs: gfs, work: work, held: held, prep: prep, settle: settle, env: GuestEnv(m, lookup, RuntimeEnv(m, id, at.url)), logs: l.Logs,
		writers: map[string]*cappedFile{}, stream: stream, id: id, layout: l, start: time.Now(), trace: trace, hooks: hooks, hookFS: hookFS, hookCancel: hookCancel, harnessInactivity: o.HarnessInactivity, spans: spans, peers: o.Peers}
	sess.compactHook = sess.hookSummariser(sinks)
	sess.http = &murmur.Outgoing{Capsule: m.Name, Rules: m.Capabilities.NetworkRules, Metrics: r.engine.Metrics(), Sleep: o.Sleep, Traffic: &sess.traffic,
		OnDeny: func(who, host string, port int, err error) { sess.denied(who, "guest", host, port, err) }}
	sess.http.Init()
	if m.IsAgent() {
		if err := sess.driverSetup(); err != nil {
			sess.close()
			return nil, err
		}
	}
	for _, w := range s.Warnings {
		// In every session's records: what its manifest asked for and did not get.
		sess.announce(nil, w.Error())
	}
	if err := sess.openShellTools(o); err != nil {
		sess.close()
		return nil, err
	}
	start := sessionStart(s)
	start.ContextID = at.contextID
	if sess.shell != nil {
		start.SandboxTier = "wasm+" + sess.shell.sb.Tier()
	}
	sess.sessEvt, _ = stream.Emit(EventSessionStart, "", start, nil)
	return sess, nil
}

// end emits session_end and closes the session; it returns the first sink failure.
func (s *session) end(status string) error {
	s.stream.Emit(EventSessionEnd, s.sessEvt, SessionEnd{Tasks: s.tasks, ExitStatus: status,
		ToolCalls: int(s.toolCalls.Load()), Denials: int(s.denials.Load()), DurationMS: time.Since(s.start).Milliseconds(),
		shellCalls: int(s.shellCalls.Load())}, nil)
	s.close()
	err := s.stream.Err()
	if s.trace != nil {
		if cerr := s.trace.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// denied records a refused connection: counted, logged to bootstrap.log and traced.
// Guest denials are counted in Prometheus by the HTTP host itself.
func (s *session) denied(who, source, host string, port int, err error) {
	s.denials.Add(1)
	if source != "guest" {
		s.rt.engine.Metrics().Denied.WithLabelValues(s.staged.Manifest.Name, source).Inc()
	}
	fmt.Fprintf(s.log("bootstrap.log"), "%s network_denied who=%s source=%s host=%s port=%d: %v\n", time.Now().UTC().Format(time.RFC3339), who, source, host, port, err)
	parent := s.sessEvt
	if t := s.current.Load(); t != nil {
		parent = t.parent()
	}
	s.stream.Emit(EventNetworkDenied, parent, NetworkDenied{Who: who, Host: host, Port: port, Check: err.Error()}, nil)
}

func (s *session) close() {
	if s.shell != nil {
		s.shell.close()
	}
	if s.hooks != nil {
		// Drained at session_end already, unless the session never got there.
		s.hooks.Close()
		s.hookFS.Close()
	}
	if s.hookCancel != nil {
		s.hookCancel() // after the drain: what the queues held has been answered
	}
	s.fs.Close()
	// A gateway context's folder gets no new copy of the task files: their text and answer
	// are in the task's records, and only a subprocess reads them there (beforeSubprocess).
	// A run's own folder (caddy capsule run, a session of the runtime's API) is its output,
	// so it gets them. A failure loses only that copy.
	if s.settle {
		_ = s.held.Settle()
	} else {
		_ = s.held.Flush()
	}
	s.work.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.writers {
		w.close()
	}
}

// beforeSubprocess flushes the held files to the workdir before a subprocess (a shell
// tool, a harness) may read or change it: it meets the folder the guests saw.
func (s *session) beforeSubprocess() error {
	if err := s.prep.make(); err != nil {
		return err
	}
	if err := s.held.Flush(); err != nil {
		return fmt.Errorf("writing the workdir's task files before the subprocess: %w", err)
	}
	return nil
}

// sessionPlace is where a session opens and what it first knows of its clients.
type sessionPlace struct {
	// workdir, when set, replaces <session>/work (caddy capsule run --workdir).
	workdir string
	// contextID names the A2A context the session serves (gateway only); folder, when
	// set, is the context's folder under the capsule's, which every session of the
	// context opens again (contextFolder), instead of one named by the session id.
	contextID, folder string
	// url is the capsule URL the first task's client reached, so MURMUR.md and the
	// guests' environment hold it from the start (a later task's URL replaces it).
	url string
	// output: the folder is the session's output, as a run's is — a capsule's task.md
	// run, whose answer no client takes — so it is made at once and gets the task files
	// when the session ends, where a gateway context's waits for a reader.
	output bool
}

// grants are the call grants of one guest of the session, from the manifest only.
func (s *session) grants(artifact string, role manifest.Role) wasm.Grants {
	m := s.staged.Manifest
	return wasm.Grants{FS: s.fs, Env: s.env, PerSession: perSessionEnv, MemoryBytes: m.Capabilities.Limits.MemoryBytes, Deadline: m.Deadline(role),
		Stdout: s.log(artifact + ".stdout.log"), Stderr: s.log(artifact + ".stderr.log"), Snapshot: snapshotPolicy(m.Artifact(artifact)), Meter: &s.meter}
}

// snapshotPolicy is the engine's reading of an artifact's init_snapshot (nil: the
// default).
func snapshotPolicy(ref *manifest.ArtifactRef) wasm.SnapshotPolicy {
	if ref == nil {
		return wasm.SnapshotAuto
	}
	switch ref.InitSnapshot {
	case manifest.InitSnapshotAlways:
		return wasm.SnapshotAlways
	case manifest.InitSnapshotNever:
		return wasm.SnapshotNever
	}
	return wasm.SnapshotAuto
}

// imports is what the imports of a guest of task t reach: declared wasm tools
// (murmur:tool-registry/invoke), the network within the capsule's rules, the task's
// stream and its client for input.
func (s *session) imports(t *task, who string) *murmur.Imports {
	invoke := func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
		return s.invokeAt(ctx, t, name, in)
	}
	return &murmur.Imports{Who: who, HTTP: s.http, Invoke: invoke, Chunk: s.chunks(t), RequestInput: t.requestInput,
		Artifacts: &amCall{s: s, t: t, from: "guest"}, Peers: s.guestPeers(t)}
}

// log returns the capped log file of that name under the session's logs/; the file is
// created by the first write, so a guest that writes nothing costs no open.
func (s *session) log(name string) io.Writer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.writers[name]; ok {
		return w
	}
	w := &cappedFile{path: filepath.Join(s.logs, name), left: MaxGuestLog}
	s.writers[name] = w
	return w
}

// lastWords returns the last lines a guest wrote to the named log (at most 512 bytes),
// to explain a failure.
func (s *session) lastWords(name string) string {
	s.mu.Lock()
	w := s.writers[name]
	s.mu.Unlock()
	if w == nil {
		return ""
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(strings.Fields(strings.ToValidUTF8(string(w.tail), "?")), " ")
}

// cappedFile keeps the first MaxGuestLog bytes a guest writes and drops the rest, so a
// chatty guest cannot fill the disk; it also remembers the last bytes written.
type cappedFile struct {
	mu     sync.Mutex
	path   string
	f      *os.File // opened by the first write
	failed bool     // the open failed: output is dropped
	left   int
	tail   []byte
}

func (c *cappedFile) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f != nil {
		c.f.Close()
	}
}

func (c *cappedFile) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil && !c.failed && len(p) > 0 {
		f, err := os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if errors.Is(err, fs.ErrNotExist) && os.MkdirAll(filepath.Dir(c.path), 0o755) == nil {
			f, err = os.OpenFile(c.path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		}
		c.f, c.failed = f, err != nil
	}
	if c.left > 0 && c.f != nil {
		n := min(len(p), c.left)
		c.f.Write(p[:n])
		c.left -= n
	}
	c.tail = append(c.tail, p[max(0, len(p)-tailSize):]...)
	if len(c.tail) > tailSize {
		c.tail = c.tail[len(c.tail)-tailSize:]
	}
	return len(p), nil
}

// tailSize is how much of the end of a guest log lastWords can tell.
const tailSize = 512
