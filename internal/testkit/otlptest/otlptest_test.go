package otlptest_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/capsulegate/capsulegate/internal/testkit/otlptest"
)

// The requests below are encoded by hand, field by field, from the published
// opentelemetry-proto definitions.

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func fStr(n protowire.Number, s string) []byte {
	return protowire.AppendString(protowire.AppendTag(nil, n, protowire.BytesType), s)
}

func fBytes(n protowire.Number, b []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, n, protowire.BytesType), b)
}

func fMsg(n protowire.Number, parts ...[]byte) []byte { return fBytes(n, cat(parts...)) }

func fVarint(n protowire.Number, v uint64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), v)
}

func fFixed64(n protowire.Number, v uint64) []byte {
	return protowire.AppendFixed64(protowire.AppendTag(nil, n, protowire.Fixed64Type), v)
}

func fFixed32(n protowire.Number, v uint32) []byte {
	return protowire.AppendFixed32(protowire.AppendTag(nil, n, protowire.Fixed32Type), v)
}

// unknown is one field of every wire type under numbers no OTLP message uses here.
func unknown() []byte {
	group := cat(
		protowire.AppendTag(nil, 904, protowire.StartGroupType),
		fVarint(1, 7), fStr(2, "inside a group"),
		protowire.AppendTag(nil, 904, protowire.EndGroupType),
	)
	return cat(fVarint(900, 12345), fFixed32(901, 1), fFixed64(902, 2), fStr(903, "unknown"), group)
}

// AnyValue bodies (common.proto).
func avStr(s string) []byte     { return fStr(1, s) }
func avBool(b bool) []byte      { return fVarint(2, protowire.EncodeBool(b)) }
func avInt(i int64) []byte      { return fVarint(3, uint64(i)) }
func avDouble(f float64) []byte { return fFixed64(4, math.Float64bits(f)) }
func avBytes(b []byte) []byte   { return fBytes(7, b) }
func avArray(vals ...[]byte) []byte {
	var body []byte
	for _, v := range vals {
		body = append(body, fMsg(1, v)...)
	}
	return fMsg(5, body)
}
func avKVList(kvs ...[]byte) []byte {
	var body []byte
	for _, kv := range kvs {
		body = append(body, fMsg(1, kv)...)
	}
	return fMsg(6, body)
}

// kv is a KeyValue body; attr is it as the field num of its container.
func kv(key string, val []byte) []byte { return cat(fStr(1, key), fMsg(2, val)) }
func attr(num protowire.Number, key string, val []byte) []byte {
	return fMsg(num, kv(key, val))
}

var (
	traceID  = []byte{0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03, 0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c}
	spanID   = []byte{0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74}
	parentID = []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08}
	start    = time.Unix(1700000000, 123456789)
	end      = start.Add(1500 * time.Millisecond)
	evTime   = start.Add(time.Millisecond)
)

// fullSpan is a Span body with every field the receiver reads, unknown fields between them.
func fullSpan() []byte {
	return cat(
		unknown(),
		fBytes(1, traceID),
		fBytes(2, spanID),
		fStr(3, "vendor=x"),
		fBytes(4, parentID),
		fFixed32(16, 0x301), // flags: read past
		fStr(5, "tool.call"),
		fVarint(6, 3), // SPAN_KIND_CLIENT
		fFixed64(7, uint64(start.UnixNano())),
		fFixed64(8, uint64(end.UnixNano())),
		attr(9, "s", avStr("text")),
		attr(9, "b", avBool(true)),
		attr(9, "i", avInt(-42)),
		attr(9, "f", avDouble(2.5)),
		attr(9, "bytes", avBytes([]byte{0, 1, 0xff})),
		attr(9, "arr", avArray(avStr("a"), avInt(1), avBool(false), avArray(avDouble(-1)))),
		attr(9, "kv", avKVList(kv("inner", avStr("x")), kv("n", avInt(7)), kv("deep", avKVList(kv("z", avBool(true)))))),
		attr(9, "empty", nil),
		fMsg(9, fStr(1, "novalue")), // a KeyValue without a value
		fVarint(10, 3),              // dropped_attributes_count
		fMsg(11, fFixed64(1, uint64(evTime.UnixNano())), fStr(2, "retry"), attr(3, "attempt", avInt(2)), fVarint(4, 1), unknown()),
		fMsg(11, fStr(2, "bare")),
		fVarint(12, 0), // dropped_events_count
		fMsg(13, fBytes(1, traceID), fBytes(2, parentID), fStr(3, "")), // a link: read past
		fMsg(15, fVarint(1, 9), fStr(2, "boom"), fVarint(3, 2), unknown()),
		unknown(),
	)
}

