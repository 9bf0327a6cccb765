package runtime

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/capsulegate/capsulegate/errs"
)

// TraceSink appends each event as one JSON line to trace.jsonl. Lines reach the file at
// a task's or the session's end, or traceDelay after the first line still waiting: one
// write per task, not one per event, while a long task's events still show promptly.
type TraceSink struct {
	mu      sync.Mutex
	f       *os.File
	w       *bufio.Writer
	content bool
	timer   *time.Timer // flushLater, armed while lines wait
	armed   bool
	delay   time.Duration // traceDelay; tests shorten or lengthen it
	err     error         // a timed flush's failure, returned by the next Event
	closed  bool
}

// traceDelay is the longest a trace line waits for the file.
const traceDelay = 50 * time.Millisecond

// NewTraceSink opens path for appending; content keeps inputs and outputs
// (trace.capture: content), otherwise only sizes are kept.
func NewTraceSink(path string, content bool) (*TraceSink, error) {
	// Opened with a plain system call: os.OpenFile would also try (and fail) to add the
	// regular file to the poller, four fcntl calls and an epoll_ctl for every session.
	fd, err := unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_APPEND|unix.O_CLOEXEC, 0o600)
	if err != nil {
		err = &os.PathError{Op: "open", Path: path, Err: err}
		return nil, errs.Wrap(err, CodeTrace, "runtime", "cannot open the trace "+path, "check that work_root is writable")
	}
	f := os.NewFile(uintptr(fd), path)
	return &TraceSink{f: f, w: bufio.NewWriter(f), content: content, delay: traceDelay}, nil
}

// traceEnvelope is what every trace line starts with, in this order (trace.md).
type traceEnvelope struct {
	Type      string  `json:"event_type"`
	ID        string  `json:"event_id"`
	ParentID  *string `json:"parent_id"`
	SessionID string  `json:"session_id"`
	Time      int64   `json:"timestamp"`
}

// Event writes e as {"event_type", "event_id", "parent_id", "session_id", "timestamp", …}:
// the envelope, then the data's fields, then the content kept, encoded once each and
// joined (no decode and re-encode through a map).
func (t *TraceSink) Event(e *Event) error {
	if e.Type == EventChunk {
		return nil // streaming detail for live subscribers; inference and task_end hold the text
	}
	env := traceEnvelope{Type: e.Type, ID: e.ID, SessionID: e.SessionID, Time: e.Time.UnixMilli()}
	if e.ParentID != "" {
		env.ParentID = &e.ParentID
	}
	line, err := json.Marshal(env)
	if err != nil {
		return errs.Wrap(err, CodeTrace, "runtime", "cannot encode a trace event", "")
	}
	if e.Data != nil {
		data, err := json.Marshal(e.Data)
		if err != nil {
			return errs.Wrap(err, CodeTrace, "runtime", "cannot encode a trace event", "")
		}
		if line, err = joinObject(line, data); err != nil {
			return errs.Wrap(err, CodeTrace, "runtime", "cannot encode a trace event", "")
		}
	}
	if t.content && len(e.Content) > 0 {
		keys := make([]string, 0, len(e.Content))
		for k := range e.Content {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kv, err := json.Marshal(map[string]string{k: e.Content[k]})
			if err != nil {
				return errs.Wrap(err, CodeTrace, "runtime", "cannot encode a trace event", "")
			}
			if line, err = joinObject(line, kv); err != nil {
				return errs.Wrap(err, CodeTrace, "runtime", "cannot encode a trace event", "")
			}
		}
	}
	line = append(line, '\n')
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if _, err := t.w.Write(line); err != nil {
		return t.failed(err)
	}
	switch {
	case e.Type == EventReceipt || e.Type == EventSessionEnd:
		// A task's receipt is its last event, sent right after its task_end: one write
		// per task.
		return t.flushLocked()
	case t.w.Buffered() > 0 && !t.armed:
		t.armed = true
		if t.timer == nil {
			t.timer = time.AfterFunc(t.delay, t.flushLater)
		} else {
			t.timer.Reset(t.delay)
		}
	}
	return nil
}

func (t *TraceSink) flushLater() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.armed = false
	if !t.closed && t.err == nil {
		_ = t.flushLocked()
	}
}

func (t *TraceSink) flushLocked() error {
	if t.armed {
		t.timer.Stop()
		t.armed = false
	}
	if t.w.Buffered() == 0 {
		return nil
	}
	if err := t.w.Flush(); err != nil {
		return t.failed(err)
	}
	return nil
}

func (t *TraceSink) failed(err error) error {
	t.err = errs.Wrap(err, CodeTrace, "runtime", "cannot write the trace "+t.f.Name(), "free disk space; the session stops rather than lose events")
	return t.err
}

// joinObject appends the members of the JSON object obj to the object line; null adds
// nothing, anything but an object is refused.
func joinObject(line, obj []byte) ([]byte, error) {
	switch {
	case string(obj) == "null" || string(obj) == "{}":
		return line, nil
	case len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}':
		return line, fmt.Errorf("event data is not a JSON object: %.20s", obj)
	}
	line = append(line[:len(line)-1], ',')
	return append(line, obj[1:]...), nil
}

// Close writes what waits and closes the trace file.
func (t *TraceSink) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
	if err := t.w.Flush(); err != nil {
		t.f.Close()
		return fmt.Errorf("flush trace: %w", err)
	}
	return t.f.Close()
}
