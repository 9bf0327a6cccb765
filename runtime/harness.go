package runtime

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/credgate"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// EventHarness records what a process driver read out of its harness's output that is
// not a chunk of the answer: a session started, a tool call or result the harness
// reported, a retry, a note (docs/reference/trace.md "harness").
const EventHarness = "harness"

// HarnessEvent is a harness event's data.
type HarnessEvent struct {
	Case     string `json:"case"`
	ToolName string `json:"tool_name,omitempty"`
	Text     string `json:"text,omitempty"`
	// NotHooked marks a tool call of the harness's own built-in tools (granted through
	// the driver's config): it ran in the sandbox, but not through the bridge, so no
	// hook saw it.
	NotHooked bool `json:"not_hooked,omitempty"`
}

// DefaultHarnessInactivity is how long a harness may print nothing before its turn is
// interrupted; InterruptGrace how long it then has to end before it is killed.
const (
	DefaultHarnessInactivity = 600 * time.Second
	InterruptGrace           = 10 * time.Second
)

// parseBatch is the most stdout lines handed to parse at once.
const parseBatch = 64

// BridgeServerName is the name a run's tool bridge is given to the harness under.
const BridgeServerName = "capsule"

// harnessSpec resolves the harness binary and turns plan into the command: its files
// written under the run's folder, {files_dir}, {gateway_url} and {gateway_key}
// substituted, the plan's variables checked.
func (s *session) harnessSpec(desc *abi.Description, plan abi.LaunchPlan, gw *credgate.Server) (shell.HarnessSpec, error) {
	driver := s.staged.Manifest.Inference.Driver.Artifact
	refuse := func(msg string) (shell.HarnessSpec, error) {
		return shell.HarnessSpec{}, errs.New(CodeProcessLaunch, "runtime", fmt.Sprintf("process driver %s: %s", driver, msg), "fix the driver's launch plan")
	}
	bin := desc.Binary
	if !filepath.IsAbs(bin) {
		p, err := exec.LookPath(bin)
		if err != nil {
			return shell.HarnessSpec{}, errs.New(CodeProcessSpawn, "runtime", fmt.Sprintf("harness %s: its binary %q is not on the gateway's PATH", desc.Harness, bin),
				"install the harness CLI, or put it on the gateway's PATH")
		}
		bin = p
	}
	real, err := filepath.EvalSymlinks(bin)
	if err != nil {
		return shell.HarnessSpec{}, errs.New(CodeProcessSpawn, "runtime", fmt.Sprintf("harness %s: its binary %q: %v", desc.Harness, bin, err), "install the harness CLI")
	}
	// One folder for the session, not per task: the harness keeps its own session there
	// (HOME, CODEX_HOME), which the next task of the context resumes.
	filesDir := filepath.Join(s.layout.Work, ".harness")
	if err := os.MkdirAll(filesDir, 0o700); err != nil {
		return shell.HarnessSpec{}, err
	}
	subst := func(v string) string {
		v = strings.ReplaceAll(v, "{files_dir}", filesDir)
		if gw != nil {
			v = strings.ReplaceAll(strings.ReplaceAll(v, "{gateway_url}", gw.URL()), "{gateway_key}", gw.Placeholder())
		}
		return v
	}
	root, err := os.OpenRoot(filesDir)
	if err != nil {
		return shell.HarnessSpec{}, err
	}
	defer root.Close()
	for _, f := range plan.Files {
		if !filepath.IsLocal(f.Name) {
			return refuse(fmt.Sprintf("the plan's file %q is not a path inside the files folder", f.Name))
		}
		if dir := filepath.Dir(f.Name); dir != "." {
			if err := root.MkdirAll(dir, 0o700); err != nil {
				return shell.HarnessSpec{}, err
			}
		}
		if err := root.WriteFile(f.Name, []byte(subst(f.Contents)), 0o600); err != nil {
			return shell.HarnessSpec{}, err
		}
	}
	spec := shell.HarnessSpec{Path: real, Args: []string{filepath.Base(bin)}, Stdin: plan.Stdin, KeepStdinOpen: plan.KeepStdinOpen,
		ReadOnly: []string{installDir(real)}}
	for _, a := range plan.Args {
		spec.Args = append(spec.Args, subst(a))
	}
	for _, kv := range plan.EnvSet {
		if kv[0] == "" || strings.ContainsAny(kv[0], "=\x00") || strings.ContainsRune(kv[1], 0) {
			return refuse(fmt.Sprintf("the plan sets variable %q, which is not a usable name (or its value holds NUL)", kv[0]))
		}
		spec.Env = append(spec.Env, kv[0]+"="+subst(kv[1]))
	}
	ro, rw := grantedPaths(s.staged.Manifest.Capabilities.Harness.Paths)
	spec.ReadOnly, spec.ReadWrite = append(spec.ReadOnly, ro...), rw
	return spec, nil
}