func wantFull(scope string, resource map[string]any) otlptest.Span {
	return otlptest.Span{
		TraceID:      "5b8efff798038103d269b633813fc60c",
		SpanID:       "eee19b7ec3c1b174",
		ParentSpanID: "0102030405060708",
		TraceState:   "vendor=x",
		Name:         "tool.call",
		Kind:         3,
		Start:        start,
		End:          end,
		Attrs: map[string]any{
			"s":     "text",
			"b":     true,
			"i":     int64(-42),
			"f":     2.5,
			"bytes": []byte{0, 1, 0xff},
			"arr":   []any{"a", int64(1), false, []any{-1.0}},
			"kv": map[string]any{
				"inner": "x",
				"n":     int64(7),
				"deep":  map[string]any{"z": true},
			},
			"empty":   nil,
			"novalue": nil,
		},
		Events: []otlptest.Event{
			{Name: "retry", Time: evTime, Attrs: map[string]any{"attempt": int64(2)}},
			{Name: "bare"},
		},
		StatusCode:    2,
		StatusMessage: "boom",
		Scope:         scope,
		Resource:      resource,
	}
}

// request wraps ResourceSpans bodies in an ExportTraceServiceRequest.
func request(resourceSpans ...[]byte) []byte {
	var b []byte
	for _, rs := range resourceSpans {
		b = append(b, fMsg(1, rs)...)
	}
	return b
}

func resourceMsg(kvs ...[]byte) []byte {
	var body []byte
	for _, k := range kvs {
		body = append(body, fMsg(1, k)...)
	}
	return fMsg(1, body, fVarint(2, 0))
}

func scopeSpans(scope string, spans ...[]byte) []byte {
	body := fMsg(1, fStr(1, scope), fStr(2, "1.0.0"), attr(3, "scope.attr", avStr("v")))
	for _, s := range spans {
		body = append(body, fMsg(2, s)...)
	}
	return fMsg(2, body, fStr(3, "https://opentelemetry.io/schemas/1.26.0"))
}

func simpleSpan(name string, id, parent byte) []byte {
	b := cat(fBytes(1, traceID), fBytes(2, []byte{0, 0, 0, 0, 0, 0, 0, id}), fStr(5, name), fVarint(6, 1))
	if parent != 0 {
		b = append(b, fBytes(4, []byte{0, 0, 0, 0, 0, 0, 0, parent})...)
	}
	return b
}

