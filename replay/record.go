package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/atomicfile"
)

// maxRecorded bounds one recorded response body.
const maxRecorded = 64 << 20

// redacted replaces every credential value found in a recorded answer.
const redacted = "[redacted]"

// credentialHeaders are the request headers whose values never reach a cassette.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization"}

// hopHeaders are not forwarded (RFC 9110 7.6.1), nor is Accept-Encoding: the recorder
// reads the answer as the provider's plain body.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	"Host", "Content-Length", "Accept-Encoding"}

// Recorder forwards every provider request to an upstream provider, answers with what
// it answered — a stream as it arrives — and writes each 2xx answer as a turn of the
// cassette recorded-<provider>.json in its folder (an event stream with the delays it
// had). No request header is recorded, and the values of credential headers are
// replaced in what is.
type Recorder struct {
	upstream *url.URL
	dir      string
	client   *http.Client

	// OnRecord, if set, is told of every turn written, or why one was not.
	OnRecord func(file string, turn int, err error)

	mu    sync.Mutex // one cassette write at a time
	chain chain      // the Responses answers recorded, for previous_response_id

	// A client has a turn's answer before the recorder has written it — the answer's
	// end is relayed first — so its next request can come back, and be answered, while
	// the earlier turn is still being saved. flights, the requests in flight by
	// conversation in the order they arrived, let a turn wait for the earlier turns of
	// its conversation to be written first.
	fmu     sync.Mutex
	flights map[string][]*flight
	// grace is how long the upstream's answer is still read once the client has hung up.
	grace time.Duration
	// held, if set, is told that turn's recording waits: for an earlier turn (earlier
	// >= 0) or, the client gone, for the upstream (earlier -1). For tests.
	held func(turn, earlier int)
}

// upstreamGrace is a Recorder's grace: a client may hang up as soon as it has an
// answer's last event, before the upstream's end of stream reaches the recorder, and the
// answer it has is still recorded. A client that leaves mid-answer costs at most this.
const upstreamGrace = 10 * time.Second

// flight is one request in flight: done closes once it has been recorded, or not.
type flight struct {
	turn int
	done chan struct{}
}

// NewRecorder returns a Recorder forwarding to upstream (an http or https base URL; a
// request's path is appended to its path) and writing into dir, which it creates.
func NewRecorder(upstream, dir string) (*Recorder, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errs.New(CodeUpstream, "replay", fmt.Sprintf("upstream %q is not an absolute http or https URL", upstream), "pass the provider's base URL, e.g. --upstream https://api.anthropic.com")
	}
	if dir == "" {
		return nil, errs.New(CodeDir, "replay", "no folder to record into", "pass --record <dir>")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, errs.Wrap(err, CodeDir, "replay", fmt.Sprintf("cannot create the recording folder %q", dir), "check the path and its permissions")
	}
	// No redirects: the credential would follow them to a host nobody named.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Recorder{upstream: u, dir: dir, client: client, grace: upstreamGrace}, nil
}

// ServeHTTP forwards one request and records its answer.
func (rc *Recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	provider, ok := ProviderForPath(r.URL.Path)
	if !ok || r.Method != http.MethodPost {
		writeError(w, OpenAI, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("the recorder forwards POST …/v1/messages, POST …/v1/chat/completions and POST …/v1/responses, not %s %q", r.Method, r.URL.Path))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		writeError(w, provider, http.StatusRequestEntityTooLarge, "request_too_large", err.Error())
		return
	}
	q, perr := parseRequest(provider, body, &rc.chain)
	first, turn := q.first, q.turn
	key := provider + "\x00" + first
	var f *flight
	if perr == nil {
		f = rc.depart(key, turn)
		defer rc.land(key, f)
	}
	target := *rc.upstream
	target.Path = strings.TrimSuffix(target.Path, "/") + r.URL.Path
	target.RawQuery = r.URL.RawQuery
	// The upstream request outlives the client's by the grace, not its cancellation.
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	defer cancel()
	defer context.AfterFunc(r.Context(), func() {
		if rc.held != nil {
			rc.held(turn, -1)
		}
		time.AfterFunc(rc.grace, cancel)
	})()
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, target.String(), bytes.NewReader(body))
	if err != nil {
		writeError(w, provider, http.StatusBadGateway, "api_error", err.Error())
		return
	}
	up.Header = r.Header.Clone()
	for _, k := range hopHeaders {
		up.Header.Del(k)
	}
	secrets := credentialValues(r.Header)
	resp, err := rc.client.Do(up)
	if err != nil {
		writeError(w, provider, http.StatusBadGateway, "api_error", "upstream: "+scrub(err.Error(), secrets))
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		if !strings.EqualFold(k, "Content-Length") {
			w.Header()[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	// remember notes a Responses answer's id before the client has all of it: the
	// client's next request may continue it by previous_response_id.
	// Only a stored Responses answer is remembered, once: nothing else is decoded for it.
	chained := provider == Responses && perr == nil && q.store && resp.StatusCode/100 == 2
	remember := func(id string) {
		if chained && id != "" {
			rc.chain.remember(id, q)
			chained = false
		}
	}
	var recorded json.RawMessage
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		recorded, err = relayStream(w, resp.Body, func(ev StreamEvent) {
			if chained {
				remember(eventResponseID(ev.Data))
			}
		})
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, maxRecorded+1))
		if chained {
			remember(responseID(b, nil))
		}
		w.Write(b)
		if err == nil && len(b) > maxRecorded {
			err = fmt.Errorf("the answer is over %d bytes", maxRecorded)
		}
		if t := bytes.TrimSpace(b); err == nil && (len(t) == 0 || t[0] != '{') {
			err = errors.New("the answer is not a JSON object")
		}
		recorded = b
	}
	file := filepath.Join(rc.dir, "recorded-"+provider+".json")
	switch {
	case perr != nil:
		err = fmt.Errorf("the request cannot be matched to a conversation: %w", perr)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		err = fmt.Errorf("upstream answered HTTP %d: not recorded", resp.StatusCode)
	}
	if err == nil {
		rc.await(key, f)
		err = rc.save(file, provider, first, turn, json.RawMessage(scrub(string(recorded), secrets)))
	}
	if rc.OnRecord != nil {
		rc.OnRecord(file, turn, err)
	}
}

