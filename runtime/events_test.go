package runtime

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type failingSink struct{ calls int }

func (f *failingSink) Event(*Event) error { f.calls++; return errors.New("disk full") }

type countingSink struct{ n int }

func (c *countingSink) Event(*Event) error { c.n++; return nil }

// TestStreamStopsOnSinkFailure: a sink that cannot write stops the stream loudly — every
// later Emit reports the failure — and nothing is silently dropped or half-delivered.
func TestStreamStopsOnSinkFailure(t *testing.T) {
	bad, after := &failingSink{}, &countingSink{}
	s := NewStream("ses_x", bad, after)
	if _, err := s.Emit(EventSessionStart, "", nil, nil); err == nil {
		t.Fatal("a failing sink went unreported")
	}
	if _, err := s.Emit(EventTaskStart, "p", nil, nil); err == nil || s.Err() == nil {
		t.Fatal("the stream went on after a sink failed")
	}
	if bad.calls != 1 || after.n != 0 {
		t.Fatalf("sinks called after the failure: bad=%d after=%d", bad.calls, after.n)
	}
}

func TestTraceSinkCapture(t *testing.T) {
	for _, content := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "trace.jsonl")
		ts, err := NewTraceSink(path, content)
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream("ses_1", ts)
		id, err := s.Emit(EventSessionStart, "", SessionStart{Capsule: "c"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Emit(EventToolCall, id, ToolCall{ToolName: "echo", InputBytes: 5}, map[string]string{"input": "hello"}); err != nil {
			t.Fatal(err)
		}
		ts.Close()
		data, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		var call map[string]any
		json.Unmarshal([]byte(lines[1]), &call)
		if call["tool_name"] != "echo" || call["input_bytes"] != float64(5) || call["parent_id"] != id {
			t.Fatalf("tool_call = %v", call)
		}
		if _, kept := call["input"]; kept != content {
			t.Errorf("content=%v: input kept=%v", content, kept)
		}
	}
}

// TestJoinObject checks the splice that builds a trace line from encoded parts.
func TestJoinObject(t *testing.T) {
	for _, tt := range []struct {
		line, obj, want string
		bad             bool
	}{
		{`{"a":1}`, `{"b":2,"c":"}"}`, `{"a":1,"b":2,"c":"}"}`, false},
		{`{"a":1}`, `null`, `{"a":1}`, false},
		{`{"a":1}`, `{}`, `{"a":1}`, false},
		{`{"a":1}`, `[1]`, `{"a":1}`, true},
		{`{"a":1}`, `"s"`, `{"a":1}`, true},
	} {
		got, err := joinObject([]byte(tt.line), []byte(tt.obj))
		if (err != nil) != tt.bad || string(got) != tt.want {
			t.Errorf("joinObject(%s, %s) = %s, %v; want %s (error %v)", tt.line, tt.obj, got, err, tt.want, tt.bad)
		}
	}
}
