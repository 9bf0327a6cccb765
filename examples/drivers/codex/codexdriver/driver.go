// Package codexdriver is the translation of the codex process driver: how a turn runs
// the Codex CLI (`codex exec --json`) with a config.toml of its own, and how its JSONL
// events become the runtime's. It is plain Go, tested on the host; the wasip1 command one
// folder up only installs it (docs/reference/process-drivers.md "Shipped drivers").
package codexdriver

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// Binary is the executable the driver runs.
const Binary = "codex"

// TestedVersions are the Codex versions this release was run with.
var TestedVersions = []string{"0.169.0"}

// InstallPath is the npm global install folder of Codex on Linux (npm's default prefix
// /usr): the node entry point and, under it, the native binary it starts.
const InstallPath = "/usr/lib/node_modules/@openai/codex"

// GatewayURL is the token launch puts where the provider's base URL goes; the runtime
// replaces it with its credential gateway's loopback URL, as it replaces {files_dir}.
const GatewayURL = "{gateway_url}"

// Names of what launch sets up.
const (
	Provider       = "capsulegate"              // the model provider in config.toml
	ProviderKeyEnv = "CAPSULEGATE_PROVIDER_KEY" // its env_key: a placeholder
	BridgeTokenEnv = "CAPSULEGATE_BRIDGE_TOKEN" // the bridge's bearer token
	PlaceholderKey = "{gateway_key}"            // the run's placeholder: the gateway swaps it for the provider key
	ConfigFile     = "codex-home/config.toml"   // under {files_dir}; CODEX_HOME is its folder
)

// Config is inference.driver.config; every member is optional.
type Config struct {
	// BaseURL is the provider's base URL, /v1 included; by default {gateway_url}/v1.
	BaseURL string `json:"base_url,omitempty"`
	// Shell turns Codex's own shell tools on, still under its read-only sandbox.
	Shell bool `json:"shell,omitempty"`
	// ReasoningEffort is passed as model_reasoning_effort (low, medium, high, …).
	ReasoningEffort string `json:"reasoning_effort,omitempty"`
}

// Driver drives Codex for one run: parse reads what launch planned.
type Driver struct {
	model  *string
	answer string
	end    *process.Event // the turn-end or turn-failed parse answered
	usage  counts
}

type counts struct{ in, cached, written, out, reasoning uint64 }

// New returns a driver for a run.
func New() *Driver { return &Driver{} }

// Describe says what the driver drives.
func (*Driver) Describe() process.Description {
	return process.Description{
		Harness: "codex", Binary: Binary, VersionArgs: []string{"--version"}, TestedVersions: TestedVersions,
		// codex exec reads no control messages on stdin: SIGINT stops the turn.
		Interrupt: process.InterruptSignal, StreamsText: false, ReportsUsage: true,
		NeedsPaths: []process.PathNeed{{Path: InstallPath, Access: "read"}},
		LoginCheck: []string{"login", "status"},
	}
}

var (
	serverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	effortWord = regexp.MustCompile(`^[a-z]+$`)
)

