// Package otlptest is a real OTLP/HTTP trace receiver for tests: a loopback HTTP server
// that answers POST /v1/traces as an OpenTelemetry collector does, decodes the spans
// (binary protobuf or OTLP JSON, gzipped or not) and keeps them for the test to check.
//
// It shares no code with the exporter the gateway uses (otlptracehttp, which serializes
// with go.opentelemetry.io/proto/otlp): it imports no go.opentelemetry.io package and
// reads the protobuf wire format itself with protowire, following the published
// opentelemetry-proto definitions (collector/trace/v1/trace_service.proto,
// trace/v1/trace.proto, common/v1/common.proto, resource/v1/resource.proto) and the OTLP
// specification's JSON mapping. A mistake in the exporter's encoding is therefore not
// repeated by the decoder that checks it.
package otlptest

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Path is where OTLP/HTTP exporters send traces.
const Path = "/v1/traces"

// maxBody bounds a request body, after gzip.
const maxBody = 64 << 20

// Span is one span as the receiver decoded it.
type Span struct {
	TraceID, SpanID, ParentSpanID string // lowercase hex, "" when empty
	TraceState, Name              string
	Kind                          int // SpanKind: 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer
	Start, End                    time.Time
	// Attrs holds each attribute's value as string, bool, int64, float64, []any,
	// map[string]any or []byte; nil for an empty AnyValue.
	Attrs         map[string]any
	Events        []Event
	StatusCode    int // 0 unset, 1 ok, 2 error
	StatusMessage string
	Scope         string         // the instrumentation scope's name
	Resource      map[string]any // the resource's attributes, as Attrs
}

// Event is one event of a span.
type Event struct {
	Name  string
	Time  time.Time
	Attrs map[string]any
}

// Str returns the string attribute key, or "" when it is absent or not a string.
func (s Span) Str(key string) string {
	v, _ := s.Attrs[key].(string)
	return v
}

// Int returns the integer attribute key, or 0 when it is absent or not an integer.
func (s Span) Int(key string) int64 {
	v, _ := s.Attrs[key].(int64)
	return v
}

// Float returns the double attribute key, or 0 when it is absent or not a double.
func (s Span) Float(key string) float64 {
	v, _ := s.Attrs[key].(float64)
	return v
}

// String describes the span on one line, for failure messages.
func (s Span) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q trace=%s span=%s", s.Name, s.TraceID, s.SpanID)
	if s.ParentSpanID != "" {
		fmt.Fprintf(&b, " parent=%s", s.ParentSpanID)
	}
	fmt.Fprintf(&b, " kind=%d", s.Kind)
	if !s.Start.IsZero() || !s.End.IsZero() {
		fmt.Fprintf(&b, " dur=%s", s.End.Sub(s.Start))
	}
	if s.StatusCode != 0 || s.StatusMessage != "" {
		fmt.Fprintf(&b, " status=%d %q", s.StatusCode, s.StatusMessage)
	}
	if s.Scope != "" {
		fmt.Fprintf(&b, " scope=%q", s.Scope)
	}
	if len(s.Attrs) > 0 {
		fmt.Fprintf(&b, " attrs=%s", formatAttrs(s.Attrs))
	}
	for _, e := range s.Events {
		fmt.Fprintf(&b, " event=%q", e.Name)
		if len(e.Attrs) > 0 {
			b.WriteString(formatAttrs(e.Attrs))
		}
	}
	return b.String()
}

func formatAttrs(m map[string]any) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%#v", k, m[k])
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// ByName returns the spans named name, in order.
func ByName(spans []Span, name string) []Span {
	var out []Span
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// Children returns the spans whose parent is parent (same trace, parent span id), in order.
func Children(spans []Span, parent Span) []Span {
	var out []Span
	if parent.SpanID == "" {
		return nil
	}
	for _, s := range spans {
		if s.TraceID == parent.TraceID && s.ParentSpanID == parent.SpanID {
			out = append(out, s)
		}
	}
	return out
}

// Receiver is a running OTLP/HTTP trace receiver.
type Receiver struct {
	srv *httptest.Server

	mu    sync.Mutex
	spans []Span
	reqs  int
	errs  []error
}

// Start starts a receiver on a loopback port; t's cleanup stops it.
func Start(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

// Endpoint returns the receiver's base URL, "http://127.0.0.1:port".
func (r *Receiver) Endpoint() string { return r.srv.URL }

// URL returns the URL exporters post traces to, Endpoint()+"/v1/traces".
func (r *Receiver) URL() string { return r.srv.URL + Path }

// Spans returns a copy of the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Span, len(r.spans))
	for i, s := range r.spans {
		out[i] = cloneSpan(s)
	}
	return out
}

// Requests returns how many requests the receiver has answered, accepted or refused.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs
}

