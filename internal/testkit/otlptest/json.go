package otlptest

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// The OTLP JSON encoding: the proto3 JSON mapping (lowerCamelCase keys, 64-bit integers
// as decimal strings or numbers, bytes in base64) except that trace and span ids are hex
// strings and enums are integers only; unknown keys are ignored.

type jsonRequest struct {
	ResourceSpans []jsonResourceSpans `json:"resourceSpans"`
}

type jsonResourceSpans struct {
	Resource *struct {
		Attributes []jsonKeyValue `json:"attributes"`
	} `json:"resource"`
	ScopeSpans []jsonScopeSpans `json:"scopeSpans"`
}

type jsonScopeSpans struct {
	Scope *struct {
		Name string `json:"name"`
	} `json:"scope"`
	Spans []jsonSpan `json:"spans"`
}

type jsonSpan struct {
	TraceID           string         `json:"traceId"`
	SpanID            string         `json:"spanId"`
	ParentSpanID      string         `json:"parentSpanId"`
	TraceState        string         `json:"traceState"`
	Name              string         `json:"name"`
	Kind              jsonEnum       `json:"kind"`
	StartTimeUnixNano jsonUint64     `json:"startTimeUnixNano"`
	EndTimeUnixNano   jsonUint64     `json:"endTimeUnixNano"`
	Attributes        []jsonKeyValue `json:"attributes"`
	Events            []jsonEvent    `json:"events"`
	Status            *struct {
		Message string   `json:"message"`
		Code    jsonEnum `json:"code"`
	} `json:"status"`
}

type jsonEvent struct {
	TimeUnixNano jsonUint64     `json:"timeUnixNano"`
	Name         string         `json:"name"`
	Attributes   []jsonKeyValue `json:"attributes"`
}

type jsonKeyValue struct {
	Key   string        `json:"key"`
	Value *jsonAnyValue `json:"value"`
}

type jsonAnyValue struct {
	StringValue *string     `json:"stringValue"`
	BoolValue   *bool       `json:"boolValue"`
	IntValue    *jsonInt64  `json:"intValue"`
	DoubleValue *jsonDouble `json:"doubleValue"`
	ArrayValue  *struct {
		Values []jsonAnyValue `json:"values"`
	} `json:"arrayValue"`
	KvlistValue *struct {
		Values []jsonKeyValue `json:"values"`
	} `json:"kvlistValue"`
	BytesValue *jsonBytes `json:"bytesValue"`
}

// decodeJSON decodes an ExportTraceServiceRequest in the OTLP JSON encoding.
func decodeJSON(b []byte) ([]Span, error) {
	var req jsonRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return nil, err
	}
	var spans []Span
	for i, rs := range req.ResourceSpans {
		var resource map[string]any
		if rs.Resource != nil {
			resource = map[string]any{}
			if err := jsonAttrs(rs.Resource.Attributes, resource); err != nil {
				return nil, fmt.Errorf("resourceSpans[%d].resource: %w", i, err)
			}
		}
		for j, ss := range rs.ScopeSpans {
			scope := ""
			if ss.Scope != nil {
				scope = ss.Scope.Name
			}
			for k, js := range ss.Spans {
				s, err := js.span()
				if err != nil {
					return nil, fmt.Errorf("resourceSpans[%d].scopeSpans[%d].spans[%d]: %w", i, j, k, err)
				}
				s.Scope, s.Resource = scope, resource
				spans = append(spans, s)
			}
		}
	}
	return spans, nil
}

func (js jsonSpan) span() (Span, error) {
	s := Span{
		TraceState: js.TraceState,
		Name:       js.Name,
		Kind:       int(js.Kind),
		Start:      unixNano(uint64(js.StartTimeUnixNano)),
		End:        unixNano(uint64(js.EndTimeUnixNano)),
	}
	var err error
	if s.TraceID, err = jsonHexID(js.TraceID, 16, "traceId"); err != nil {
		return s, err
	}
	if s.SpanID, err = jsonHexID(js.SpanID, 8, "spanId"); err != nil {
		return s, err
	}
	if s.ParentSpanID, err = jsonHexID(js.ParentSpanID, 8, "parentSpanId"); err != nil {
		return s, err
	}
	if js.Attributes != nil {
		s.Attrs = map[string]any{}
		if err := jsonAttrs(js.Attributes, s.Attrs); err != nil {
			return s, err
		}
	}
	for i, je := range js.Events {
		e := Event{Name: je.Name, Time: unixNano(uint64(je.TimeUnixNano))}
		if je.Attributes != nil {
			e.Attrs = map[string]any{}
			if err := jsonAttrs(je.Attributes, e.Attrs); err != nil {
				return s, fmt.Errorf("events[%d]: %w", i, err)
			}
		}
		s.Events = append(s.Events, e)
	}
	if js.Status != nil {
		s.StatusCode, s.StatusMessage = int(js.Status.Code), js.Status.Message
	}
	return s, nil
}