func gz(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

type post struct {
	method, path string // "" for POST /v1/traces
	contentType  string
	encoding     string
	body         []byte
}

func (p post) do(t *testing.T, r *otlptest.Receiver) (int, http.Header, []byte) {
	t.Helper()
	method, url := http.MethodPost, r.URL()
	if p.method != "" {
		method = p.method
	}
	if p.path != "" {
		url = r.Endpoint() + p.path
	}
	req, err := http.NewRequest(method, url, bytes.NewReader(p.body))
	if err != nil {
		t.Fatal(err)
	}
	if p.contentType != "" {
		req.Header.Set("Content-Type", p.contentType)
	}
	if p.encoding != "" {
		req.Header.Set("Content-Encoding", p.encoding)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, body
}

const protoType = "application/x-protobuf"

func TestDecodeProtobuf(t *testing.T) {
	svc := map[string]any{"service.name": "gateway", "host.id": int64(3)}
	svcRes := resourceMsg(kv("service.name", avStr("gateway")), kv("host.id", avInt(3)))
	tests := []struct {
		name string
		post post
		want []otlptest.Span
	}{
		{
			name: "every field, every value kind, unknown fields",
			post: post{body: cat(unknown(), request(cat(svcRes, scopeSpans("capsulegate", fullSpan()), unknown())), unknown())},
			want: []otlptest.Span{wantFull("capsulegate", svc)},
		},
		{
			name: "gzip",
			post: post{encoding: "gzip", body: gz(request(cat(svcRes, scopeSpans("capsulegate", fullSpan()))))},
			want: []otlptest.Span{wantFull("capsulegate", svc)},
		},
		{
			name: "content type with parameters",
			post: post{contentType: protoType + "; charset=binary", body: request(scopeSpans("s", simpleSpan("a", 1, 0)))},
			want: []otlptest.Span{{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "0000000000000001", Name: "a", Kind: 1, Scope: "s"}},
		},
		{
			name: "empty request",
			post: post{body: nil},
			want: nil,
		},
		{
			name: "resource after the spans, scope after its spans, several of each",
			post: post{body: request(
				cat(
					scopeSpans("one", simpleSpan("root", 1, 0), simpleSpan("child", 2, 1)),
					fMsg(2, fMsg(2, simpleSpan("late-scope", 3, 1)), fMsg(1, fStr(1, "two"))),
					svcRes,
				),
				scopeSpans("three", simpleSpan("other", 4, 0)),
			)},
			want: []otlptest.Span{
				{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "0000000000000001", Name: "root", Kind: 1, Scope: "one", Resource: svc},
				{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "0000000000000002", ParentSpanID: "0000000000000001", Name: "child", Kind: 1, Scope: "one", Resource: svc},
				{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "0000000000000003", ParentSpanID: "0000000000000001", Name: "late-scope", Kind: 1, Scope: "two", Resource: svc},
				{TraceID: "5b8efff798038103d269b633813fc60c", SpanID: "0000000000000004", Name: "other", Kind: 1, Scope: "three"},
			},
		},
		{
			name: "a later attribute with the same key wins; a oneof's last member wins",
			post: post{body: request(scopeSpans("", cat(
				fStr(5, "dup"),
				attr(9, "k", avStr("first")),
				attr(9, "k", cat(avStr("second"), avInt(2))),
			)))},
			want: []otlptest.Span{{Name: "dup", Attrs: map[string]any{"k": int64(2)}}},
		},
		{
			name: "empty ids, zero times",
			post: post{body: request(scopeSpans("", cat(fBytes(1, nil), fBytes(2, nil), fBytes(4, nil), fStr(5, "bare"), fFixed64(7, 0))))},
			want: []otlptest.Span{{Name: "bare"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := otlptest.Start(t)
			p := tc.post
			if p.contentType == "" {
				p.contentType = protoType
			}
			code, hdr, body := p.do(t, r)
			if code != http.StatusOK {
				t.Fatalf("status %d %q; Err: %v", code, body, r.Err())
			}
			if ct := hdr.Get("Content-Type"); ct != protoType || len(body) != 0 {
				t.Errorf("response %q %q, want an empty %s ExportTraceServiceResponse", ct, body, protoType)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("Err: %v", err)
			}
			checkSpans(t, r.Spans(), tc.want)
			if n := r.Requests(); n != 1 {
				t.Errorf("Requests() = %d, want 1", n)
			}
		})
	}
}

func checkSpans(t *testing.T, got, want []otlptest.Span) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d spans, want %d:\n%v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
			t.Errorf("span %d times %v..%v, want %v..%v", i, g.Start, g.End, w.Start, w.End)
		}
		g.Start, g.End, w.Start, w.End = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		for j := range min(len(g.Events), len(w.Events)) {
			if !g.Events[j].Time.Equal(w.Events[j].Time) {
				t.Errorf("span %d event %d time %v, want %v", i, j, g.Events[j].Time, w.Events[j].Time)
			}
			g.Events[j].Time, w.Events[j].Time = time.Time{}, time.Time{}
		}
		if !reflect.DeepEqual(g, w) {
			t.Errorf("span %d:\n got %#v\nwant %#v", i, g, w)
		}
	}
}

