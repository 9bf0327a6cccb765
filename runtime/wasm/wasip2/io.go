package wasip2

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// wasi:io types.
var (
	tStreamError = abi.VariantOf(abi.C("last-operation-failed", own(kError)), abi.C("closed", nil)).Named("stream-error")
	tBytes       = abi.List(abi.U8)
)

// ioError is an error resource: a message, and the filesystem or HTTP error code it
// stands for, if any.
type ioError struct {
	msg     string
	fsCode  int         // filesystem error-code case, -1 if none
	httpErr abi.Variant // http error-code, when isHTTP
	isHTTP  bool
}

// pollable is a pollable resource: always ready, ready at a monotonic instant, ready
// when a channel closes, or ready while a source has something to read.
type pollable struct {
	timer bool
	at    uint64          // timer: the monotonic instant, in ns
	done  <-chan struct{} // not a timer: closed when ready; nil means always ready
	// src, if set, is asked each time: a network body is ready while it holds bytes or
	// has ended, and not ready again once the guest has read them.
	src waitSource
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (p *pollable) ready(h *Host) bool {
	if p.timer {
		return h.clock.Monotonic() >= p.at
	}
	if p.src != nil {
		return isClosed(p.src.readyCh())
	}
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait returns a channel closed when p is ready, and a function releasing it.
func (p *pollable) wait(h *Host) (<-chan struct{}, func()) {
	if !p.timer {
		if p.src != nil {
			return p.src.readyCh(), func() {}
		}
		if p.done == nil {
			return closedCh, func() {}
		}
		return p.done, func() {}
	}
	now := h.clock.Monotonic()
	if now >= p.at {
		return closedCh, func() {}
	}
	ch := make(chan struct{})
	t := time.AfterFunc(time.Duration(min(p.at-now, uint64(1<<62))), func() { close(ch) })
	return ch, func() { t.Stop() }
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// contexts are the contexts a blocking call ends with: the call's, the host's and, for a
// warm instance, the current call's.
func (c *call) contexts() []context.Context {
	ctxs := []context.Context{c.ctx, c.h.done}
	if c.h.env.Context != nil {
		if cc := c.h.env.Context(); cc != nil {
			ctxs = append(ctxs, cc)
		}
	}
	return ctxs
}

// ended is the trap of a call whose context has ended, nil while none has.
func (c *call) ended(what string) error {
	for _, x := range c.contexts() {
		if x.Err() != nil {
			if c.h.env.Interrupt != nil {
				c.h.env.Interrupt()
			}
			return contextTrap(x, what)
		}
	}
	return nil
}

// await blocks until one of chs is closed, or the call's context ends (a trap).
func (c *call) await(what string, chs ...<-chan struct{}) error {
	ctxs := c.contexts()
	cases := make([]reflect.SelectCase, 0, len(chs)+len(ctxs))
	for _, ch := range chs {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
	}
	for _, x := range ctxs {
		if d := x.Done(); d != nil {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(d)})
		}
	}
	if i, _, _ := reflect.Select(cases); i < len(chs) {
		return nil
	}
	return c.ended(what) // a context's Done is closed: its Err is set
}

// inSource is what an input-stream reads: it never blocks; io.EOF means closed.
type inSource interface {
	read(p []byte) (int, error)
}

// waitSource is an inSource that may have nothing yet (a response body on its way):
// read then returns 0 and no error, and readyCh is closed once it would return
// something. Other sources are always ready.
type waitSource interface {
	inSource
	readyCh() <-chan struct{}
}

// awaitSource blocks a blocking read, skip or splice until src has something, or
// traps when the call's context ends first.
func (c *call) awaitSource(src inSource, what string) error {
	ws, ok := src.(waitSource)
	if !ok {
		return nil
	}
	ch := ws.readyCh()
	if isClosed(ch) {
		return nil
	}
	return c.await(what, ch)
}

type inputStream struct {
	src    inSource
	closed bool
	onDrop func() // releases what the stream held, if anything
}

func (s *inputStream) close() {
	if s.onDrop != nil {
		s.onDrop()
		s.onDrop = nil
	}
}

// memInput is bytes held in memory (stdin), read once.
type memInput struct {
	mu   sync.Mutex
	data []byte
	off  int
}

func (m *memInput) read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off >= len(m.data) {
		return 0, io.EOF
	}
	n := copy(p, m.data[m.off:])
	m.off += n
	return n, nil
}

// sink is what an output-stream writes to; write takes p whole, and may block (a slow
// stdout). check-write grants every open sink Host.maxWrite.
type sink interface {
	write(p []byte) error
}

