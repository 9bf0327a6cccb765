package runtime

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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

// TestTraceSinkWrites: lines wait in memory until a task ends (its receipt, the event
// after its task_end) or the session does — one write per task — or until the delay has passed since the first line waiting, so a long task's
// events still reach the file; Close writes what waits.
func TestTraceSinkWrites(t *testing.T) {
	lines := func(path string) int {
		data, _ := os.ReadFile(path)
		return strings.Count(string(data), "\n")
	}
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	ts, err := NewTraceSink(path, false)
	if err != nil {
		t.Fatal(err)
	}
	ts.delay = time.Hour // no timed write in this part
	s := NewStream("ses_1", ts)
	id, _ := s.Emit(EventSessionStart, "", SessionStart{Capsule: "c"}, nil)
	s.Emit(EventTaskStart, id, TaskStart{TaskID: "t1"}, nil)
	s.Emit(EventToolCall, id, ToolCall{ToolName: "echo"}, nil)
	if n := lines(path); n != 0 {
		t.Errorf("%d lines in the file before the task ended, want 0", n)
	}
	end, _ := s.Emit(EventTaskEnd, id, TaskEnd{TaskID: "t1", State: StateCompleted}, nil)
	if n := lines(path); n != 0 {
		t.Errorf("%d lines in the file before the task's receipt, want 0", n)
	}
	s.Emit(EventReceipt, end, Receipt{}, nil)
	if n := lines(path); n != 5 {
		t.Errorf("%d lines once the task ended with its receipt, want 5", n)
	}
	s.Emit(EventTaskStart, id, TaskStart{TaskID: "t2"}, nil)
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	if n := lines(path); n != 6 {
		t.Errorf("%d lines after Close, want 6", n)
	}

	path = filepath.Join(t.TempDir(), "trace.jsonl")
	if ts, err = NewTraceSink(path, false); err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	ts.delay = time.Millisecond
	s = NewStream("ses_2", ts)
	s.Emit(EventSessionStart, "", SessionStart{Capsule: "c"}, nil)
	for deadline := time.Now().Add(10 * time.Second); lines(path) != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a waiting line never reached the file")
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