// grantedPaths splits the paths capabilities.harness.paths grants the harness by
// access. The grants are what the harness sees, not only what its driver says it needs
// (every need is covered by one, checked at stage): so an operator can give a harness
// what its install needs where the driver cannot know it (node under nvm, say). One
// missing on this host has nothing to show and is left out.
func grantedPaths(grants []manifest.HarnessPath) (ro, rw []string) {
	for _, g := range grants {
		if _, err := os.Stat(g.Path); err != nil {
			continue
		}
		if g.Access == "read-write" {
			rw = append(rw, g.Path)
		} else {
			ro = append(ro, g.Path)
		}
	}
	return ro, rw
}

// installDir is the folder a harness binary is installed in, visible to it read-only:
// for a node package's script (npm's bin link resolved), the node_modules folder holding
// it, whose other packages it loads (Codex's native binary is one); else the binary's own
// folder.
func installDir(real string) string {
	for d := filepath.Dir(real); d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			return d
		}
	}
	return filepath.Dir(real)
}

// harnessRun is one task's harness run: its events read from the driver, its answer.
type harnessRun struct {
	s         *session
	t         *task
	d         *murmur.Driver
	desc      *abi.Description
	plan      abi.LaunchPlan
	sessionID string
	bridged   map[string]bool // the tools the bridge serves, by bare name

	answer      strings.Builder // the text of the message in progress
	streamed    bool            // its text went out as chunks already
	final       string
	failed      *abi.Event
	terminal    bool
	interrupted bool
	usage       abi.Usage
	start       time.Time
}

// maxHarnessLine is the longest stdout line of a harness that is parsed.
const maxHarnessLine = 8 << 20

// run starts the harness and reads it to its end.
func (r *harnessRun) run(ctx context.Context, spec shell.HarnessSpec, by string) (string, string, error) {
	s := r.s
	r.start = time.Now()
	before := s.shell.sb.CgroupEvents()
	// The run is the task's one turn: what the harness does through the bridge hangs
	// under it in the trace. Set before the harness starts, as the bridge's calls read it.
	r.t.setTurn(1)
	turnEvt, _ := s.stream.Emit(EventHarness, r.t.evt, HarnessEvent{Case: "turn-started", Text: r.sessionID}, nil)
	r.t.setTurnEvt(turnEvt)
	err := s.beforeSubprocess()
	var p *shell.Harness
	if err == nil {
		p, err = s.shell.sb.Start(context.WithoutCancel(ctx), spec)
	}
	if err != nil {
		return "", StateFailed, errs.Wrap(err, CodeProcessSpawn, "runtime", "the harness "+r.desc.Harness+" could not be started", "see docs/sandbox.md")
	}
	lines := make(chan string, parseBatch)
	quit := make(chan struct{}) // closed when the run returns: the reader stops handing on
	defer close(quit)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(p.Stdout)
		sc.Buffer(make([]byte, 64<<10), maxHarnessLine)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-quit:
				io.Copy(io.Discard, p.Stdout) // the harness must never block on a full pipe
				return
			}
		}
		if sc.Err() != nil {
			// A line past the cap (or a read failure) ends what can be parsed: the
			// harness is stopped rather than left writing to a pipe nobody reads.
			p.Kill(fmt.Sprintf("it printed a line over %d bytes, or its output could not be read", maxHarnessLine))
			io.Copy(io.Discard, p.Stdout)
		}
	}()
	inactivity := s.harnessInactivity
	if inactivity <= 0 {
		inactivity = DefaultHarnessInactivity
	}
	idle := time.NewTimer(inactivity)
	defer idle.Stop()
	var grace <-chan time.Time
	stop := func(why string) {
		if r.interrupted {
			return
		}
		r.interrupted = true
		s.stream.Emit(EventHarness, r.t.parent(), HarnessEvent{Case: "interrupt", Text: why}, nil)
		var ierr error
		switch r.desc.Interrupt {
		case "stdin-message":
			ierr = p.WriteStdin(r.plan.InterruptStdin)
		case "signal-int":
			ierr = p.Interrupt()
		default:
			ierr = errors.New("the harness cannot be interrupted")
		}
		if ierr != nil {
			p.Kill(why)
			return
		}
		grace = time.After(InterruptGrace)
	}
	done := ctx.Done()