type outputStream struct {
	sink   sink
	closed bool
	onDrop func()
}

func (s *outputStream) close() {
	if s.onDrop != nil {
		s.onDrop()
		s.onDrop = nil
	}
}

// writerSink writes to an io.Writer (stdout, stderr), nil discarding. Handles share it,
// so its lock keeps their writes whole.
type writerSink struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *writerSink) write(p []byte) error {
	if w.w == nil || len(p) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, err := w.w.Write(p)
	return err
}

// newError adds an error resource and returns its handle.
func (c *call) newError(e *ioError) (uint32, error) {
	if e.fsCode == 0 && !e.isHTTP {
		e.fsCode = -1
	}
	return c.h.tab.add(kError, e, 0)
}

// streamFailed is stream-error::last-operation-failed carrying err.
func (c *call) streamFailed(err error) (any, error) {
	e := &ioError{msg: err.Error(), fsCode: -1}
	var fe *fsError
	if errors.As(err, &fe) {
		e.fsCode = int(fe.code)
	}
	var be *bodyError
	if errors.As(err, &be) {
		e.isHTTP, e.httpErr = true, bodyErrorCode(be.err)
	}
	h, terr := c.newError(e)
	if terr != nil {
		return nil, terr
	}
	return fail(abi.Variant{Case: 0, Value: h}), nil
}

var streamClosed = fail(abi.Variant{Case: 1})

const ioStreams = "wasi:io/streams"

