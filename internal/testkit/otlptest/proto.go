package otlptest

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// The field numbers of the messages the receiver reads, from opentelemetry-proto.
// Fields not named here are skipped, as a protobuf parser skips unknown fields.
const (
	// collector/trace/v1/trace_service.proto, ExportTraceServiceRequest
	reqResourceSpans protowire.Number = 1

	// trace/v1/trace.proto, ResourceSpans
	rsResource   protowire.Number = 1
	rsScopeSpans protowire.Number = 2

	// trace/v1/trace.proto, ScopeSpans
	ssScope protowire.Number = 1
	ssSpans protowire.Number = 2

	// trace/v1/trace.proto, Span
	spanTraceID      protowire.Number = 1
	spanSpanID       protowire.Number = 2
	spanTraceState   protowire.Number = 3
	spanParentSpanID protowire.Number = 4
	spanName         protowire.Number = 5
	spanKind         protowire.Number = 6
	spanStart        protowire.Number = 7
	spanEnd          protowire.Number = 8
	spanAttributes   protowire.Number = 9
	spanEvents       protowire.Number = 11
	spanStatus       protowire.Number = 15
	spanFlags        protowire.Number = 16

	// trace/v1/trace.proto, Span.Event
	eventTime       protowire.Number = 1
	eventName       protowire.Number = 2
	eventAttributes protowire.Number = 3

	// trace/v1/trace.proto, Status
	statusMessage protowire.Number = 2
	statusCode    protowire.Number = 3

	// common/v1/common.proto, InstrumentationScope
	scopeName protowire.Number = 1

	// resource/v1/resource.proto, Resource
	resourceAttributes protowire.Number = 1

	// common/v1/common.proto, KeyValue
	kvKey   protowire.Number = 1
	kvValue protowire.Number = 2

	// common/v1/common.proto, AnyValue (a oneof)
	anyString protowire.Number = 1
	anyBool   protowire.Number = 2
	anyInt    protowire.Number = 3
	anyDouble protowire.Number = 4
	anyArray  protowire.Number = 5
	anyKVList protowire.Number = 6
	anyBytes  protowire.Number = 7

	// common/v1/common.proto, ArrayValue and KeyValueList
	listValues protowire.Number = 1
)

// maxDepth bounds the nesting of array and kvlist values.
const maxDepth = 100

// field is one field of a message as read off the wire: u holds a varint or fixed
// value, b a length-delimited one.
type field struct {
	num protowire.Number
	typ protowire.Type
	u   uint64
	b   []byte
}