loop:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				break loop
			}
			batch := []string{l}
		more:
			for len(batch) < parseBatch {
				select {
				case l, ok := <-lines:
					if !ok {
						break more
					}
					batch = append(batch, l)
				default:
					break more
				}
			}
			idle.Reset(inactivity)
			events, err := r.d.Parse(context.WithoutCancel(ctx), batch)
			if err != nil {
				p.Kill("the driver failed")
				p.Wait()
				return "", StateFailed, fmt.Errorf("process driver %s: parse: %w", s.staged.Manifest.Inference.Driver.Artifact, err)
			}
			for _, e := range events {
				r.event(e)
			}
		case <-idle.C:
			stop(fmt.Sprintf("the harness printed nothing for %s", inactivity))
		case <-done:
			done = nil
			stop("the task was canceled")
		case <-grace:
			p.Kill("it did not end within " + InterruptGrace.String() + " of its interrupt")
		}
	}
	exit := p.Wait()
	contained := r.contained(before, s.shell.sb.CgroupEvents())
	if !r.terminal {
		x := abi.ExitStatus{StderrTail: clip.String(exit.StderrTail, 2048), Interrupted: r.interrupted || exit.Killed != ""}
		code := int32(exit.Code)
		if exit.Code > 128 && exit.Code < 160 {
			sig := int32(exit.Code - 128)
			x.Signal = &sig
		} else {
			x.Code = &code
		}
		ev, err := r.d.ClassifyExit(context.WithoutCancel(ctx), x)
		if err != nil {
			return "", StateFailed, fmt.Errorf("process driver %s: classify-exit: %w", s.staged.Manifest.Inference.Driver.Artifact, err)
		}
		if ev.Case != "turn-end" && ev.Case != "turn-failed" {
			ev = abi.Event{Case: "turn-failed", FailureKind: "other", Text: "classify-exit answered " + ev.Case}
		}
		r.event(ev)
	}
	inference := Inference{Turn: 1, Tools: []string{}, DurationMS: time.Since(r.start).Milliseconds(), StopReason: "end_turn"}
	if r.usage.Input != nil {
		inference.InputTokens = int(*r.usage.Input)
	}
	if r.usage.Output != nil {
		inference.OutputTokens = int(*r.usage.Output)
	}
	if r.failed != nil {
		inference.StopReason, inference.Error = "error", r.failed.FailureKind+": "+r.failed.Text
	}
	s.stream.Emit(EventInference, r.t.evt, inference, nil)
	r.t.thread = Thread{Continuation: r.sessionID, ContinuationBy: by}
	if r.failed != nil {
		state := StateFailed
		if r.failed.FailureKind == "canceled" && ctx.Err() != nil {
			state = StateCanceled
		}
		if r.failed.FailureKind == "max-turns" {
			state = StateMaxTurns
		}
		return "", state, fmt.Errorf("harness %s: turn failed (%s): %s%s", r.desc.Harness, r.failed.FailureKind, r.failed.Text, contained)
	}
	return r.final, StateCompleted, nil
}

// contained records what the session's cgroup limits did during the run, between
// before and after, as a harness event, and returns it as words for a failure ("" when
// they did nothing).
func (r *harnessRun) contained(before, after shell.CgroupEvents) string {
	var what []string
	if n := after.OOMKills - before.OOMKills; n > 0 {
		what = append(what, fmt.Sprintf("%d process(es) killed at the cgroup's memory limit", n))
	}
	if n := after.PidsLimit - before.PidsLimit; n > 0 {
		what = append(what, fmt.Sprintf("%d fork(s) refused at the cgroup's pids limit", n))
	}
	if len(what) == 0 {
		return ""
	}
	text := strings.Join(what, "; ")
	r.s.stream.Emit(EventHarness, r.t.parent(), HarnessEvent{Case: "contained", Text: text}, nil)
	return " (" + text + ")"
}

// event applies one event of the harness to the task: text to the task's subscribers,
// the rest to the trace.
func (r *harnessRun) event(e abi.Event) {
	s, t := r.s, r.t
	if r.terminal {
		return // a run's first terminal event stands
	}
	switch e.Case {
	case "text-delta":
		r.answer.WriteString(e.Text)
		r.streamed = true
		s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: e.Text}, nil)
	case "text":
		// The whole message: it replaces the deltas streamed for it.
		if !r.streamed && e.Text != "" {
			s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: e.Text}, nil)
		}
		r.answer.Reset()
		r.answer.WriteString(e.Text)
		r.streamed = false
	case "thinking-delta", "thinking":
		s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: e.Text, Thinking: true}, nil)
	case "usage":
		r.usage = e.Usage // cumulative: the last report stands for the run
	case "session-started":
		if e.SessionID != "" {
			r.sessionID = e.SessionID
		}
		s.stream.Emit(EventHarness, t.parent(), HarnessEvent{Case: e.Case, Text: e.Auth}, nil)
	case "tool-call":
		s.stream.Emit(EventHarness, t.parent(), HarnessEvent{Case: e.Case, ToolName: e.ToolName, Text: clip.String(e.ToolInput, 200),
			NotHooked: !r.bridged[e.ToolName]}, nil)
	case "tool-result":
		s.stream.Emit(EventHarness, t.parent(), HarnessEvent{Case: e.Case, Text: clip.String(e.Text, 200)}, nil)
	case "turn-end":
		r.terminal, r.final = true, e.Text
		if r.final == "" {
			r.final = r.answer.String()
		}
		if !r.streamed && r.answer.Len() == 0 && r.final != "" {
			s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: r.final}, nil)
		}
	case "turn-failed":
		r.terminal = true
		ev := e
		r.failed = &ev
		s.stream.Emit(EventHarness, t.parent(), HarnessEvent{Case: e.Case, Text: e.FailureKind + ": " + clip.String(e.Text, 500)}, nil)
	default: // retry, note
		s.stream.Emit(EventHarness, t.parent(), HarnessEvent{Case: e.Case, Text: clip.String(e.Text, 500)}, nil)
	}
}