// spanJSON is fullSpan in the OTLP JSON encoding: ids in hex (any case), 64-bit
// integers as strings or numbers, enums as integers, bytes in base64, unknown keys.
const spanJSON = `{
  "traceId": "5B8EFFF798038103D269B633813FC60C",
  "spanId": "eee19b7ec3c1b174",
  "traceState": "vendor=x",
  "parentSpanId": "0102030405060708",
  "flags": 769,
  "name": "tool.call",
  "kind": 3,
  "startTimeUnixNano": "1700000000123456789",
  "endTimeUnixNano": 1700000001623456789,
  "attributes": [
    {"key": "s", "value": {"stringValue": "text"}},
    {"key": "b", "value": {"boolValue": true}},
    {"key": "i", "value": {"intValue": "-42"}},
    {"key": "f", "value": {"doubleValue": 2.5}},
    {"key": "bytes", "value": {"bytesValue": "AAH/"}},
    {"key": "arr", "value": {"arrayValue": {"values": [
      {"stringValue": "a"}, {"intValue": 1}, {"boolValue": false},
      {"arrayValue": {"values": [{"doubleValue": "-1"}]}}]}}},
    {"key": "kv", "value": {"kvlistValue": {"values": [
      {"key": "inner", "value": {"stringValue": "x"}},
      {"key": "n", "value": {"intValue": "7"}},
      {"key": "deep", "value": {"kvlistValue": {"values": [{"key": "z", "value": {"boolValue": true}}]}}}]}}},
    {"key": "empty", "value": {}},
    {"key": "novalue"}
  ],
  "droppedAttributesCount": 3,
  "events": [
    {"timeUnixNano": "1700000000124456789", "name": "retry",
     "attributes": [{"key": "attempt", "value": {"intValue": "2"}}], "droppedAttributesCount": 1, "future": true},
    {"name": "bare"}
  ],
  "links": [{"traceId": "5b8efff798038103d269b633813fc60c", "spanId": "0102030405060708"}],
  "status": {"message": "boom", "code": 2},
  "someFutureField": {"nested": [1, 2, 3]}
}`

func jsonRequest(span string) string {
	return `{"resourceSpans": [{
  "resource": {"attributes": [
    {"key": "service.name", "value": {"stringValue": "gateway"}},
    {"key": "host.id", "value": {"intValue": 3}}]},
  "scopeSpans": [{"scope": {"name": "capsulegate", "version": "1.0.0"}, "spans": [` + span + `], "schemaUrl": ""}]
}]}`
}

func TestDecodeJSON(t *testing.T) {
	svc := map[string]any{"service.name": "gateway", "host.id": int64(3)}
	tests := []struct {
		name string
		post post
		want []otlptest.Span
	}{
		{
			name: "every field, every value kind, unknown keys",
			post: post{body: []byte(jsonRequest(spanJSON))},
			want: []otlptest.Span{wantFull("capsulegate", svc)},
		},
		{
			name: "gzip",
			post: post{encoding: "gzip", body: gz([]byte(jsonRequest(spanJSON)))},
			want: []otlptest.Span{wantFull("capsulegate", svc)},
		},
		{
			name: "special doubles, url-safe unpadded bytes, nulls",
			post: post{contentType: "application/json; charset=utf-8", body: []byte(`{"resourceSpans":[{"resource":null,"scopeSpans":[{"spans":[{
				"name": "n", "kind": null, "status": null, "parentSpanId": "",
				"attributes": [
				  {"key": "inf", "value": {"doubleValue": "Infinity"}},
				  {"key": "neg", "value": {"doubleValue": "-Infinity"}},
				  {"key": "raw", "value": {"bytesValue": "AAH_"}},
				  {"key": "nil", "value": null},
				  {"key": "nulls", "value": {"stringValue": null, "intValue": 5}}
				]}]}]}]}`)},
			want: []otlptest.Span{{Name: "n", Attrs: map[string]any{
				"inf": math.Inf(1), "neg": math.Inf(-1), "raw": []byte{0, 1, 0xff}, "nil": nil, "nulls": int64(5),
			}}},
		},
		{
			name: "empty request",
			post: post{body: []byte(`{}`)},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := otlptest.Start(t)
			p := tc.post
			if p.contentType == "" {
				p.contentType = "application/json"
			}
			code, hdr, body := p.do(t, r)
			if code != http.StatusOK {
				t.Fatalf("status %d %q; Err: %v", code, body, r.Err())
			}
			if ct := hdr.Get("Content-Type"); ct != "application/json" || string(body) != "{}" {
				t.Errorf("response %q %q, want application/json {}", ct, body)
			}
			if err := r.Err(); err != nil {
				t.Fatalf("Err: %v", err)
			}
			checkSpans(t, r.Spans(), tc.want)
		})
	}
}