func ioSpecs() []*spec {
	bool_ := abi.Bool
	return []*spec{
		drop("wasi:io/error", kError),
		fn("wasi:io/error", "[method]error.to-debug-string", ps(self(kError)), abi.String, func(c *call, a []any) (any, error) {
			e, err := borrowed[*ioError](c, a[0], kError)
			if err != nil {
				return nil, err
			}
			return e.msg, nil
		}),

		drop("wasi:io/poll", kPollable),
		fn("wasi:io/poll", "[method]pollable.ready", ps(self(kPollable)), bool_, func(c *call, a []any) (any, error) {
			p, err := borrowed[*pollable](c, a[0], kPollable)
			if err != nil {
				return nil, err
			}
			return p.ready(c.h), nil
		}),
		fn("wasi:io/poll", "[method]pollable.block", ps(self(kPollable)), nil, func(c *call, a []any) (any, error) {
			p, err := borrowed[*pollable](c, a[0], kPollable)
			if err != nil {
				return nil, err
			}
			if p.ready(c.h) {
				return nil, nil
			}
			ch, stop := p.wait(c.h)
			defer stop()
			return nil, c.await("pollable.block", ch)
		}),
		{
			iface: "wasi:io/poll", name: "poll",
			params: ps(pr("in", abi.List(abi.Borrow("pollable")))), result: abi.List(abi.U32),
			pre:  prePoll,
			impl: poll,
		},

		drop(ioStreams, kInputStream),
		fn(ioStreams, "[method]input-stream.read", ps(self(kInputStream), pr("len", abi.U64)), abi.ResultOf(tBytes, tStreamError), func(c *call, a []any) (any, error) {
			return c.read(a[0], a[1].(uint64), false, "")
		}),
		fn(ioStreams, "[method]input-stream.blocking-read", ps(self(kInputStream), pr("len", abi.U64)), abi.ResultOf(tBytes, tStreamError), func(c *call, a []any) (any, error) {
			return c.read(a[0], a[1].(uint64), false, "input-stream.blocking-read")
		}),
		fn(ioStreams, "[method]input-stream.skip", ps(self(kInputStream), pr("len", abi.U64)), abi.ResultOf(abi.U64, tStreamError), func(c *call, a []any) (any, error) {
			return c.read(a[0], a[1].(uint64), true, "")
		}),
		fn(ioStreams, "[method]input-stream.blocking-skip", ps(self(kInputStream), pr("len", abi.U64)), abi.ResultOf(abi.U64, tStreamError), func(c *call, a []any) (any, error) {
			return c.read(a[0], a[1].(uint64), true, "input-stream.blocking-skip")
		}),
		fn(ioStreams, "[method]input-stream.subscribe", ps(self(kInputStream)), own(kPollable), func(c *call, a []any) (any, error) {
			s, err := borrowed[*inputStream](c, a[0], kInputStream)
			if err != nil {
				return nil, err
			}
			// A response body is ready as its bytes arrive; stdin and files always are.
			if ws, ok := s.src.(waitSource); ok {
				return c.h.tab.add(kPollable, &pollable{src: ws}, a[0].(uint32))
			}
			return c.subscribe(a[0], kInputStream, nil)
		}),

		drop(ioStreams, kOutputStream),
		fn(ioStreams, "[method]output-stream.check-write", ps(self(kOutputStream)), abi.ResultOf(abi.U64, tStreamError), func(c *call, a []any) (any, error) {
			s, err := borrowed[*outputStream](c, a[0], kOutputStream)
			if err != nil {
				return nil, err
			}
			if s.closed {
				return streamClosed, nil
			}
			return ok(uint64(c.h.maxWrite)), nil
		}),
		fn(ioStreams, "[method]output-stream.write", ps(self(kOutputStream), pr("contents", tBytes)), abi.ResultOf(nil, tStreamError), func(c *call, a []any) (any, error) {
			return c.write(a[0], a[1].([]byte), c.h.maxWrite, "write")
		}),
		fn(ioStreams, "[method]output-stream.blocking-write-and-flush", ps(self(kOutputStream), pr("contents", tBytes)), abi.ResultOf(nil, tStreamError), func(c *call, a []any) (any, error) {
			return c.write(a[0], a[1].([]byte), MaxBlockingWrite, "blocking-write-and-flush")
		}),
		fn(ioStreams, "[method]output-stream.flush", ps(self(kOutputStream)), abi.ResultOf(nil, tStreamError), c_flush),
		fn(ioStreams, "[method]output-stream.blocking-flush", ps(self(kOutputStream)), abi.ResultOf(nil, tStreamError), c_flush),
		fn(ioStreams, "[method]output-stream.subscribe", ps(self(kOutputStream)), own(kPollable), func(c *call, a []any) (any, error) {
			// Output is taken whole by each write: the stream is always ready.
			return c.subscribe(a[0], kOutputStream, nil)
		}),
		{
			iface: ioStreams, name: "[method]output-stream.write-zeroes",
			params: ps(self(kOutputStream), pr("len", abi.U64)), result: abi.ResultOf(nil, tStreamError),
			pre: preZeroes(false), impl: func(c *call, a []any) (any, error) {
				return c.write(a[0], make([]byte, a[1].(uint64)), c.h.maxWrite, "write-zeroes")
			},
		},
		{
			iface: ioStreams, name: "[method]output-stream.blocking-write-zeroes-and-flush",
			params: ps(self(kOutputStream), pr("len", abi.U64)), result: abi.ResultOf(nil, tStreamError),
			pre: preZeroes(true), impl: func(c *call, a []any) (any, error) {
				return c.write(a[0], make([]byte, a[1].(uint64)), MaxBlockingWrite, "blocking-write-zeroes-and-flush")
			},
		},
		fn(ioStreams, "[method]output-stream.splice", ps(self(kOutputStream), pr("src", abi.Borrow("input-stream")), pr("len", abi.U64)), abi.ResultOf(abi.U64, tStreamError), func(c *call, a []any) (any, error) {
			return splice(c, a, "")
		}),
		fn(ioStreams, "[method]output-stream.blocking-splice", ps(self(kOutputStream), pr("src", abi.Borrow("input-stream")), pr("len", abi.U64)), abi.ResultOf(abi.U64, tStreamError), func(c *call, a []any) (any, error) {
			return splice(c, a, "output-stream.blocking-splice")
		}),
	}
}

// preZeroes refuses a write-zeroes over its bound before the zeroes are made.
func preZeroes(blocking bool) func(h *Host, flat []uint64) error {
	return func(h *Host, flat []uint64) error {
		limit := uint64(h.maxWrite)
		if blocking {
			limit = MaxBlockingWrite
		}
		if flat[1] > limit {
			return trapf(CodeStream, false, "write-zeroes of %d bytes: more than the %d allowed", flat[1], limit)
		}
		return nil
	}
}

// prePoll refuses an empty list, or one longer than the table can hold, before lifting.
func prePoll(h *Host, flat []uint64) error {
	n := uint32(flat[1])
	if n == 0 {
		return trap(CodePoll, "poll of an empty list", false)
	}
	if int64(n) > int64(h.tab.max) {
		return trapf(CodePoll, false, "poll of %d pollables: more than the %d handles a table holds", n, h.tab.max)
	}
	return nil
}