// Err returns every request the receiver refused (an undecodable body, a content type
// or encoding it does not take, a wrong method or path), joined; nil when none.
func (r *Receiver) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return errors.Join(r.errs...)
}

// WaitFor polls the received spans until ok holds for them and returns them; when
// timeout passes first it fails t with every span received and any refused request.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("otlptest: spans not as expected after %s\n%s", timeout, r.dump(spans))
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (r *Receiver) dump(spans []Span) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d request(s), %d span(s):\n", r.Requests(), len(spans))
	for i, s := range spans {
		fmt.Fprintf(&b, "  %d: %s\n", i, s)
	}
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "refused: %v\n", err)
	}
	return b.String()
}

func (r *Receiver) fail(w http.ResponseWriter, code int, err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
	http.Error(w, err.Error(), code)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.reqs++
	r.mu.Unlock()
	if req.URL.Path != Path {
		r.fail(w, http.StatusNotFound, fmt.Errorf("otlptest: %s %s: not %s", req.Method, req.URL.Path, Path))
		return
	}
	if req.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		r.fail(w, http.StatusMethodNotAllowed, fmt.Errorf("otlptest: %s %s: only POST", req.Method, req.URL.Path))
		return
	}
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	if err != nil || (mt != "application/x-protobuf" && mt != "application/json") {
		r.fail(w, http.StatusUnsupportedMediaType,
			fmt.Errorf("otlptest: Content-Type %q: want application/x-protobuf or application/json", req.Header.Get("Content-Type")))
		return
	}
	var body io.Reader = req.Body
	switch enc := strings.ToLower(strings.TrimSpace(req.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, http.StatusBadRequest, fmt.Errorf("otlptest: gzip body: %w", err))
			return
		}
		defer zr.Close()
		body = zr
	default:
		r.fail(w, http.StatusUnsupportedMediaType, fmt.Errorf("otlptest: Content-Encoding %q: want gzip or none", enc))
		return
	}
	data, err := io.ReadAll(io.LimitReader(body, maxBody+1))
	if err != nil {
		r.fail(w, http.StatusBadRequest, fmt.Errorf("otlptest: reading body: %w", err))
		return
	}
	if len(data) > maxBody {
		r.fail(w, http.StatusRequestEntityTooLarge, fmt.Errorf("otlptest: body over %d bytes", maxBody))
		return
	}
	var spans []Span
	if mt == "application/json" {
		spans, err = decodeJSON(data)
	} else {
		spans, err = decodeProto(data)
	}
	if err != nil {
		r.fail(w, http.StatusBadRequest, fmt.Errorf("otlptest: %s body: %w", mt, err))
		return
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.mu.Unlock()
	// An empty ExportTraceServiceResponse: no partial_success.
	w.Header().Set("Content-Type", mt)
	if mt == "application/json" {
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("{}"))
		return
	}
	w.WriteHeader(http.StatusOK)
}

func cloneSpan(s Span) Span {
	s.Attrs = cloneMap(s.Attrs)
	s.Resource = cloneMap(s.Resource)
	if s.Events != nil {
		ev := make([]Event, len(s.Events))
		for i, e := range s.Events {
			e.Attrs = cloneMap(e.Attrs)
			ev[i] = e
		}
		s.Events = ev
	}
	return s
}

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = cloneValue(e)
		}
		return out
	case map[string]any:
		return cloneMap(v)
	case []byte:
		return bytes.Clone(v)
	}
	return v
}
