package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readerLine is one line readerhook wrote.
type readerLine struct {
	Event     string   `json:"event"`
	Tag       string   `json:"tag"`
	InputErr  string   `json:"input_err"`
	AsGiven   string   `json:"as_given"`
	Original  string   `json:"original"`
	Output    string   `json:"output"`
	OutputErr string   `json:"output_err"`
	Roles     []string `json:"roles"`
	Contents  []string `json:"contents"`
	Pages     int      `json:"pages"`
	Total     uint32   `json:"total"`
	ConvErr   string   `json:"conv_err"`
	Tokens    uint64   `json:"tokens"`
	Infer     string   `json:"infer"`
	InferErr  string   `json:"infer_err"`
	Model     string   `json:"model"`
}

// TestHookWorldImports runs a real hook guest that reads everything the hook world
// offers, through two tasks of a threaded context, granted and not: the task in scope
// and its result (windowed), the conversation in pages with tool results in Murmur's
// envelope, a token count, a completion through the capsule's driver, and only the
// variables its entry grants.
func TestHookWorldImports(t *testing.T) {
	granted := "    capabilities: {task_io: {read: true}, conversation: {read: true}, env: {allow: [READER_TAG]}}\n"
	tests := []struct {
		name, entry string
		granted     bool
	}{
		{"granted", granted, true},
		{"nothing granted", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hostRec(t, recCapsule{name: "reader", config: "{}", hooks: map[string]string{"reader": "readerhook"},
				hookEntry: map[string]string{"reader": tt.entry}, caps: "  env: {allow: [READER_TAG]}\n",
				env: map[string]string{"READER_TAG": "t1"}})
			ctx := context.Background()
			first := h.RunTask(ctx, TaskRequest{ContextID: "ctx_read", Text: "call echo héllo"})
			second := h.RunTask(ctx, TaskRequest{ContextID: "ctx_read", Text: "again",
				History: []Turn{{User: "call echo héllo", Agent: first.Result, Thread: first.Thread}}})
			if first.State != StateCompleted || second.State != StateCompleted {
				t.Fatalf("tasks: %+v / %+v", first, second)
			}
			lines := readReader(t, filepath.Join(second.Layout.Work, "out", "reader.jsonl"))
			var events []string
			for _, l := range lines {
				events = append(events, l.Event)
			}
			want := []string{"on-task-start", "on-tool-call", "on-task-end", "on-task-start", "on-task-end"}
			if !slices.Equal(events, want) {
				t.Fatalf("events %v, want %v", events, want)
			}
			start, call, end, end2 := lines[0], lines[1], lines[2], lines[4]
			for _, l := range lines {
				if l.Tokens != 3 {
					t.Errorf("%s: count(%q) = %d, want 3", l.Event, "twelve bytes", l.Tokens)
				}
			}
			if end.Infer != "you said: judge this" || end.Model != "m" || end.InferErr != "" {
				t.Errorf("on-task-end inference: %+v", end)
			}
			if !tt.granted {
				for _, l := range lines {
					if !strings.Contains(l.InputErr, "not-granted") || !strings.Contains(l.OutputErr, "not-granted") || l.ConvErr != "not-granted" || l.Tag != "" {
						t.Errorf("%s read ungranted: %+v", l.Event, l)
					}
				}
				return
			}
			if start.Tag != "t1" {
				t.Errorf("the granted variable reads %q", start.Tag)
			}
			if !strings.Contains(start.InputErr, "no-task") || !strings.Contains(start.OutputErr, "no-task") || start.Total != 0 || start.Pages != 1 {
				t.Errorf("on-task-start sees a task: %+v", start)
			}
			if call.AsGiven != "call echo héllo" || call.Original != call.AsGiven || !strings.Contains(call.OutputErr, "no-output") {
				t.Errorf("on-tool-call reads %+v", call)
			}
			// The call's result enters the conversation after on-tool-call.
			if !slices.Equal(call.Roles, []string{"assistant", "user"}) || call.Total != 2 || call.Pages != 1 {
				t.Errorf("on-tool-call conversation: roles %v, total %d, pages %d", call.Roles, call.Total, call.Pages)
			}
			if !slices.Equal(end.Roles, []string{"assistant", "tool", "assistant", "user"}) || end.Pages != 2 {
				t.Fatalf("on-task-end conversation: roles %v, pages %d", end.Roles, end.Pages)
			}
			var env struct {
				Marker bool   `json:"__murmur_tool_msg__"`
				ID     string `json:"tool_call_id"`
				Body   string `json:"body"`
			}
			if err := json.Unmarshal([]byte(end.Contents[1]), &env); err != nil || !env.Marker || env.ID == "" || !strings.Contains(env.Body, "héllo") {
				t.Errorf("the tool result reads %q", end.Contents[1])
			}
			if end.Output != first.Result || end.OutputErr != "" || end.Total != 4 {
				t.Errorf("on-task-end reads output %q (want %q), total %d", end.Output, first.Result, end.Total)
			}
			// The second task's record holds the first's conversation, then its own.
			if end2.AsGiven != "again" || end2.Total != 6 || end2.Roles[len(end2.Roles)-1] != "user" || end2.Contents[len(end2.Contents)-1] != "call echo héllo" {
				t.Errorf("second on-task-end: %+v", end2)
			}
		})
	}
}

func readReader(t *testing.T, path string) []readerLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []readerLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l readerLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}
