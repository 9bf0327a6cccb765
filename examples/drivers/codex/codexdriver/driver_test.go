package codexdriver

import (
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/harnesstest"
	"github.com/capsulegate/capsulegate/wit/guest/process"
)

var testBridge = &process.Bridge{ServerName: "capsule", URL: "http://127.0.0.1:9/mcp", BearerToken: "tok", ToolNames: []string{"echo", "add"}}

const wantTOML = `# Written by the codex process driver for one turn.
model_provider = "capsulegate"
approval_policy = "never"
sandbox_mode = "read-only"
web_search = "disabled"
check_for_update_on_startup = false
developer_instructions = "You are a \"capsule\".\nBe brief."

[model_providers.capsulegate]
name = "capsulegate"
env_key = "CAPSULEGATE_PROVIDER_KEY"
wire_api = "responses"

[features]
shell_tool = false
unified_exec = false
view_image = false
image_generation = false
apps = false
plugins = false
sleep_tool = false
goals = false
computer_use = false
browser_use = false
in_app_browser = false
tool_suggest = false
skill_search = false

[agents]
enabled = false

[mcp_servers.capsule]
url = "http://127.0.0.1:9/mcp"
bearer_token_env_var = "CAPSULEGATE_BRIDGE_TOKEN"
default_tools_approval_mode = "approve"
enabled_tools = ["echo", "add"]
`

// TestLaunch checks the plan for each kind of turn: arguments, environment, config.toml.
func TestLaunch(t *testing.T) {
	gateway := `model_providers.capsulegate.base_url="{gateway_url}/v1"`
	tests := []struct {
		name string
		req  process.LaunchRequest
		args []string
		env  [][2]string
		toml string // "": not checked
		has  []string
		err  string
	}{
		{name: "new session with the bridge", req: process.LaunchRequest{Model: ptr("gpt-x"), SystemPrompt: "You are a \"capsule\".\nBe brief.", Bridge: testBridge, SessionID: "runtime-id", Task: "-hi"},
			args: []string{"exec", "--json", "--skip-git-repo-check", "-c", gateway, "--model=gpt-x", "--", "-hi"},
			env:  [][2]string{{"CODEX_HOME", "{files_dir}/codex-home"}, {ProviderKeyEnv, PlaceholderKey}, {BridgeTokenEnv, "tok"}}, toml: wantTOML},
		{name: "resume without tools", req: process.LaunchRequest{SessionID: "01a2", Resume: true, Task: "hi"},
			args: []string{"exec", "resume", "--json", "--skip-git-repo-check", "-c", gateway, "--", "01a2", "hi"},
			env:  [][2]string{{"CODEX_HOME", "{files_dir}/codex-home"}, {ProviderKeyEnv, PlaceholderKey}}},
		{name: "config: base URL, shell, effort", req: process.LaunchRequest{Config: ptr(`{"base_url":"http://127.0.0.1:7/v1","shell":true,"reasoning_effort":"low"}`), Task: "hi"},
			args: []string{"exec", "--json", "--skip-git-repo-check", "-c", `model_providers.capsulegate.base_url="http://127.0.0.1:7/v1"`, "--", "hi"},
			env:  [][2]string{{"CODEX_HOME", "{files_dir}/codex-home"}, {ProviderKeyEnv, PlaceholderKey}},
			has:  []string{"shell_tool = true\n", "unified_exec = true\n", "view_image = false\n", `model_reasoning_effort = "low"`}},
		{name: "an unknown config member", req: process.LaunchRequest{Config: ptr(`{"sandbox":"off"}`), Task: "hi"}, err: "unknown field"},
		{name: "a bad effort", req: process.LaunchRequest{Config: ptr(`{"reasoning_effort":"x\"y"}`), Task: "hi"}, err: "reasoning_effort"},
		{name: "an empty task", req: process.LaunchRequest{Task: ""}, err: "empty task"},
		{name: "resume without an id", req: process.LaunchRequest{Resume: true, Task: "hi"}, err: "session id"},
		{name: "a bad server name", req: process.LaunchRequest{Bridge: &process.Bridge{ServerName: "a.b"}, Task: "hi"}, err: "server name"},
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
			if !reflect.DeepEqual(plan.EnvSet, tt.env) || plan.Stdin == nil || len(plan.Stdin) != 0 || plan.KeepStdinOpen {
				t.Errorf("env %q", plan.EnvSet)
			}
			if len(plan.Files) != 1 || plan.Files[0].Name != ConfigFile {
				t.Fatalf("files %+v", plan.Files)
			}
			if tt.toml != "" && plan.Files[0].Contents != tt.toml {
				t.Errorf("config.toml\n%s", plan.Files[0].Contents)
			}
			for _, h := range tt.has {
				if !strings.Contains(plan.Files[0].Contents, h) {
					t.Errorf("config.toml lacks %q:\n%s", h, plan.Files[0].Contents)
				}
			}
		})
	}
}