func TestRefused(t *testing.T) {
	ok := request(scopeSpans("s", simpleSpan("a", 1, 0)))
	tests := []struct {
		name    string
		post    post
		code    int
		wantErr string
	}{
		{"text/plain", post{contentType: "text/plain", body: ok}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"no content type", post{body: ok}, http.StatusUnsupportedMediaType, "Content-Type"},
		{"brotli", post{contentType: protoType, encoding: "br", body: ok}, http.StatusUnsupportedMediaType, "Content-Encoding"},
		{"GET", post{method: http.MethodGet, contentType: protoType}, http.StatusMethodNotAllowed, "only POST"},
		{"other path", post{path: "/v1/metrics", contentType: protoType, body: ok}, http.StatusNotFound, "/v1/metrics"},
		{"not gzip", post{contentType: protoType, encoding: "gzip", body: ok}, http.StatusBadRequest, "gzip"},
		{"truncated gzip", post{contentType: protoType, encoding: "gzip", body: gz(ok)[:20]}, http.StatusBadRequest, "body"},
		{"truncated tag", post{contentType: protoType, body: []byte{0x80}}, http.StatusBadRequest, "tag"},
		{"field number 0", post{contentType: protoType, body: fVarint(0, 1)}, http.StatusBadRequest, "tag"},
		{"length past the end", post{contentType: protoType, body: ok[:len(ok)-1]}, http.StatusBadRequest, "field"},
		{"truncated fixed64", post{contentType: protoType, body: request(scopeSpans("s", fFixed64(7, 1)[:5]))}, http.StatusBadRequest, "field 7"},
		{"stray end group", post{contentType: protoType, body: protowire.AppendTag(nil, 5, protowire.EndGroupType)}, http.StatusBadRequest, "field 5"},
		{"short trace id", post{contentType: protoType, body: request(scopeSpans("s", fBytes(1, []byte{1, 2, 3, 4, 5})))}, http.StatusBadRequest, "trace_id: 5 bytes"},
		{"long span id", post{contentType: protoType, body: request(scopeSpans("s", fBytes(2, make([]byte, 9))))}, http.StatusBadRequest, "span_id: 9 bytes"},
		{"name as varint", post{contentType: protoType, body: request(scopeSpans("s", fVarint(5, 1)))}, http.StatusBadRequest, "name (field 5): wire type"},
		{"name not UTF-8", post{contentType: protoType, body: request(scopeSpans("s", fStr(5, "\xff\xfe")))}, http.StatusBadRequest, "not UTF-8"},
		{"start as varint", post{contentType: protoType, body: request(scopeSpans("s", fVarint(7, 1)))}, http.StatusBadRequest, "start_time_unix_nano"},
		{"bad attribute value", post{contentType: protoType, body: request(scopeSpans("s", attr(9, "k", fStr(3, "x"))))}, http.StatusBadRequest, `attribute "k": int_value`},
		{"bad event", post{contentType: protoType, body: request(scopeSpans("s", fMsg(11, fVarint(2, 1))))}, http.StatusBadRequest, "events[0]"},
		{"json syntax", post{contentType: "application/json", body: []byte(`{"resourceSpans": [`)}, http.StatusBadRequest, "application/json body"},
		{"json enum by name", post{contentType: "application/json", body: []byte(jsonRequest(`{"kind": "SPAN_KIND_SERVER"}`))}, http.StatusBadRequest, "integers"},
		{"json id not hex", post{contentType: "application/json", body: []byte(jsonRequest(`{"traceId": "not-hex"}`))}, http.StatusBadRequest, "traceId"},
		{"json id base64", post{contentType: "application/json", body: []byte(jsonRequest(`{"spanId": "7uGbfsPBsXQ="}`))}, http.StatusBadRequest, "spanId"},
		{"json two oneof members", post{contentType: "application/json", body: []byte(jsonRequest(`{"attributes": [{"key": "k", "value": {"stringValue": "a", "boolValue": true}}]}`))}, http.StatusBadRequest, "oneof"},
		{"json bad int", post{contentType: "application/json", body: []byte(jsonRequest(`{"attributes": [{"key": "k", "value": {"intValue": "4.5"}}]}`))}, http.StatusBadRequest, "64-bit integer"},
		{"json bad bytes", post{contentType: "application/json", body: []byte(jsonRequest(`{"attributes": [{"key": "k", "value": {"bytesValue": "!!"}}]}`))}, http.StatusBadRequest, "base64"},
		{"protobuf sent as json", post{contentType: "application/json", body: ok}, http.StatusBadRequest, "application/json body"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := otlptest.Start(t)
			code, _, body := tc.post.do(t, r)
			if code != tc.code {
				t.Errorf("status %d %q, want %d", code, body, tc.code)
			}
			err := r.Err()
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Err() = %v, want one mentioning %q", err, tc.wantErr)
			}
			if spans := r.Spans(); len(spans) != 0 {
				t.Errorf("kept %d spans from a refused request", len(spans))
			}
			if n := r.Requests(); n != 1 {
				t.Errorf("Requests() = %d, want 1", n)
			}
		})
	}
}

