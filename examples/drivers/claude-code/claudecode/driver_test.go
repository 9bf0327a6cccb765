package claudecode

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

func ptr[T any](v T) *T { return &v }

var testBridge = &process.Bridge{ServerName: "capsule", URL: "http://127.0.0.1:9/mcp", BearerToken: "tok", ToolNames: []string{"echo"}}

// TestLaunch checks the plan for each kind of turn: flags, files, environment.
func TestLaunch(t *testing.T) {
	common := []string{"-p", "--output-format=stream-json", "--verbose", "--include-partial-messages",
		"--bare", "--strict-mcp-config", "--permission-mode=dontAsk"}
	env := [][2]string{{"ANTHROPIC_BASE_URL", "{gateway_url}"}, {"ANTHROPIC_API_KEY", PlaceholderKey},
		{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"}, {"DISABLE_AUTOUPDATER", "1"}, {"HOME", "{files_dir}/home"}}
	const id = "8d0d5f0e-3f53-4c1a-9d55-2b7c1b6d1a01"
	tests := []struct {
		name    string
		req     process.LaunchRequest
		args    []string
		files   []process.File
		baseURL string
		err     string
	}{
		{name: "new session, no tools", req: process.LaunchRequest{SystemPrompt: "sys", SessionID: id, Task: "-hi"},
			args: append(common, "--tools=", "--append-system-prompt=sys", "--session-id="+id, "--", "-hi")},
		{name: "a session id that is no UUID is Claude Code's to choose", req: process.LaunchRequest{SessionID: "s-1", Task: "hi"},
			args: append(common, "--tools=", "--", "hi")},
		{name: "resume with the bridge and a model", req: process.LaunchRequest{Model: ptr("claude-x"), Bridge: testBridge, SessionID: id, Resume: true, Task: "hi"},
			args: append(common, "--tools=", "--model=claude-x", "--mcp-config={files_dir}/mcp.json", "--allowedTools=mcp__capsule__echo", "--resume="+id, "--", "hi"),
			files: []process.File{{Name: "mcp.json", Contents: `{
  "mcpServers": {
    "capsule": {
      "type": "http",
      "url": "http://127.0.0.1:9/mcp",
      "headers": {
        "Authorization": "Bearer tok"
      }
    }
  }
}
`}}},
		{name: "config: built-ins, max turns, whole system prompt, base URL",
			req:  process.LaunchRequest{SystemPrompt: "sys", Config: ptr(`{"tools":["Read","Grep"],"max_turns":3,"replace_system_prompt":true,"base_url":"http://127.0.0.1:7"}`), Task: "hi"},
			args: append(common, "--tools=Read,Grep", "--system-prompt=sys", "--allowedTools=Read,Grep", "--max-turns=3", "--", "hi"), baseURL: "http://127.0.0.1:7"},
		{name: "an unknown config member", req: process.LaunchRequest{Config: ptr(`{"tool":["Read"]}`), Task: "hi"}, err: "unknown field"},
		{name: "an empty task", req: process.LaunchRequest{Task: " "}, err: "empty task"},
		{name: "resume without an id", req: process.LaunchRequest{Resume: true, Task: "hi"}, err: "session id"},
		{name: "a bad server name", req: process.LaunchRequest{Bridge: &process.Bridge{ServerName: "a b"}, Task: "hi"}, err: "server name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := New().Launch(tt.req)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan.Args, tt.args) {
				t.Errorf("args\n%q\nwant\n%q", plan.Args, tt.args)
			}
			if !reflect.DeepEqual(plan.Files, tt.files) {
				t.Errorf("files %+v", plan.Files)
			}
			want := append([][2]string(nil), env...)
			if tt.baseURL != "" {
				want[0][1] = tt.baseURL
			}
			if !reflect.DeepEqual(plan.EnvSet, want) || plan.Stdin == nil || len(plan.Stdin) != 0 || plan.KeepStdinOpen {
				t.Errorf("env %q, stdin %q %v", plan.EnvSet, plan.Stdin, plan.KeepStdinOpen)
			}
		})
	}
}