func poll(c *call, a []any) (any, error) {
	in := a[0].([]any)
	ps := make([]*pollable, len(in))
	for i, v := range in {
		p, err := borrowed[*pollable](c, v, kPollable)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	readyList := func() []any {
		var out []any
		for i, p := range ps {
			if p.ready(c.h) {
				out = append(out, uint32(i))
			}
		}
		return out
	}
	if r := readyList(); len(r) > 0 {
		return r, nil
	}
	chs := make([]<-chan struct{}, 0, len(ps))
	for _, p := range ps {
		ch, stop := p.wait(c.h)
		defer stop()
		chs = append(chs, ch)
	}
	if err := c.await("poll", chs...); err != nil {
		return nil, err
	}
	r := readyList()
	if len(r) == 0 {
		// A timer fired a hair before the clock reads its instant: report it ready, as
		// its channel says.
		for i, ch := range chs {
			select {
			case <-ch:
				r = append(r, uint32(i))
			default:
			}
		}
	}
	return r, nil
}

// subscribe makes a pollable child of stream handle v (kind k), ready when done closes
// (nil: always).
func (c *call) subscribe(v any, k kind, done <-chan struct{}) (any, error) {
	if _, err := c.h.tab.get(v.(uint32), k); err != nil {
		return nil, err
	}
	return c.h.tab.add(kPollable, &pollable{done: done}, v.(uint32))
}

// read serves read, skip and, when blocking names the call, blocking-read and
// blocking-skip: those wait for a source that has nothing yet (a response body on its
// way) until it has, or trap when the call's context ends.
func (c *call) read(v any, n uint64, skip bool, blocking string) (any, error) {
	s, err := borrowed[*inputStream](c, v, kInputStream)
	if err != nil {
		return nil, err
	}
	if s.closed {
		return streamClosed, nil
	}
	buf := make([]byte, min(n, uint64(c.h.maxRead)))
	if len(buf) == 0 {
		if skip {
			return ok(uint64(0)), nil
		}
		return ok([]byte{}), nil
	}
	if blocking != "" {
		if err := c.awaitSource(s.src, blocking); err != nil {
			return nil, err
		}
	}
	k, rerr := s.src.read(buf)
	if k == 0 && rerr != nil {
		if blocking != "" && !errors.Is(rerr, io.EOF) {
			// The body failed because the call's context ended: that is the trap, not a
			// stream error the guest could take for the server's.
			if err := c.ended(blocking); err != nil {
				return nil, err
			}
		}
		s.closed = true
		if errors.Is(rerr, io.EOF) {
			return streamClosed, nil
		}
		return c.streamFailed(rerr)
	}
	if skip {
		return ok(uint64(k)), nil
	}
	return ok(buf[:k]), nil
}

// write serves write, blocking-write-and-flush and the zeroes variants: every write is
// taken whole (and flushed) at once, up to limit bytes.
func (c *call) write(v any, p []byte, limit int, what string) (any, error) {
	s, err := borrowed[*outputStream](c, v, kOutputStream)
	if err != nil {
		return nil, err
	}
	if len(p) > limit {
		return nil, trapf(CodeStream, false, "output-stream.%s of %d bytes: more than the %d allowed (check-write grants %d)", what, len(p), limit, c.h.maxWrite)
	}
	if s.closed {
		return streamClosed, nil
	}
	if err := s.sink.write(p); err != nil {
		s.closed = true
		return c.streamFailed(err)
	}
	return ok(nil), nil
}

func c_flush(c *call, a []any) (any, error) {
	s, err := borrowed[*outputStream](c, a[0], kOutputStream)
	if err != nil {
		return nil, err
	}
	if s.closed {
		return streamClosed, nil
	}
	return ok(nil), nil
}

func splice(c *call, a []any, blocking string) (any, error) {
	out, err := borrowed[*outputStream](c, a[0], kOutputStream)
	if err != nil {
		return nil, err
	}
	in, err := borrowed[*inputStream](c, a[1], kInputStream)
	if err != nil {
		return nil, err
	}
	if out.closed || in.closed {
		return streamClosed, nil
	}
	buf := make([]byte, min(a[2].(uint64), uint64(c.h.maxWrite)))
	if len(buf) == 0 {
		return ok(uint64(0)), nil
	}
	if blocking != "" {
		if err := c.awaitSource(in.src, blocking); err != nil {
			return nil, err
		}
	}
	k, rerr := in.src.read(buf)
	if k == 0 && rerr != nil {
		in.closed = true
		if errors.Is(rerr, io.EOF) {
			return streamClosed, nil
		}
		return c.streamFailed(rerr)
	}
	if err := out.sink.write(buf[:k]); err != nil {
		out.closed = true
		return c.streamFailed(err)
	}
	return ok(uint64(k)), nil
}