// ParseConfig reads inference.driver.config, refusing members it does not know.
func ParseConfig(raw *string) (Config, error) {
	var c Config
	if raw == nil || strings.TrimSpace(*raw) == "" {
		return c, nil
	}
	dec := json.NewDecoder(strings.NewReader(*raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("codex: inference.driver.config: %w", err)
	}
	if c.ReasoningEffort != "" && !effortWord.MatchString(c.ReasoningEffort) {
		return c, fmt.Errorf("codex: inference.driver.config: reasoning_effort %q", c.ReasoningEffort)
	}
	return c, nil
}

// tomlString quotes s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// builtins are the Codex features that give the model tools of Codex's own, all off:
// the capsule's tools come through the bridge.
var builtins = []string{"shell_tool", "unified_exec", "view_image", "image_generation", "apps", "plugins", "sleep_tool", "goals",
	"computer_use", "browser_use", "in_app_browser", "tool_suggest", "skill_search"}

// ConfigTOML is the config.toml launch writes for the request.
func ConfigTOML(req process.LaunchRequest, cfg Config) string {
	var b strings.Builder
	b.WriteString("# Written by the codex process driver for one turn.\n")
	fmt.Fprintf(&b, "model_provider = %s\n", tomlString(Provider))
	b.WriteString("approval_policy = \"never\"\nsandbox_mode = \"read-only\"\nweb_search = \"disabled\"\ncheck_for_update_on_startup = false\n")
	if cfg.ReasoningEffort != "" {
		fmt.Fprintf(&b, "model_reasoning_effort = %s\n", tomlString(cfg.ReasoningEffort))
	}
	if req.SystemPrompt != "" {
		fmt.Fprintf(&b, "developer_instructions = %s\n", tomlString(req.SystemPrompt))
	}
	// base_url is given as an argument (-c), with {gateway_url}, not in this file.
	fmt.Fprintf(&b, "\n[model_providers.%s]\nname = %s\nenv_key = %s\nwire_api = \"responses\"\n", Provider, tomlString(Provider), tomlString(ProviderKeyEnv))
	b.WriteString("\n[features]\n")
	for _, f := range builtins {
		on := cfg.Shell && (f == "shell_tool" || f == "unified_exec")
		fmt.Fprintf(&b, "%s = %t\n", f, on)
	}
	b.WriteString("\n[agents]\nenabled = false\n")
	if br := req.Bridge; br != nil {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\nurl = %s\nbearer_token_env_var = %s\ndefault_tools_approval_mode = \"approve\"\n",
			br.ServerName, tomlString(br.URL), tomlString(BridgeTokenEnv))
		names := make([]string, len(br.ToolNames))
		for i, n := range br.ToolNames {
			names[i] = tomlString(n)
		}
		fmt.Fprintf(&b, "enabled_tools = [%s]\n", strings.Join(names, ", "))
	}
	return b.String()
}

// Launch plans one turn.
func (d *Driver) Launch(req process.LaunchRequest) (process.LaunchPlan, error) {
	*d = Driver{model: req.Model}
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return process.LaunchPlan{}, err
	}
	if strings.TrimSpace(req.Task) == "" {
		return process.LaunchPlan{}, fmt.Errorf("codex: an empty task")
	}
	if br := req.Bridge; br != nil && !serverName.MatchString(br.ServerName) {
		return process.LaunchPlan{}, fmt.Errorf("codex: bridge server name %q: only letters, digits, _ and - name an MCP server", br.ServerName)
	}
	base := GatewayURL + "/v1"
	if cfg.BaseURL != "" {
		base = cfg.BaseURL
	}
	args := []string{"exec"}
	if req.Resume {
		if req.SessionID == "" {
			return process.LaunchPlan{}, fmt.Errorf("codex: resuming needs a session id")
		}
		args = append(args, "resume")
	}
	args = append(args, "--json", "--skip-git-repo-check", "-c", "model_providers."+Provider+".base_url="+tomlString(base))
	if req.Model != nil && *req.Model != "" {
		args = append(args, "--model="+*req.Model) // joined: a value starting with "-" stays one
	}
	// After "--" a task starting with "-" is never read as an option. A new session's id
	// is Codex's to choose (thread.started reports it); the runtime's is not passed.
	args = append(args, "--")
	if req.Resume {
		args = append(args, req.SessionID)
	}
	args = append(args, req.Task)
	env := [][2]string{
		{"CODEX_HOME", "{files_dir}/codex-home"},
		{ProviderKeyEnv, PlaceholderKey},
	}
	if req.Bridge != nil {
		env = append(env, [2]string{BridgeTokenEnv, req.Bridge.BearerToken})
	}
	return process.LaunchPlan{Args: args, EnvSet: env, Files: []process.File{{Name: ConfigFile, Contents: ConfigTOML(req, cfg)}},
		// An empty stdin, closed at once: with a pipe left open the harness waits for it.
		Stdin: []byte{}}, nil
}

// event is the union of the JSONL events' members this driver reads.
type event struct {
	Type     string          `json:"type"`
	ThreadID string          `json:"thread_id"`
	Item     *item           `json:"item"`
	Usage    *usage          `json:"usage"`
	Error    json.RawMessage `json:"error"`
	Message  string          `json:"message"`
}

