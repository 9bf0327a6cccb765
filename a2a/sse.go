package a2a

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// sseWriter writes Server-Sent Events. Each event is one JSON document on a single data
// line (JSON escapes newlines): a JSON-RPC response, or over HTTP+JSON the bare event,
// with the task's event seq as its id.
type sseWriter struct {
	w  *bufio.Writer
	rc *http.ResponseController
}

// startSSE sends the stream's headers.
func startSSE(w http.ResponseWriter) (*sseWriter, error) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // keep proxies from holding events back
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return nil, fmt.Errorf("a2a: streaming needs a flushable response: %w", err)
	}
	return &sseWriter{w: bufio.NewWriter(w), rc: rc}, nil
}

// write buffers one event; id 0 and name "" are left out.
func (s *sseWriter) write(id uint64, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("a2a: encoding an event: %w", err)
	}
	if id > 0 {
		s.w.WriteString("id: " + strconv.FormatUint(id, 10) + "\n")
	}
	if name != "" {
		s.w.WriteString("event: " + name + "\n")
	}
	s.w.WriteString("data: ")
	s.w.Write(data)
	_, err = s.w.WriteString("\n\n")
	return err
}

// comment buffers an SSE comment, which clients ignore: a heartbeat.
func (s *sseWriter) comment(text string) error {
	_, err := s.w.WriteString(": " + text + "\n\n")
	return err
}

func (s *sseWriter) flush() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// stream writes a subscription's events until one ends the interaction (a final status,
// or a task snapshot in a terminal state), the client goes away, or writing fails.
func (h *Handler) stream(a *answer, sub *subscription) {
	defer sub.close()
	s, err := startSSE(a.w)
	if err != nil {
		a.fail(newRPCError(codeInternal, "Internal error", err.Error(), nil), false)
		return
	}
	tick := time.NewTicker(h.heartbeat)
	defer tick.Stop()
	links := h.linksFor(a.r)
	for {
		events, more := sub.pull()
		for _, e := range events {
			// A client sees an event only once it is durable; one the store failed to
			// write ends the stream (the client may resubscribe).
			if err := e.durable.wait(); err != nil {
				h.config().Logger.Error("a2a task store write failed; the stream ends", "task", sub.t.id, "err", err)
				_ = s.flush()
				return
			}
			name := ""
			if e.kind == evLagged {
				name = "lagged"
			}
			if s.write(e.seq, name, a.body(a.d.event(links.event(e, sub.t.id), sub.t.id, sub.t.contextID))) != nil {
				return
			}
			if e.ends() {
				_ = s.flush()
				return
			}
		}
		if s.flush() != nil {
			return
		}
		select {
		case <-more:
		case <-a.r.Context().Done():
			return
		case <-tick.C:
			if s.comment("keep-alive") != nil {
				return
			}
			h.fresh(sub.t) // a fleet's task another replica runs: read again, should a signal have been missed
		}
	}
}