// TestParseCaptured reads each captured output of the real CLI: every line read, the
// events in order, the run's end as the test that captured it saw it.
func TestParseCaptured(t *testing.T) {
	tests := []struct {
		file   string
		bridge bool
		// want: the cases in order, deltas and usage folded (see fold)
		want []string
		end  process.Event
	}{
		{file: "text.jsonl", want: []string{"session-started", "text-delta", "text", "usage", "usage", "turn-end"},
			end: process.Event{Case: process.TurnEnd, Text: answer}},
		{file: "resume.jsonl", want: []string{"session-started", "text-delta", "text", "usage", "usage", "turn-end"},
			end: process.Event{Case: process.TurnEnd, Text: answer}},
		{file: "thinking.jsonl", want: []string{"session-started", "thinking-delta", "thinking-delta", "thinking", "text-delta", "text", "usage", "usage", "turn-end"},
			end: process.Event{Case: process.TurnEnd, Text: answer}},
		{file: "tool.jsonl", bridge: true, want: []string{"session-started", "tool-call", "usage", "tool-result", "text-delta", "text", "usage", "usage", "turn-end"},
			end: process.Event{Case: process.TurnEnd, Text: answer}},
		{file: "max-turns.jsonl", bridge: true, want: []string{"session-started", "tool-call", "usage", "tool-result", "usage", "turn-failed"},
			end: process.Event{Case: process.TurnFailed, FailureKind: process.FailMaxTurns, Text: "Reached maximum number of turns (1)"}},
		{file: "interrupt.jsonl", want: []string{"session-started", "usage", "turn-failed"},
			end: process.Event{Case: process.TurnFailed, FailureKind: process.FailCanceled, Text: "interrupted (aborted_streaming)"}},
		{file: "auth.jsonl", want: []string{"session-started", "note", "usage", "turn-failed"},
			end: process.Event{Case: process.TurnFailed, FailureKind: process.FailAuth, Text: "Failed to authenticate. API Error: 401 stand-in refusal"}},
		{file: "quota.jsonl", want: []string{"session-started", "note", "usage", "turn-failed"},
			end: process.Event{Case: process.TurnFailed, FailureKind: process.FailQuota, Text: "API Error: Request rejected (429) · stand-in refusal"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			d := New()
			req := process.LaunchRequest{Task: "t"}
			if tt.bridge {
				req.Bridge = testBridge
			}
			if _, err := d.Launch(req); err != nil {
				t.Fatal(err)
			}
			// One line per batch and all lines in one batch read the same.
			lines := harnesstest.ReadLines(t, tt.file)
			var one []process.Event
			for _, l := range lines {
				one = append(one, d.Parse([]string{l})...)
			}
			d2 := New()
			d2.Launch(req)
			if all := d2.Parse(lines); !reflect.DeepEqual(all, one) {
				t.Errorf("batched parse differs")
			}
			if got := fold(one); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("cases %q\nwant %q", got, tt.want)
			}
			if end := one[len(one)-1]; !reflect.DeepEqual(end, tt.end) {
				t.Errorf("end %+v\nwant %+v", end, tt.end)
			}
			for _, e := range one {
				if e.Case == process.ToolCall && (e.ToolName != "echo" || e.ToolInput != `{"text":"hi"}`) {
					t.Errorf("tool-call %+v", e)
				}
				if e.Case == process.ToolResult && (e.Text != "echo: hi" || e.IsError) {
					t.Errorf("tool-result %+v", e)
				}
			}
		})
	}
}

// fold lists the cases of events, runs of text-deltas as one.
func fold(events []process.Event) []string {
	var out []string
	for _, e := range events {
		if e.Case == process.TextDelta && len(out) > 0 && out[len(out)-1] == process.TextDelta {
			continue
		}
		out = append(out, e.Case)
	}
	return out
}