type item struct {
	ID               string          `json:"id"`
	Type             string          `json:"type"`
	Text             string          `json:"text"`
	Message          string          `json:"message"`
	Server           string          `json:"server"`
	Tool             string          `json:"tool"`
	Arguments        json.RawMessage `json:"arguments"`
	Result           *toolResult     `json:"result"`
	Error            *struct{ Message string }
	Status           string `json:"status"`
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Query            string `json:"query"`
}

type toolResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structured_content"`
}

type usage struct {
	Input     uint64 `json:"input_tokens"`
	Cached    uint64 `json:"cached_input_tokens"`
	Written   uint64 `json:"cache_write_input_tokens"`
	Output    uint64 `json:"output_tokens"`
	Reasoning uint64 `json:"reasoning_output_tokens"`
}

// Parse reads a batch of stdout lines.
func (d *Driver) Parse(lines []string) []process.Event {
	var out []process.Event
	for _, l := range lines {
		out = d.parseLine(out, l)
	}
	return out
}

const maxNote = 2000

func note(s string) process.Event {
	return process.Event{Case: process.Note, Text: "codex: " + process.Clip(s, maxNote)}
}

var reconnecting = regexp.MustCompile(`^Reconnecting\.\.\. (\d+)/\d+`)

func (d *Driver) parseLine(out []process.Event, raw string) []process.Event {
	s := strings.TrimSpace(raw)
	if s == "" {
		return out
	}
	var e event
	if err := json.Unmarshal([]byte(s), &e); err != nil || e.Type == "" {
		return append(out, note("unread line: "+s))
	}
	switch e.Type {
	case "thread.started":
		return append(out, process.Event{Case: process.SessionStarted, SessionID: e.ThreadID, Auth: "api-key", Model: d.model})
	case "turn.started":
		return out
	case "item.started", "item.updated", "item.completed":
		if e.Item == nil {
			return append(out, note("an item event without an item: "+s))
		}
		return d.item(out, e.Type, *e.Item)
	case "turn.completed":
		if e.Usage != nil {
			u := e.Usage
			d.usage = counts{d.usage.in + u.Input, d.usage.cached + u.Cached, d.usage.written + u.Written, d.usage.out + u.Output, d.usage.reasoning + u.Reasoning}
			out = append(out, d.usage.event())
		}
		d.end = &process.Event{Case: process.TurnEnd, Text: d.answer}
		return append(out, *d.end)
	case "turn.failed":
		msg := errorMessage(e.Error)
		d.end = &process.Event{Case: process.TurnFailed, FailureKind: Classify(msg), Text: msg}
		return append(out, *d.end)
	case "error":
		if m := reconnecting.FindStringSubmatch(e.Message); m != nil {
			n, _ := strconv.ParseUint(m[1], 10, 32)
			return append(out, process.Event{Case: process.Retry, Attempt: uint32(n), Text: e.Message})
		}
		return append(out, note(e.Message))
	}
	return append(out, note("unread "+e.Type+" event: "+s))
}

// event gives the cumulative usage; Codex's input_tokens include the cached ones, which
// the runtime counts beside input.
func (c counts) event() process.Event {
	in := c.in - min(c.in, c.cached)
	cached, written, out, reasoning := c.cached, c.written, c.out, c.reasoning
	return process.Event{Case: process.UsageEvent, Usage: process.Usage{Input: &in, Output: &out, CacheRead: &cached, CacheCreation: &written, Thinking: &reasoning}}
}

func errorMessage(raw json.RawMessage) string {
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Message != "" {
		return o.Message
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && s != "" {
		return s
	}
	if len(raw) == 0 {
		return "the turn failed"
	}
	return string(raw)
}

// Classify reads the kind of failure out of Codex's message for it.
func Classify(msg string) string {
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "401"), strings.Contains(low, "403"), strings.Contains(low, "unauthorized"), strings.Contains(low, "invalid_api_key"),
		strings.Contains(low, "incorrect api key"), strings.Contains(low, "not logged in"), strings.Contains(low, "missing environment variable"):
		return process.FailAuth
	case strings.Contains(low, "quota"), strings.Contains(low, "429"), strings.Contains(low, "usage limit"), strings.Contains(low, "rate limit"),
		strings.Contains(low, "insufficient_quota"), strings.Contains(low, "billing"):
		return process.FailQuota
	}
	return process.FailOther
}