// eachField calls fn for every field of the message b, in wire order.
func eachField(b []byte, fn func(field) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("tag: %w", protowire.ParseError(n))
		}
		b = b[n:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(b)
			f.u = uint64(v)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(b)
		default: // groups, skipped whole; a stray end-group is an error
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// want checks a known field's wire type.
func (f field) want(typ protowire.Type, name string) error {
	if f.typ != typ {
		return fmt.Errorf("%s (field %d): wire type %d, want %d", name, f.num, f.typ, typ)
	}
	return nil
}

func (f field) str(name string) (string, error) {
	if err := f.want(protowire.BytesType, name); err != nil {
		return "", err
	}
	if !utf8.Valid(f.b) {
		return "", fmt.Errorf("%s (field %d): not UTF-8", name, f.num)
	}
	return string(f.b), nil
}

func (f field) msg(name string) ([]byte, error) {
	if err := f.want(protowire.BytesType, name); err != nil {
		return nil, err
	}
	return f.b, nil
}

// decodeProto decodes a binary ExportTraceServiceRequest.
func decodeProto(b []byte) ([]Span, error) {
	var spans []Span
	err := eachField(b, func(f field) error {
		if f.num != reqResourceSpans {
			return nil
		}
		m, err := f.msg("resource_spans")
		if err != nil {
			return err
		}
		got, err := decodeResourceSpans(m)
		if err != nil {
			return fmt.Errorf("resource_spans[%d]: %w", len(spans), err)
		}
		spans = append(spans, got...)
		return nil
	})
	return spans, err
}

func decodeResourceSpans(b []byte) ([]Span, error) {
	var spans []Span
	var resource map[string]any
	err := eachField(b, func(f field) error {
		switch f.num {
		case rsResource:
			m, err := f.msg("resource")
			if err != nil {
				return err
			}
			if resource == nil {
				resource = map[string]any{}
			}
			return eachField(m, func(f field) error {
				if f.num != resourceAttributes {
					return nil
				}
				m, err := f.msg("resource.attributes")
				if err != nil {
					return err
				}
				return decodeKeyValue(m, resource, 0)
			})
		case rsScopeSpans:
			m, err := f.msg("scope_spans")
			if err != nil {
				return err
			}
			got, err := decodeScopeSpans(m)
			if err != nil {
				return fmt.Errorf("scope_spans: %w", err)
			}
			spans = append(spans, got...)
		}
		return nil
	})
	// The resource may come after the spans on the wire.
	for i := range spans {
		spans[i].Resource = resource
	}
	return spans, err
}

func decodeScopeSpans(b []byte) ([]Span, error) {
	var spans []Span
	var scope string
	err := eachField(b, func(f field) error {
		switch f.num {
		case ssScope:
			m, err := f.msg("scope")
			if err != nil {
				return err
			}
			return eachField(m, func(f field) error {
				if f.num != scopeName {
					return nil
				}
				s, err := f.str("scope.name")
				scope = s
				return err
			})
		case ssSpans:
			m, err := f.msg("spans")
			if err != nil {
				return err
			}
			s, err := decodeSpan(m)
			if err != nil {
				return fmt.Errorf("spans[%d]: %w", len(spans), err)
			}
			spans = append(spans, s)
		}
		return nil
	})
	for i := range spans {
		spans[i].Scope = scope
	}
	return spans, err
}

func decodeSpan(b []byte) (Span, error) {
	var s Span
	err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case spanTraceID:
			if err = f.want(protowire.BytesType, "trace_id"); err == nil {
				s.TraceID, err = hexID(f.b, 16, "trace_id")
			}
		case spanSpanID:
			if err = f.want(protowire.BytesType, "span_id"); err == nil {
				s.SpanID, err = hexID(f.b, 8, "span_id")
			}
		case spanParentSpanID:
			if err = f.want(protowire.BytesType, "parent_span_id"); err == nil {
				s.ParentSpanID, err = hexID(f.b, 8, "parent_span_id")
			}
		case spanTraceState:
			s.TraceState, err = f.str("trace_state")
		case spanName:
			s.Name, err = f.str("name")
		case spanKind:
			if err = f.want(protowire.VarintType, "kind"); err == nil {
				s.Kind = int(int32(f.u))
			}
		case spanStart:
			if err = f.want(protowire.Fixed64Type, "start_time_unix_nano"); err == nil {
				s.Start = unixNano(f.u)
			}
		case spanEnd:
			if err = f.want(protowire.Fixed64Type, "end_time_unix_nano"); err == nil {
				s.End = unixNano(f.u)
			}
		case spanAttributes:
			var m []byte
			if m, err = f.msg("attributes"); err == nil {
				if s.Attrs == nil {
					s.Attrs = map[string]any{}
				}
				err = decodeKeyValue(m, s.Attrs, 0)
			}
		case spanEvents:
			var m []byte
			if m, err = f.msg("events"); err == nil {
				var e Event
				if e, err = decodeEvent(m); err != nil {
					err = fmt.Errorf("events[%d]: %w", len(s.Events), err)
				}
				s.Events = append(s.Events, e)
			}
		case spanStatus:
			var m []byte
			if m, err = f.msg("status"); err == nil {
				err = decodeStatus(m, &s)
			}
		case spanFlags:
			err = f.want(protowire.Fixed32Type, "flags")
		}
		return err
	})
	return s, err
}