func TestHelpers(t *testing.T) {
	r := otlptest.Start(t)
	post{contentType: protoType, body: request(scopeSpans("s",
		cat(simpleSpan("root", 1, 0), attr(9, "who", avStr("me")), attr(9, "n", avInt(9))),
		simpleSpan("child", 2, 1),
		simpleSpan("child", 3, 1),
		simpleSpan("grandchild", 4, 2),
	))}.do(t, r)
	spans := r.Spans()
	roots := otlptest.ByName(spans, "root")
	if len(roots) != 1 {
		t.Fatalf("ByName(root) = %v", roots)
	}
	root := roots[0]
	if root.Str("who") != "me" || root.Int("n") != 9 || root.Str("n") != "" || root.Int("who") != 0 || root.Str("absent") != "" {
		t.Errorf("Str/Int on %v", root)
	}
	kids := otlptest.Children(spans, root)
	if len(kids) != 2 || kids[0].SpanID != "0000000000000002" || kids[1].SpanID != "0000000000000003" {
		t.Errorf("Children(root) = %v", kids)
	}
	if got := otlptest.Children(spans, kids[0]); len(got) != 1 || got[0].Name != "grandchild" {
		t.Errorf("Children(child) = %v", got)
	}
	if got := otlptest.Children(spans, otlptest.Span{}); got != nil {
		t.Errorf("Children of a span without id = %v", got)
	}
	if got := otlptest.ByName(spans, "none"); got != nil {
		t.Errorf("ByName(none) = %v", got)
	}

	// Spans returns a copy.
	spans[0].Attrs["who"] = "changed"
	spans[0].Name = "changed"
	if again := r.Spans(); again[0].Str("who") != "me" || again[0].Name != "root" {
		t.Errorf("changing Spans()' result changed the receiver's: %v", again[0])
	}
}

func TestWaitFor(t *testing.T) {
	r := otlptest.Start(t)
	go func() {
		time.Sleep(50 * time.Millisecond)
		for i := byte(1); i <= 3; i++ {
			req, _ := http.NewRequest(http.MethodPost, r.URL(), bytes.NewReader(request(scopeSpans("s", simpleSpan(fmt.Sprint("s", i), i, 0)))))
			req.Header.Set("Content-Type", protoType)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	}()
	spans := r.WaitFor(t, 5*time.Second, func(s []otlptest.Span) bool { return len(s) == 3 })
	for i, s := range spans {
		if want := fmt.Sprint("s", i+1); s.Name != want {
			t.Errorf("span %d is %q, want %q (arrival order)", i, s.Name, want)
		}
	}
	if n := r.Requests(); n != 3 {
		t.Errorf("Requests() = %d, want 3", n)
	}

	// On timeout it fails the test with what it received.
	post{contentType: "text/plain", body: []byte("x")}.do(t, r)
	ft := &fakeTB{TB: t}
	got := r.WaitFor(ft, 30*time.Millisecond, func(s []otlptest.Span) bool { return len(s) == 4 })
	if got != nil || !ft.failed {
		t.Fatalf("WaitFor on timeout returned %v, failed %v", got, ft.failed)
	}
	for _, want := range []string{"4 request(s), 3 span(s)", `"s1"`, `"s3"`, "Content-Type"} {
		if !strings.Contains(ft.msg, want) {
			t.Errorf("timeout message lacks %q:\n%s", want, ft.msg)
		}
	}
}

type fakeTB struct {
	testing.TB
	failed bool
	msg    string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = true
	f.msg = fmt.Sprintf(format, args...)
}

// TestSharesNoCodeWithTheExporter: the receiver must not check the exporter's encoding
// with the exporter's own code.
func TestSharesNoCodeWithTheExporter(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed only %v", deps)
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "go.opentelemetry.io/") {
			t.Errorf("otlptest depends on %s", dep)
		}
	}
}
