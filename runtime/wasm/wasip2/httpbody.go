package wasip2

import (
	"errors"
	"io"
	"sync"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// netBody is a received response body, read from the network as the guest takes it:
// the request's goroutine pumps one chunk at a time (charged to the buffer budget) and
// reads the next only once the guest has taken it all, so text reaches the guest while
// the server still writes, and the host never holds more than one chunk per body.
// It is held by the future, then the incoming-response, the incoming-body and its
// input-stream; when the last lets go the request ends and the body is closed.
type netBody struct {
	h    *Host
	src  BodyReader
	stop func() // ends the request: cancels its context, counts it out of flight

	mu    sync.Mutex
	refs  int
	chunk []byte        // received, not yet taken by the guest
	err   error         // io.EOF at the end, or the failure; set once, after the last chunk
	ready chan struct{} // closed while chunk or err is set
	more  chan struct{} // the guest took the chunk: the pump may read on (buffered: 1)
	quit  chan struct{} // closed when the last holder let go
}

func newNetBody(h *Host, src BodyReader, stop func()) *netBody {
	if src == nil {
		src = emptyBody{}
	}
	return &netBody{h: h, src: src, stop: stop, refs: 1,
		ready: make(chan struct{}), more: make(chan struct{}, 1), quit: make(chan struct{})}
}

type emptyBody struct{}

func (emptyBody) Read(int) ([]byte, error) { return []byte{}, nil }
func (emptyBody) Close() error             { return nil }

var errBudget = errors.New("the host's buffer budget is spent: the response body was refused")

// pumpRead bounds one read of the pump: a sender may allocate what it is asked for, and
// a streamed answer comes in small pieces.
const pumpRead = 64 << 10

// pump reads the body chunk by chunk until it ends, fails, or the guest lets go; it
// closes the body when it returns. A Read blocked on the network returns when stop
// cancels the request's context.
func (b *netBody) pump() {
	defer b.src.Close()
	for {
		p, err := b.src.Read(min(b.h.maxRead, pumpRead))
		if err == nil && len(p) == 0 {
			err = io.EOF
		}
		b.mu.Lock()
		select {
		case <-b.quit:
			b.mu.Unlock()
			return
		default:
		}
		if err == nil && !b.h.charge(int64(len(p))) {
			err = errBudget
		}
		if err != nil {
			b.err = err
		} else {
			b.chunk = p
		}
		close(b.ready)
		b.mu.Unlock()
		if err != nil {
			return
		}
		select {
		case <-b.more:
		case <-b.quit:
			return
		}
	}
}

func (b *netBody) ref() {
	b.mu.Lock()
	b.refs++
	b.mu.Unlock()
}

// unref lets go of one hold; the last ends the request and releases the chunk held.
func (b *netBody) unref() {
	b.mu.Lock()
	b.refs--
	last := b.refs == 0
	if last {
		close(b.quit)
		b.h.release(int64(len(b.chunk)))
		b.chunk = nil
	}
	b.mu.Unlock()
	if last {
		b.stop()
	}
}

// read is the input-stream's non-blocking read: what has arrived, up to len(p); nothing
// while the next chunk is on its way; io.EOF or the failure once all was read.
func (b *netBody) read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.chunk) > 0 {
		k := copy(p, b.chunk)
		b.chunk = b.chunk[k:]
		b.h.release(int64(k))
		if len(b.chunk) == 0 {
			b.chunk = nil
			b.ready = make(chan struct{})
			b.more <- struct{}{} // never blocks: one signal per chunk, taken before the next
		}
		return k, nil
	}
	if errors.Is(b.err, io.EOF) {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, &bodyError{b.err}
	}
	return 0, nil
}

// bodyError is a response body's failure as its stream reports it: the io-error's
// http-error-code tells the cap from a broken connection.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return "reading the response body: " + e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// readyCh is closed when a read would return something: bytes, the end or a failure.
func (b *netBody) readyCh() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready
}

// failure is the error-code of a body that failed, nil if it did not (or has not yet).
func (b *netBody) failure() *abi.Variant {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err == nil || errors.Is(b.err, io.EOF) {
		return nil
	}
	v := bodyErrorCode(b.err)
	return &v
}

// bodyErrorCode is the http error-code of a failed response body.
func bodyErrorCode(err error) abi.Variant {
	switch {
	case errors.Is(err, ErrResponseBodySize):
		return abi.Variant{Case: heResponseBodySize, Value: none}
	case errors.Is(err, errBudget):
		return internalError(err.Error())
	default:
		return abi.Variant{Case: heResponseIncomplete}
	}
}