// TestParseCaptured reads each captured output of the real CLI.
func TestParseCaptured(t *testing.T) {
	u := func(in, out, cached, reasoning uint64) process.Usage {
		zero := uint64(0)
		return process.Usage{Input: &in, Output: &out, CacheRead: &cached, CacheCreation: &zero, Thinking: &reasoning}
	}
	metadata := process.Event{Case: process.Note, Text: "codex: Model metadata for `gpt-stand-in` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}
	refusal := "unexpected status 401 Unauthorized: stand-in refusal, url: http://127.0.0.1:0/v1/responses"
	retry := func(n uint32) process.Event {
		return process.Event{Case: process.Retry, Attempt: n, Text: "Reconnecting... " + string(rune('0'+n)) + "/5 (" + refusal + ")"}
	}
	tests := []struct {
		file  string
		skip  int // events before these: session-started
		want  []process.Event
		model bool
	}{
		{file: "text.jsonl", want: []process.Event{metadata, {Case: process.Text, Text: answer}, {Case: process.UsageEvent, Usage: u(11, 7, 5, 2)}, {Case: process.TurnEnd, Text: answer}}},
		{file: "thinking.jsonl", want: []process.Event{metadata, {Case: process.Thinking, Text: "Let me think it over."}, {Case: process.Text, Text: answer},
			{Case: process.UsageEvent, Usage: u(11, 7, 5, 2)}, {Case: process.TurnEnd, Text: answer}}},
		{file: "resume.jsonl", want: []process.Event{metadata, {Case: process.Text, Text: answer}, {Case: process.UsageEvent, Usage: u(22, 14, 10, 4)}, {Case: process.TurnEnd, Text: answer}}},
		{file: "tool.jsonl", want: []process.Event{metadata,
			{Case: process.ToolCall, ToolID: "item_1", ToolName: "echo", ToolInput: `{"text":"hi"}`},
			{Case: process.ToolResult, ToolID: "item_1", Text: "echo: hi"},
			{Case: process.Text, Text: answer}, {Case: process.UsageEvent, Usage: u(22, 14, 10, 4)}, {Case: process.TurnEnd, Text: answer}}},
		{file: "auth.jsonl", want: []process.Event{metadata, retry(1), retry(2), retry(3), retry(4), retry(5),
			{Case: process.Note, Text: "codex: " + refusal}, {Case: process.TurnFailed, FailureKind: process.FailAuth, Text: refusal}}},
		{file: "interrupt.jsonl", want: []process.Event{metadata}},
		{file: "quota.jsonl", want: []process.Event{metadata, {Case: process.Note, Text: "codex: Quota exceeded. Check your plan and billing details."},
			{Case: process.TurnFailed, FailureKind: process.FailQuota, Text: "Quota exceeded. Check your plan and billing details."}}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			d := New()
			d.Launch(process.LaunchRequest{Model: ptr("gpt-stand-in"), Bridge: testBridge, Task: "t"})
			lines := harnesstest.ReadLines(t, tt.file)
			var one []process.Event
			for _, l := range lines {
				one = append(one, d.Parse([]string{l})...)
			}
			d2 := New()
			d2.Launch(process.LaunchRequest{Model: ptr("gpt-stand-in"), Bridge: testBridge, Task: "t"})
			if all := d2.Parse(lines); !reflect.DeepEqual(all, one) {
				t.Errorf("batched parse differs")
			}
			if len(one) == 0 || one[0].Case != process.SessionStarted || one[0].SessionID == "" || one[0].Auth != "api-key" || *one[0].Model != "gpt-stand-in" {
				t.Fatalf("first event %+v", one)
			}
			if got := one[1:]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// TestParseLines covers what the captures do not.
func TestParseLines(t *testing.T) {
	tests := []struct {
		name string
		line string
		want []process.Event
	}{
		{"reasoning", `{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Thinking** about it"}}`,
			[]process.Event{{Case: process.Thinking, Text: "**Thinking** about it"}}},
		{"a failed tool call", `{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"capsule","tool":"echo","arguments":{},"result":null,"error":{"message":"MCP tool call requires approval, but approval policy is never"},"status":"failed"}}`,
			[]process.Event{{Case: process.ToolResult, ToolID: "item_1", Text: "MCP tool call requires approval, but approval policy is never", IsError: true}}},
		{"a command", `{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}`,
			[]process.Event{{Case: process.Note, Text: `codex: ran "ls": exit 0`}}},
		{"a command starting", `{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"ls","status":"in_progress"}}`, nil},
		{"an agent message in progress", `{"type":"item.updated","item":{"id":"item_3","type":"agent_message","text":"The ans"}}`, nil},
		{"a provider failure", `{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}`,
			[]process.Event{{Case: process.TurnFailed, FailureKind: process.FailOther, Text: "stream disconnected before completion"}}},
		{"an unknown item", `{"type":"item.completed","item":{"id":"i","type":"surprise"}}`, []process.Event{{Case: process.Note, Text: "codex: unread surprise item"}}},
		{"an unknown event", `{"type":"surprise"}`, []process.Event{{Case: process.Note, Text: `codex: unread surprise event: {"type":"surprise"}`}}},
		{"not JSON", `WARNING: something`, []process.Event{{Case: process.Note, Text: "codex: unread line: WARNING: something"}}},
		{"a blank line", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New()
			d.Launch(process.LaunchRequest{Task: "t"})
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
		{"no key variable", process.ExitStatus{Code: ptr(int32(1)), StderrTail: "Missing environment variable: `CAPSULEGATE_PROVIDER_KEY`"}, process.FailAuth, "status 1"},
		{"a bad config", process.ExitStatus{Code: ptr(int32(1)), StderrTail: "Error loading config.toml: invalid type"}, process.FailHarnessError, "config.toml"},
		{"killed", process.ExitStatus{Signal: ptr(int32(9))}, process.FailHarnessError, "signal 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New().ClassifyExit(tt.x)
			if e.Case != process.TurnFailed || e.FailureKind != tt.kind || !strings.Contains(e.Text, tt.text) {
				t.Errorf("%+v", e)
			}
		})
	}
}

// TestReadLogin reads what `codex login status` printed (captured from 0.169.0).
func TestReadLogin(t *testing.T) {
	read := func(name string) string { return strings.Join(harnesstest.ReadLines(t, name), "\n") }
	tests := []struct {
		name        string
		out         process.LoginOutput
		state, text string
	}{
		{"an API key", process.LoginOutput{Code: ptr(int32(0)), Stderr: read("login-status-api-key.stderr")}, process.LoggedIn, "api-key (API key configured)"},
		{"logged out", process.LoginOutput{Code: ptr(int32(1)), Stderr: read("login-status-logged-out.stderr")}, process.LoggedOut, "not logged in"},
		{"ChatGPT", process.LoginOutput{Code: ptr(int32(0)), Stderr: "Logged in using ChatGPT"}, process.LoggedIn, "subscription (Logged in using ChatGPT)"},
		{"unreadable", process.LoginOutput{Code: ptr(int32(2)), Stderr: "error: unexpected argument"}, process.Unknown, "exited 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, text := New().ReadLogin(tt.out)
			if state != tt.state || !strings.Contains(text, tt.text) || strings.Contains(text, "sk-") {
				t.Errorf("%s %q", state, text)
			}
		})
	}
}