func (d *Driver) item(out []process.Event, phase string, it item) []process.Event {
	switch it.Type {
	case "agent_message":
		if phase == "item.completed" {
			d.answer = it.Text
			return append(out, process.Event{Case: process.Text, Text: it.Text})
		}
		return out
	case "reasoning":
		if phase == "item.completed" {
			return append(out, process.Event{Case: process.Thinking, Text: it.Text})
		}
		return out
	case "mcp_tool_call":
		switch phase {
		case "item.started":
			input := string(it.Arguments)
			if input == "" || input == "null" {
				input = "{}"
			}
			return append(out, process.Event{Case: process.ToolCall, ToolID: it.ID, ToolName: it.Tool, ToolInput: input})
		case "item.completed":
			r := process.Event{Case: process.ToolResult, ToolID: it.ID, IsError: it.Status == "failed" || it.Error != nil}
			switch {
			case it.Error != nil:
				r.Text = it.Error.Message
			case it.Result != nil:
				var parts []string
				for _, c := range it.Result.Content {
					if c.Type == "text" {
						parts = append(parts, c.Text)
					} else {
						parts = append(parts, "["+c.Type+"]")
					}
				}
				r.Text = strings.Join(parts, "\n")
			}
			return append(out, r)
		}
		return out
	case "command_execution":
		// Codex's own shell (off unless the config turns it on): for the trace.
		if phase == "item.completed" {
			code := "?"
			if it.ExitCode != nil {
				code = strconv.Itoa(*it.ExitCode)
			}
			return append(out, note(fmt.Sprintf("ran %q: exit %s", it.Command, code)))
		}
		return out
	case "error":
		return append(out, note(it.Message))
	case "todo_list", "file_change", "web_search":
		if phase == "item.completed" {
			return append(out, note("a "+it.Type+" item"))
		}
		return out
	}
	return append(out, note("unread "+it.Type+" item"))
}

// ClassifyExit gives the final event of a run whose output ended without a turn's end.
func (d *Driver) ClassifyExit(x process.ExitStatus) process.Event {
	if x.Interrupted {
		return process.Event{Case: process.TurnFailed, FailureKind: process.FailCanceled, Text: "codex: interrupted"}
	}
	if x.SawTerminal && d.end != nil { // parse answered it already: the same again
		return *d.end
	}
	tail := strings.TrimSpace(x.StderrTail)
	kind := process.FailHarnessError
	if k := Classify(tail); k != process.FailOther {
		kind = k
	}
	msg := "codex " + x.How() + " without finishing the turn"
	if tail != "" {
		msg += ": " + tail
	}
	return process.Event{Case: process.TurnFailed, FailureKind: kind, Text: msg}
}

// ReadLogin reads `codex login status`, which writes to stderr: "API key configured -
// <masked key>" or "Logged in using ChatGPT" with status 0, "Not logged in" with 1.
// The masked key is not repeated.
func (*Driver) ReadLogin(o process.LoginOutput) (string, string) {
	text := strings.TrimSpace(o.Stderr + "\n" + o.Stdout)
	first, _, _ := strings.Cut(text, "\n")
	first, _, _ = strings.Cut(first, " - ")
	first = strings.TrimSpace(first)
	low := strings.ToLower(text)
	switch {
	case strings.Contains(low, "not logged in"):
		return process.LoggedOut, "codex: not logged in (run codex login, or let the credential gateway supply the key)"
	case o.Code != nil && *o.Code == 0 && strings.Contains(low, "chatgpt"):
		return process.LoggedIn, "codex: subscription (" + first + ")"
	case o.Code != nil && *o.Code == 0 && strings.Contains(low, "api key"):
		return process.LoggedIn, "codex: api-key (" + first + ")"
	case o.Code != nil && *o.Code == 0 && first != "":
		return process.LoggedIn, "codex: " + first
	}
	if o.Code != nil {
		return process.Unknown, fmt.Sprintf("codex: login status exited %d: %s", *o.Code, first)
	}
	return process.Unknown, "codex: login status: " + first
}