// depart notes a request for turn of the conversation key as in flight.
func (rc *Recorder) depart(key string, turn int) *flight {
	f := &flight{turn: turn, done: make(chan struct{})}
	rc.fmu.Lock()
	defer rc.fmu.Unlock()
	if rc.flights == nil {
		rc.flights = map[string][]*flight{}
	}
	rc.flights[key] = append(rc.flights[key], f)
	return f
}

// land notes that f's turn is written, or will not be.
func (rc *Recorder) land(key string, f *flight) {
	rc.fmu.Lock()
	fs := rc.flights[key]
	i := slices.Index(fs, f)
	if fs = slices.Delete(fs, i, i+1); len(fs) == 0 {
		delete(rc.flights, key)
	} else {
		rc.flights[key] = fs
	}
	rc.fmu.Unlock()
	close(f.done)
}

// await returns once every earlier turn of f's conversation that arrived before f has
// landed. It waits only on requests that came first, so no two wait on each other.
func (rc *Recorder) await(key string, f *flight) {
	var earlier []*flight
	rc.fmu.Lock()
	for _, e := range rc.flights[key] {
		if e == f {
			break
		}
		if e.turn < f.turn {
			earlier = append(earlier, e)
		}
	}
	rc.fmu.Unlock()
	for _, e := range earlier {
		if rc.held != nil {
			rc.held(f.turn, e.turn)
		}
		<-e.done
	}
}

// relayStream copies an event stream to w event by event, flushing each, and returns it
// as a streamed turn whose delays are the gaps the client saw. onEvent, if set, sees each
// event once it is whole.
func relayStream(w http.ResponseWriter, body io.Reader, onEvent func(StreamEvent)) (json.RawMessage, error) {
	var evs []StreamEvent
	var cur StreamEvent
	var data []string
	last := time.Now()
	br := bufio.NewReaderSize(body, 64<<10)
	flush := func() {
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	for {
		line, err := br.ReadString('\n')
		if len(line) > 0 {
			w.Write([]byte(line))
			trimmed := strings.TrimRight(line, "\r\n")
			if trimmed == "" {
				if data != nil {
					now := time.Now()
					cur.DelayMS = min(int(now.Sub(last)/time.Millisecond), maxDelay)
					last = now
					joined := strings.Join(data, "\n")
					if json.Valid([]byte(joined)) {
						cur.Data = json.RawMessage(joined)
					} else {
						cur.Data, _ = json.Marshal(joined)
					}
					evs = append(evs, cur)
					if onEvent != nil {
						onEvent(cur) // before the client has the event's end
					}
				}
				flush()
				cur, data = StreamEvent{}, nil
			} else if field, value, _ := strings.Cut(trimmed, ":"); field == "event" {
				cur.Event = strings.TrimPrefix(value, " ")
			} else if field == "data" {
				data = append(data, strings.TrimPrefix(value, " "))
			}
		}
		if errors.Is(err, io.EOF) {
			flush()
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the upstream stream: %w", err)
		}
	}
	if len(evs) == 0 {
		return nil, errors.New("the upstream stream held no event")
	}
	return json.Marshal(map[string]any{"stream": evs})
}

// save writes turn number turn of the conversation matching first into file.
func (rc *Recorder) save(file, provider, first string, turn int, recorded json.RawMessage) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c := Cassette{Provider: provider}
	if old, err := os.ReadFile(file); err == nil {
		if err := json.Unmarshal(old, &c); err != nil {
			return fmt.Errorf("%s is not a cassette: %w", file, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	i := 0
	for i < len(c.Conversations) && c.Conversations[i].Match != first {
		i++
	}
	if i == len(c.Conversations) {
		c.Conversations = append(c.Conversations, Conversation{Match: first})
	}
	conv := &c.Conversations[i]
	switch {
	case turn < len(conv.Turns):
		conv.Turns[turn] = recorded // a later run of the same conversation wins
	case turn == len(conv.Turns):
		conv.Turns = append(conv.Turns, recorded)
	default:
		return fmt.Errorf("turn %d of %q arrived before turn %d: not recorded", turn, short(first), len(conv.Turns))
	}
	out, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(file, append(out, '\n'), 0o644)
}

// credentialValues returns the values of h's credential headers, and each bearer
// token alone, longest first so a token inside a header value is replaced whole.
func credentialValues(h http.Header) []string {
	var vals []string
	for _, k := range credentialHeaders {
		for _, v := range h.Values(k) {
			if v = strings.TrimSpace(v); v != "" {
				vals = append(vals, v)
			}
			if _, tok, ok := strings.Cut(v, " "); ok && strings.TrimSpace(tok) != "" {
				vals = append(vals, strings.TrimSpace(tok))
			}
		}
	}
	return vals
}

func scrub(s string, secrets []string) string {
	for _, v := range secrets {
		if len(v) >= 4 { // shorter values would mangle ordinary text
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}