// TestParseLines covers what the captures do not: thinking, a failing tool, subagent
// lines, an execution error, lines it cannot read.
func TestParseLines(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []process.Event
	}{
		{"thinking delta", `{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}},"parent_tool_use_id":null}`,
			[]process.Event{{Case: process.ThinkingDelta, Text: "hmm"}}},
		{"thinking block", `{"type":"assistant","message":{"content":[{"type":"thinking","thinking":"hmm","signature":"x"}]},"parent_tool_use_id":null}`,
			[]process.Event{{Case: process.Thinking, Text: "hmm"}}},
		{"a failed tool, string content", `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"no such file","is_error":true}]},"parent_tool_use_id":null}`,
			[]process.Event{{Case: process.ToolResult, ToolID: "t1", Text: "no such file", IsError: true}}},
		{"a built-in tool keeps its name", `{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"a"}}]},"parent_tool_use_id":null}`,
			[]process.Event{{Case: process.ToolCall, ToolID: "t2", ToolName: "Read", ToolInput: `{"file_path":"a"}`}}},
		{"a subagent's message", `{"type":"assistant","message":{"content":[{"type":"text","text":"inner"}]},"parent_tool_use_id":"t3"}`, nil},
		{"a retry", `{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":5,"error_status":529,"error":"overloaded"}`,
			[]process.Event{{Case: process.Retry, Attempt: 2, Text: "overloaded (HTTP 529)"}}},
		{"an execution error", `{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["boom"]}`,
			[]process.Event{{Case: process.TurnFailed, FailureKind: process.FailHarnessError, Text: "boom"}}},
		{"a budget", `{"type":"result","subtype":"error_max_budget_usd","is_error":true}`,
			[]process.Event{{Case: process.TurnFailed, FailureKind: process.FailQuota, Text: "error_max_budget_usd"}}},
		{"a failed MCP server", `{"type":"system","subtype":"init","session_id":"s","model":"m","apiKeySource":"none","mcp_servers":[{"name":"capsule","status":"failed"}]}`,
			[]process.Event{{Case: process.SessionStarted, SessionID: "s", Auth: "subscription", Model: ptr("m")}, {Case: process.Note, Text: "claude-code: MCP server capsule is failed"}}},
		{"not JSON", `Error: something`, []process.Event{{Case: process.Note, Text: "claude-code: unread line: Error: something"}}},
		{"an unknown type", `{"type":"surprise"}`, []process.Event{{Case: process.Note, Text: `claude-code: unread surprise line: {"type":"surprise"}`}}},
		{"a blank line", `  `, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New()
			d.Launch(process.LaunchRequest{Bridge: testBridge, Task: "t"})
			if got := d.Parse([]string{tt.line}); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestClassifyExit(t *testing.T) {
	tests := []struct {
		name string
		x    process.ExitStatus
		kind string
		text string
	}{
		{"interrupted", process.ExitStatus{Signal: ptr(int32(2)), Interrupted: true}, process.FailCanceled, "interrupted"},
		{"a bad key", process.ExitStatus{Code: ptr(int32(1)), StderrTail: "Invalid API key · Fix external API key"}, process.FailAuth, "exited with status 1"},
		{"out of credit", process.ExitStatus{Code: ptr(int32(1)), StderrTail: "Credit balance is too low"}, process.FailQuota, "Credit balance"},
		{"killed", process.ExitStatus{Signal: ptr(int32(9))}, process.FailHarnessError, "signal 9"},
		{"silent success", process.ExitStatus{Code: ptr(int32(0))}, process.FailHarnessError, "without a result"},
		{"a result it read", process.ExitStatus{Code: ptr(int32(1)), SawTerminal: true}, process.FailMaxTurns, "Reached maximum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New()
			d.Launch(process.LaunchRequest{Task: "t"})
			d.Parse(harnesstest.ReadLines(t, "max-turns.jsonl"))
			if !tt.x.SawTerminal {
				d = New()
			}
			e := d.ClassifyExit(tt.x)
			if e.Case != process.TurnFailed || e.FailureKind != tt.kind || !strings.Contains(e.Text, tt.text) {
				t.Errorf("%+v", e)
			}
		})
	}
}

// TestReadLogin reads what `claude auth status --json` printed (captured from 2.1.328).
func TestReadLogin(t *testing.T) {
	read := func(name string) string { return strings.Join(harnesstest.ReadLines(t, name), "\n") }
	tests := []struct {
		name        string
		out         process.LoginOutput
		state, text string
	}{
		{"an API key", process.LoginOutput{Code: ptr(int32(0)), Stdout: read("auth-status-api-key.json")}, process.LoggedIn, "api_key from ANTHROPIC_API_KEY"},
		{"logged out", process.LoginOutput{Code: ptr(int32(1)), Stdout: read("auth-status-logged-out.json")}, process.LoggedOut, "not logged in"},
		{"a subscription", process.LoginOutput{Code: ptr(int32(0)), Stdout: `{"loggedIn":true,"authMethod":"claude.ai","subscriptionType":"max"}`}, process.LoggedIn, "claude.ai, max subscription"},
		{"unreadable", process.LoginOutput{Code: ptr(int32(2)), Stderr: "error: unknown option"}, process.Unknown, "exited 2: error: unknown option"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, text := New().ReadLogin(tt.out)
			if state != tt.state || !strings.Contains(text, tt.text) {
				t.Errorf("%s %q", state, text)
			}
		})
	}
}
