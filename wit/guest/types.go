package guest

import (
	"errors"
	"strconv"
)

// Status is the murmur:tool/run enum status.
type Status uint8

const (
	StatusPassed Status = iota
	StatusFailed
	StatusError
)

func (s Status) String() string {
	switch s {
	case StatusPassed:
		return "passed"
	case StatusFailed:
		return "failed"
	case StatusError:
		return "error"
	}
	return "status(" + strconv.Itoa(int(s)) + ")"
}

// Pair is a WIT tuple<string, string>: a metadata entry or an HTTP header.
type Pair struct{ Key, Value string }

// ToolInput is the murmur:tool/run record tool-input. A nil field is none.
type ToolInput struct {
	Data    *string
	LogPath *string
}

// ToolResult is the murmur:tool/run record tool-result. A nil field is none.
type ToolResult struct {
	Status    Status
	Summary   *string
	Data      *string
	DataPath  *string
	Truncated bool
	Metadata  []Pair
}

// HTTPRequest is the capsulegate:http/outgoing record request.
type HTTPRequest struct {
	Method  string
	URL     string
	Headers []Pair
	Body    []byte
}

// HTTPResponse is the capsulegate:http/outgoing record response.
type HTTPResponse struct {
	Status  uint16
	Headers []Pair
	Body    []byte
}

// HTTPStream is the capsulegate:http/outgoing@0.2.0 record response-head: a response
// whose Body is read as it arrives.
type HTTPStream struct {
	Status  uint16
	Headers []Pair
	Body    *HTTPBody
}

// HTTPBody is an open response body (an io.ReadCloser); the host closes what a call
// leaves open when the call returns.
type HTTPBody struct {
	handle      uint32
	eof, closed bool
}

var errBodyClosed = errors.New("guest: read-body: the body is closed")

// Some returns a pointer to s, for option<string> fields.
func Some(s string) *string { return &s }

// Value returns *s, or "" for none.
func Value(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ErrNotGuest is returned by host imports called outside a wasip1 guest.
var ErrNotGuest = errors.New("guest: host imports are only available in a GOOS=wasip1 guest")

// HostError is an err(string) returned by a host import, such as a network policy refusal.
type HostError struct {
	Op  string // the import, e.g. "invoke"
	Msg string // the host's message, verbatim
}

func (e *HostError) Error() string { return e.Msg }