func jsonHexID(s string, size int, name string) (string, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("%s %q: not hex", name, s)
	}
	return hexID(b, size, name)
}

func jsonAttrs(kvs []jsonKeyValue, into map[string]any) error {
	for _, kv := range kvs {
		v, err := kv.Value.value()
		if err != nil {
			return fmt.Errorf("attribute %q: %w", kv.Key, err)
		}
		into[kv.Key] = v
	}
	return nil
}

// value converts an AnyValue: nil when none of its oneof is set; more than one is an error.
func (a *jsonAnyValue) value() (any, error) {
	if a == nil {
		return nil, nil
	}
	var vals []any
	if a.StringValue != nil {
		vals = append(vals, *a.StringValue)
	}
	if a.BoolValue != nil {
		vals = append(vals, *a.BoolValue)
	}
	if a.IntValue != nil {
		vals = append(vals, int64(*a.IntValue))
	}
	if a.DoubleValue != nil {
		vals = append(vals, float64(*a.DoubleValue))
	}
	if a.BytesValue != nil {
		vals = append(vals, []byte(*a.BytesValue))
	}
	if a.ArrayValue != nil {
		list := make([]any, len(a.ArrayValue.Values))
		for i := range a.ArrayValue.Values {
			v, err := a.ArrayValue.Values[i].value()
			if err != nil {
				return nil, fmt.Errorf("arrayValue[%d]: %w", i, err)
			}
			list[i] = v
		}
		vals = append(vals, list)
	}
	if a.KvlistValue != nil {
		m := map[string]any{}
		if err := jsonAttrs(a.KvlistValue.Values, m); err != nil {
			return nil, fmt.Errorf("kvlistValue: %w", err)
		}
		vals = append(vals, m)
	}
	switch len(vals) {
	case 0:
		return nil, nil
	case 1:
		return vals[0], nil
	}
	return nil, fmt.Errorf("AnyValue sets %d members of its oneof", len(vals))
}

var jsonNull = []byte("null")

// jsonNumber returns the text of a JSON number, or of a JSON string holding one.
func jsonNumber(b []byte) (string, error) {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	return string(b), nil
}

// jsonUint64 is a fixed64 or uint64: a decimal string or a number.
type jsonUint64 uint64

func (u *jsonUint64) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, jsonNull) {
		return nil
	}
	s, err := jsonNumber(b)
	if err != nil {
		return err
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s: not an unsigned 64-bit integer", b)
	}
	*u = jsonUint64(v)
	return nil
}

// jsonInt64 is an int64: a decimal string or a number.
type jsonInt64 int64

func (i *jsonInt64) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, jsonNull) {
		return nil
	}
	s, err := jsonNumber(b)
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s: not a 64-bit integer", b)
	}
	*i = jsonInt64(v)
	return nil
}

// jsonDouble is a double: a number, a string holding one, or "NaN", "Infinity", "-Infinity".
type jsonDouble float64

func (d *jsonDouble) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, jsonNull) {
		return nil
	}
	s, err := jsonNumber(b)
	if err != nil {
		return err
	}
	switch s {
	case "NaN":
		*d = jsonDouble(math.NaN())
	case "Infinity":
		*d = jsonDouble(math.Inf(1))
	case "-Infinity":
		*d = jsonDouble(math.Inf(-1))
	default:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("%s: not a double", b)
		}
		*d = jsonDouble(v)
	}
	return nil
}

// jsonEnum is an enum, which OTLP JSON encodes as an integer only, never by name.
type jsonEnum int32

func (e *jsonEnum) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, jsonNull) {
		return nil
	}
	v, err := strconv.ParseInt(string(b), 10, 32)
	if err != nil {
		return fmt.Errorf("enum %s: OTLP JSON encodes enums as integers", b)
	}
	*e = jsonEnum(v)
	return nil
}

// jsonBytes is bytes: base64, standard or URL-safe, padded or not.
type jsonBytes []byte

func (j *jsonBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if v, err := enc.DecodeString(s); err == nil {
			*j = append(jsonBytes{}, v...)
			return nil
		}
	}
	return fmt.Errorf("bytes %q: not base64", s)
}
