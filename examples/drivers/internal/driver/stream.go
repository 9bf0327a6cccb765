package driver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest"
)

// Event is one server-sent event: its event name (empty when the stream names none)
// and its data lines joined with "\n".
type Event struct {
	Name string
	Data string
}

// maxEventLine bounds one line of a provider's event stream.
const maxEventLine = 4 << 20

// PostStream sends body as JSON to url through capsulegate:http/outgoing@0.2.0 and hands
// each server-sent event of a 2xx text/event-stream answer to on as it arrives, so the
// driver can emit text while the model is still answering. A 2xx answer that is not an
// event stream (a server that ignores "stream": true) is returned whole for the
// non-streaming decoder; any other outcome is a provider error message.
func PostStream(provider, url string, headers []guest.Pair, body []byte, on func(Event) error) (whole []byte, msg string) {
	hs := append([]guest.Pair{{Key: "content-type", Value: "application/json"}, {Key: "accept", Value: "text/event-stream"}}, headers...)
	resp, err := guest.HTTPOpen(guest.HTTPRequest{Method: "POST", URL: url, Headers: hs, Body: body})
	if err != nil {
		return nil, fmt.Sprintf("%s: request failed: %v", provider, err)
	}
	defer resp.Body.Close()
	if resp.Status < 200 || resp.Status > 299 || !isEventStream(resp.Headers) {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Sprintf("%s: reading the response failed: %v", provider, err)
		}
		if resp.Status < 200 || resp.Status > 299 {
			return nil, fmt.Sprintf("%s: HTTP %d: %s", provider, resp.Status, ErrorMessage(b))
		}
		return b, ""
	}
	if err := ReadEvents(resp.Body, on); err != nil {
		return nil, fmt.Sprintf("%s: %v", provider, err)
	}
	return nil, ""
}

func isEventStream(headers []guest.Pair) bool {
	for _, h := range headers {
		if strings.EqualFold(h.Key, "content-type") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(h.Value)), "text/event-stream") {
			return true
		}
	}
	return false
}

// ReadEvents parses a server-sent event stream from r, calling on for each event as
// soon as its closing blank line arrives. Comments and fields other than event and data
// are skipped; an error from on stops the reading.
func ReadEvents(r io.Reader, on func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	var ev Event
	var data []string
	dispatch := func() error {
		if data == nil {
			ev = Event{}
			return nil
		}
		ev.Data = strings.Join(data, "\n")
		err := on(ev)
		ev, data = Event{}, nil
		return err
	}
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 {
			if err := dispatch(); err != nil {
				return err
			}
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			ev.Name = string(value)
		case "data":
			data = append(data, string(value))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the event stream failed: %v", err)
	}
	return dispatch() // a last event without its blank line still counts
}
