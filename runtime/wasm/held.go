package wasm

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// Held is one instance of a module kept for a whole run (a process driver's: parse may
// rely on what launch was given). Its calls run one at a time, each bounded by its own
// deadline; a call the deadline (or its caller) stops cannot be unwound inside the
// guest, so it cuts the instance: the guest is interrupted and every later call is
// refused naming the call that cut it.
type Held struct {
	mod      *Module
	deadline time.Duration
	cancel   context.CancelCauseFunc
	calls    chan *heldCall
	exited   chan struct{} // closed when the instance's loop has ended
	err      error         // why it ended (set before exited closes)

	mu  sync.Mutex // serializes Call; guards cut
	cut string     // the call that cut the instance, once one did
}

type heldCall struct {
	export string
	f      *abi.Func
	args   []any
	use    func([]any) error
	done   chan error
}

// ErrCut is the error of a call to an instance an earlier call cut.
var ErrCut = errors.New("the instance was cut")

// Hold instantiates mod with g for a run; g.Deadline bounds each call, not the run.
// Close ends it.
func (e *Engine) Hold(mod *Module, g Grants) *Held {
	runCtx, cancel := context.WithCancelCause(context.Background())
	h := &Held{mod: mod, deadline: g.Deadline, cancel: cancel, calls: make(chan *heldCall), exited: make(chan struct{})}
	g.Deadline = 0
	go func() {
		defer close(h.exited)
		h.err = e.Call(runCtx, mod, g, func(ctx context.Context, inst *Instance) error {
			for {
				select {
				case c := <-h.calls:
					c.done <- inst.CallLifted(ctx, c.export, c.f, c.args, c.use)
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
		})
	}()
	return h
}

// errClosed is the cause a closed instance's loop ends with.
var errClosed = errors.New("the held instance was closed")

// Call calls export (of function type f) with args on the held instance and hands its
// lifted results to use. ctx ending, or the instance's per-call deadline passing, before
// the guest returns cuts the instance; the error then names the deadline or the cause.
func (h *Held) Call(ctx context.Context, name, export string, f *abi.Func, args []any, use func([]any) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cut != "" {
		return fmt.Errorf("artifact %s: %s refused: %w by an earlier call, %s", h.mod.Artifact, name, ErrCut, h.cut)
	}
	c := &heldCall{export: export, f: f, args: args, use: use, done: make(chan error, 1)}
	select {
	case h.calls <- c:
	case <-h.exited:
		return fmt.Errorf("artifact %s: %s refused: the instance ended: %w", h.mod.Artifact, name, h.err)
	case <-ctx.Done():
		return ctx.Err()
	}
	var timeout <-chan time.Time
	if h.deadline > 0 {
		t := time.NewTimer(h.deadline)
		defer t.Stop()
		timeout = t.C
	}
	var why error
	select {
	case err := <-c.done:
		return err
	case <-timeout:
		why = fmt.Errorf("%s ran past its deadline of %s: %w", name, h.deadline, context.DeadlineExceeded)
	case <-ctx.Done():
		why = fmt.Errorf("%s was stopped: %w", name, context.Cause(ctx))
	}
	h.cut = why.Error()
	h.cancel(why)
	<-c.done // the guest stops at its next interrupt check
	<-h.exited
	return fmt.Errorf("artifact %s: %w", h.mod.Artifact, h.err)
}

// Close ends the held instance; calls after it are refused.
func (h *Held) Close() {
	h.cancel(errClosed)
	<-h.exited
}