func decodeEvent(b []byte) (Event, error) {
	var e Event
	err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case eventTime:
			if err = f.want(protowire.Fixed64Type, "time_unix_nano"); err == nil {
				e.Time = unixNano(f.u)
			}
		case eventName:
			e.Name, err = f.str("name")
		case eventAttributes:
			var m []byte
			if m, err = f.msg("attributes"); err == nil {
				if e.Attrs == nil {
					e.Attrs = map[string]any{}
				}
				err = decodeKeyValue(m, e.Attrs, 0)
			}
		}
		return err
	})
	return e, err
}

func decodeStatus(b []byte, s *Span) error {
	return eachField(b, func(f field) error {
		var err error
		switch f.num {
		case statusMessage:
			s.StatusMessage, err = f.str("status.message")
		case statusCode:
			if err = f.want(protowire.VarintType, "status.code"); err == nil {
				s.StatusCode = int(int32(f.u))
			}
		}
		return err
	})
}

// decodeKeyValue decodes one KeyValue into into; a later key replaces an earlier one.
func decodeKeyValue(b []byte, into map[string]any, depth int) error {
	var key string
	var val any
	err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case kvKey:
			key, err = f.str("key")
		case kvValue:
			var m []byte
			if m, err = f.msg("value"); err == nil {
				val, err = decodeAnyValue(m, depth+1)
			}
		}
		return err
	})
	if err != nil {
		if key != "" {
			return fmt.Errorf("attribute %q: %w", key, err)
		}
		return err
	}
	into[key] = val
	return nil
}

// decodeAnyValue decodes an AnyValue: nil when no member of its oneof is set, else the
// last one set, as protobuf reads a oneof.
func decodeAnyValue(b []byte, depth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("values nested too deep")
	}
	var val any
	err := eachField(b, func(f field) error {
		var err error
		switch f.num {
		case anyString:
			val, err = f.str("string_value")
		case anyBool:
			if err = f.want(protowire.VarintType, "bool_value"); err == nil {
				val = f.u != 0
			}
		case anyInt:
			if err = f.want(protowire.VarintType, "int_value"); err == nil {
				val = int64(f.u)
			}
		case anyDouble:
			if err = f.want(protowire.Fixed64Type, "double_value"); err == nil {
				val = math.Float64frombits(f.u)
			}
		case anyBytes:
			if err = f.want(protowire.BytesType, "bytes_value"); err == nil {
				val = append([]byte{}, f.b...)
			}
		case anyArray:
			var m []byte
			if m, err = f.msg("array_value"); err == nil {
				list := []any{}
				err = eachField(m, func(f field) error {
					if f.num != listValues {
						return nil
					}
					m, err := f.msg("array_value.values")
					if err != nil {
						return err
					}
					v, err := decodeAnyValue(m, depth+1)
					list = append(list, v)
					return err
				})
				val = list
			}
		case anyKVList:
			var m []byte
			if m, err = f.msg("kvlist_value"); err == nil {
				kv := map[string]any{}
				err = eachField(m, func(f field) error {
					if f.num != listValues {
						return nil
					}
					m, err := f.msg("kvlist_value.values")
					if err != nil {
						return err
					}
					return decodeKeyValue(m, kv, depth+1)
				})
				val = kv
			}
		}
		return err
	})
	return val, err
}

// hexID returns id in lowercase hex, "" when empty; otherwise it must be size bytes.
func hexID(id []byte, size int, name string) (string, error) {
	if len(id) == 0 {
		return "", nil
	}
	if len(id) != size {
		return "", fmt.Errorf("%s: %d bytes, want %d", name, len(id), size)
	}
	return hex.EncodeToString(id), nil
}

// unixNano is the time n nanoseconds after the Unix epoch; the zero Time for 0.
func unixNano(n uint64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(n))
}
