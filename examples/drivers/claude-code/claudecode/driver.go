// Package claudecode is the translation of the claude-code process driver: how a turn
// runs Claude Code (`claude -p … --output-format stream-json`) and how its stdout lines
// become the runtime's events. It is plain Go, tested on the host; the wasip1 command
// one folder up only installs it (docs/reference/process-drivers.md "Shipped drivers").
package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/capsulegate/capsulegate/wit/guest/process"
)

// Binary is the executable the driver runs.
const Binary = "claude"

// TestedVersions are the Claude Code versions this release was run with.
var TestedVersions = []string{"2.1.328"}

// InstallPath is the npm global install folder of Claude Code on Linux (npm's default
// prefix /usr): the native binary the `claude` link points into lives under it.
const InstallPath = "/usr/lib/node_modules/@anthropic-ai/claude-code"

// GatewayURL is the token launch puts where the provider's base URL goes; the runtime
// replaces it with its credential gateway's loopback URL, as it replaces {files_dir}.
const GatewayURL = "{gateway_url}"

// PlaceholderKey is the API key the harness is given: the runtime replaces it with the
// run's placeholder key, which only its credential gateway accepts and swaps for the
// provider key; the provider key never reaches the harness.
const PlaceholderKey = "{gateway_key}"

// Config is inference.driver.config; every member is optional.
type Config struct {
	// BaseURL replaces {gateway_url} as ANTHROPIC_BASE_URL.
	BaseURL string `json:"base_url,omitempty"`
	// Tools are the built-in tools to turn on (Read, Grep, …); none by default.
	Tools []string `json:"tools,omitempty"`
	// MaxTurns caps the agent's model calls in one turn (--max-turns).
	MaxTurns int `json:"max_turns,omitempty"`
	// ReplaceSystemPrompt sends the runtime's prompt as the whole system prompt
	// (--system-prompt) instead of after Claude Code's own (--append-system-prompt).
	ReplaceSystemPrompt bool `json:"replace_system_prompt,omitempty"`
}

// Driver drives Claude Code for one run: parse reads what launch planned.
type Driver struct {
	server string // the bridge's server name, "" without one
	model  *string
	// usage: the completed messages' sums and the message being streamed
	done, cur counts
	end       *process.Event // the turn-end or turn-failed parse answered
}

type counts struct{ in, out, cacheRead, cacheCreation uint64 }

// New returns a driver for a run.
func New() *Driver { return &Driver{} }

// Describe says what the driver drives.
func (*Driver) Describe() process.Description {
	return process.Description{
		Harness: "claude-code", Binary: Binary, VersionArgs: []string{"--version"}, TestedVersions: TestedVersions,
		Interrupt: process.InterruptSignal, StreamsText: true, ReportsUsage: true,
		NeedsPaths: []process.PathNeed{{Path: InstallPath, Access: "read"}},
		LoginCheck: []string{"auth", "status", "--json"},
	}
}

var (
	serverName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	uuidForm   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
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
		return c, fmt.Errorf("claude-code: inference.driver.config: %w", err)
	}
	if c.MaxTurns < 0 {
		return c, fmt.Errorf("claude-code: inference.driver.config: max_turns %d is negative", c.MaxTurns)
	}
	for _, t := range c.Tools {
		if t == "" || strings.ContainsAny(t, ", ") {
			return c, fmt.Errorf("claude-code: inference.driver.config: tool name %q", t)
		}
	}
	return c, nil
}

// mcpConfig is the --mcp-config file: the bridge as a Streamable HTTP server.
type mcpConfig struct {
	MCPServers map[string]mcpServer `json:"mcpServers"`
}

type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// Launch plans one turn.
func (d *Driver) Launch(req process.LaunchRequest) (process.LaunchPlan, error) {
	*d = Driver{model: req.Model}
	cfg, err := ParseConfig(req.Config)
	if err != nil {
		return process.LaunchPlan{}, err
	}
	if strings.TrimSpace(req.Task) == "" {
		return process.LaunchPlan{}, fmt.Errorf("claude-code: an empty task")
	}
	// Values are joined to their flags (--flag=value): one starting with "-" stays a value.
	args := []string{"-p", "--output-format=stream-json", "--verbose", "--include-partial-messages",
		// Nothing the capsule did not grant: no hooks, plugins, CLAUDE.md discovery or
		// keychain, no MCP server but the bridge, no prompt that nobody could answer.
		"--bare", "--strict-mcp-config", "--permission-mode=dontAsk",
		"--tools=" + strings.Join(cfg.Tools, ",")}
	if req.Model != nil && *req.Model != "" {
		args = append(args, "--model="+*req.Model)
	}
	if req.SystemPrompt != "" {
		flag := "--append-system-prompt"
		if cfg.ReplaceSystemPrompt {
			flag = "--system-prompt"
		}
		args = append(args, flag+"="+req.SystemPrompt)
	}
	var files []process.File
	allowed := append([]string(nil), cfg.Tools...)
	if b := req.Bridge; b != nil {
		if !serverName.MatchString(b.ServerName) {
			return process.LaunchPlan{}, fmt.Errorf("claude-code: bridge server name %q: only letters, digits, _ and - name an MCP server", b.ServerName)
		}
		d.server = b.ServerName
		conf, err := json.MarshalIndent(mcpConfig{MCPServers: map[string]mcpServer{b.ServerName: {
			Type: "http", URL: b.URL, Headers: map[string]string{"Authorization": "Bearer " + b.BearerToken}}}}, "", "  ")
		if err != nil {
			return process.LaunchPlan{}, err
		}
		files = append(files, process.File{Name: "mcp.json", Contents: string(conf) + "\n"})
		args = append(args, "--mcp-config={files_dir}/mcp.json")
		for _, t := range b.ToolNames {
			allowed = append(allowed, "mcp__"+b.ServerName+"__"+t)
		}
	}
	if len(allowed) > 0 {
		args = append(args, "--allowedTools="+strings.Join(allowed, ","))
	}
	if cfg.MaxTurns > 0 {
		args = append(args, fmt.Sprintf("--max-turns=%d", cfg.MaxTurns))
	}
	switch {
	case req.Resume:
		if req.SessionID == "" {
			return process.LaunchPlan{}, fmt.Errorf("claude-code: resuming needs a session id")
		}
		args = append(args, "--resume="+req.SessionID)
	case uuidForm.MatchString(req.SessionID):
		args = append(args, "--session-id="+req.SessionID)
	}
	// The task comes after "--", so one starting with "-" is never read as an option.
	args = append(args, "--", req.Task)
	base := GatewayURL
	if cfg.BaseURL != "" {
		base = cfg.BaseURL
	}
	env := [][2]string{
		{"ANTHROPIC_BASE_URL", base},
		{"ANTHROPIC_API_KEY", PlaceholderKey},
		{"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"},
		{"DISABLE_AUTOUPDATER", "1"},
		{"HOME", "{files_dir}/home"},
	}
	return process.LaunchPlan{Args: args, EnvSet: env, Files: files,
		// An empty stdin, closed at once: with a pipe left open the harness waits for it.
		Stdin: []byte{}}, nil
}

// line is the union of the stream-json lines' members this driver reads.
type line struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	Model           string          `json:"model"`
	APIKeySource    string          `json:"apiKeySource"`
	MCPServers      []mcpStatus     `json:"mcp_servers"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Message         *message        `json:"message"`
	Event           json.RawMessage `json:"event"` // a stream event; a word on other lines
	IsAPIError      bool            `json:"is_api_error_message"`
	Attempt         uint32          `json:"attempt"`
	ErrorStatus     *int            `json:"error_status"`
	Error           json.RawMessage `json:"error"`
	// result
	IsError        bool     `json:"is_error"`
	Result         string   `json:"result"`
	Errors         []string `json:"errors"`
	Usage          *usage   `json:"usage"`
	APIErrorStatus *int     `json:"api_error_status"`
	APIErrorType   string   `json:"api_error_type"`
	TerminalReason string   `json:"terminal_reason"`
}

type mcpStatus struct{ Name, Status string }

type message struct {
	Content json.RawMessage `json:"content"`
	Usage   *usage          `json:"usage"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type streamEvent struct {
	Type    string   `json:"type"`
	Message *message `json:"message"`
	Delta   *struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Thinking string `json:"thinking"`
	} `json:"delta"`
	Usage *usage `json:"usage"`
}

type usage struct {
	Input         *uint64 `json:"input_tokens"`
	Output        *uint64 `json:"output_tokens"`
	CacheRead     *uint64 `json:"cache_read_input_tokens"`
	CacheCreation *uint64 `json:"cache_creation_input_tokens"`
	OutputDetails *struct {
		Thinking *uint64 `json:"thinking_tokens"`
	} `json:"output_tokens_details"`
}

// Parse reads a batch of stdout lines.
func (d *Driver) Parse(lines []string) []process.Event {
	var out []process.Event
	for _, l := range lines {
		out = d.parseLine(out, l)
	}
	return out
}

// maxNote bounds how much of an unread line a note repeats.
const maxNote = 2000

func unread(why, l string) process.Event {
	return process.Event{Case: process.Note, Text: "claude-code: " + why + ": " + process.Clip(l, maxNote)}
}

func (d *Driver) parseLine(out []process.Event, raw string) []process.Event {
	s := strings.TrimSpace(raw)
	if s == "" {
		return out
	}
	var l line
	if err := json.Unmarshal([]byte(s), &l); err != nil || l.Type == "" {
		return append(out, unread("unread line", s))
	}
	switch l.Type {
	case "system":
		return d.system(out, l, s)
	case "stream_event":
		if l.ParentToolUseID != nil { // a subagent's stream: its result arrives as a tool result
			return out
		}
		var e streamEvent
		if err := json.Unmarshal(l.Event, &e); err != nil {
			return append(out, unread("unread stream event", s))
		}
		return d.stream(out, e)
	case "assistant":
		if l.ParentToolUseID != nil {
			return out
		}
		return d.assistant(out, l, s)
	case "user":
		if l.ParentToolUseID != nil {
			return out
		}
		return d.user(out, l)
	case "result":
		return d.result(out, l)
	case "rate_limit_event", "keep_alive":
		return out
	}
	return append(out, unread("unread "+l.Type+" line", s))
}

func (d *Driver) system(out []process.Event, l line, s string) []process.Event {
	switch l.Subtype {
	case "init":
		auth := "api-key"
		if l.APIKeySource == "none" || l.APIKeySource == "" {
			auth = "subscription"
		}
		var model *string
		if l.Model != "" {
			model = &l.Model
		} else {
			model = d.model
		}
		out = append(out, process.Event{Case: process.SessionStarted, SessionID: l.SessionID, Auth: auth, Model: model})
		for _, m := range l.MCPServers {
			if m.Status != "connected" {
				out = append(out, process.Event{Case: process.Note, Text: fmt.Sprintf("claude-code: MCP server %s is %s", m.Name, m.Status)})
			}
		}
		return out
	case "api_retry":
		reason := errorWord(l.Error)
		if l.ErrorStatus != nil {
			reason = fmt.Sprintf("%s (HTTP %d)", reason, *l.ErrorStatus)
		}
		return append(out, process.Event{Case: process.Retry, Attempt: l.Attempt, Text: reason})
	case "status", "ui_invalidate", "thinking_tokens", "hook_started", "hook_response": // progress words: no event
		return out
	}
	return append(out, unread("unread system line", s))
}

// errorWord reads an "error" member: a string, or an object with a message.
func errorWord(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var o struct {
		Message string `json:"message"`
		Type    string `json:"type"`
	}
	if json.Unmarshal(raw, &o) == nil && (o.Message != "" || o.Type != "") {
		return strings.TrimSpace(o.Type + " " + o.Message)
	}
	return string(raw)
}

func (d *Driver) stream(out []process.Event, e streamEvent) []process.Event {
	switch e.Type {
	case "message_start":
		d.done.add(d.cur)
		d.cur = counts{}
		if e.Message != nil && e.Message.Usage != nil {
			d.cur.set(*e.Message.Usage)
		}
	case "content_block_delta":
		if e.Delta == nil {
			return out
		}
		switch e.Delta.Type {
		case "text_delta":
			return append(out, process.Event{Case: process.TextDelta, Text: e.Delta.Text})
		case "thinking_delta":
			return append(out, process.Event{Case: process.ThinkingDelta, Text: e.Delta.Thinking})
		}
	case "message_delta":
		if e.Usage != nil {
			d.cur.set(*e.Usage)
			sum := d.done
			sum.add(d.cur)
			return append(out, sum.event(nil))
		}
	}
	return out
}

func (c *counts) add(o counts) {
	c.in += o.in
	c.out += o.out
	c.cacheRead += o.cacheRead
	c.cacheCreation += o.cacheCreation
}

// set takes the members u reports, keeping the others.
func (c *counts) set(u usage) {
	for _, m := range []struct {
		dst *uint64
		v   *uint64
	}{{&c.in, u.Input}, {&c.out, u.Output}, {&c.cacheRead, u.CacheRead}, {&c.cacheCreation, u.CacheCreation}} {
		if m.v != nil {
			*m.dst = *m.v
		}
	}
}

func (c counts) event(thinking *uint64) process.Event {
	in, out, cr, cc := c.in, c.out, c.cacheRead, c.cacheCreation
	return process.Event{Case: process.UsageEvent, Usage: process.Usage{Input: &in, Output: &out, CacheRead: &cr, CacheCreation: &cc, Thinking: thinking}}
}

func (d *Driver) assistant(out []process.Event, l line, s string) []process.Event {
	if l.Message == nil {
		return append(out, unread("an assistant line without a message", s))
	}
	var blocks []block
	if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
		return append(out, unread("unread assistant content", s))
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if l.IsAPIError { // Claude Code's words about a failed request, not the model's
				out = append(out, process.Event{Case: process.Note, Text: "claude-code: " + b.Text})
				continue
			}
			out = append(out, process.Event{Case: process.Text, Text: b.Text})
		case "thinking":
			out = append(out, process.Event{Case: process.Thinking, Text: b.Thinking})
		case "redacted_thinking":
		case "tool_use":
			input := string(b.Input)
			if input == "" {
				input = "{}"
			}
			out = append(out, process.Event{Case: process.ToolCall, ToolID: b.ID, ToolName: d.bareName(b.Name), ToolInput: input})
		default:
			out = append(out, process.Event{Case: process.Note, Text: "claude-code: an assistant " + b.Type + " block"})
		}
	}
	return out
}

// bareName strips the bridge's naming, mcp__<server>__, off a tool name.
func (d *Driver) bareName(name string) string {
	if d.server != "" {
		if bare, ok := strings.CutPrefix(name, "mcp__"+d.server+"__"); ok {
			return bare
		}
	}
	return name
}

func (d *Driver) user(out []process.Event, l line) []process.Event {
	if l.Message == nil {
		return out
	}
	var blocks []block
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return out // a plain user message: the task, echoed
	}
	for _, b := range blocks {
		if b.Type == "tool_result" {
			out = append(out, process.Event{Case: process.ToolResult, ToolID: b.ToolUseID, Text: resultText(b.Content), IsError: b.IsError})
		}
	}
	return out
}

// resultText reads a tool result's content: a string, or blocks whose text it joins.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	var b bytes.Buffer
	for i, bl := range blocks {
		if i > 0 {
			b.WriteByte('\n')
		}
		if bl.Type == "text" {
			b.WriteString(bl.Text)
		} else {
			fmt.Fprintf(&b, "[%s]", bl.Type)
		}
	}
	return b.String()
}

func (d *Driver) result(out []process.Event, l line) []process.Event {
	if u := l.Usage; u != nil {
		var c counts
		c.set(*u)
		var thinking *uint64
		if u.OutputDetails != nil {
			thinking = u.OutputDetails.Thinking
		}
		out = append(out, c.event(thinking))
	}
	end := process.Event{Case: process.TurnEnd, Text: l.Result}
	if l.Subtype != "success" || l.IsError {
		msg := l.Result
		if len(l.Errors) > 0 {
			msg = strings.Join(l.Errors, "; ")
		}
		if msg == "" {
			msg = l.Subtype
		}
		kind := failureKind(l)
		if kind == process.FailCanceled { // its errors are diagnostics of the abort
			msg = "interrupted (" + l.TerminalReason + ")"
		}
		end = process.Event{Case: process.TurnFailed, FailureKind: kind, Text: msg}
	}
	d.end = &end
	return append(out, end)
}

// failureKind classifies a failed result line.
func failureKind(l line) string {
	switch {
	case strings.HasPrefix(l.TerminalReason, "aborted"): // SIGINT: "aborted_streaming", "aborted_tools"
		return process.FailCanceled
	case l.Subtype == "error_max_turns":
		return process.FailMaxTurns
	case l.Subtype == "error_max_budget_usd":
		return process.FailQuota
	case l.APIErrorStatus != nil && (*l.APIErrorStatus == 401 || *l.APIErrorStatus == 403),
		l.APIErrorType == "authentication_error", l.APIErrorType == "permission_error":
		return process.FailAuth
	case l.APIErrorStatus != nil && (*l.APIErrorStatus == 429 || *l.APIErrorStatus == 402),
		l.APIErrorType == "rate_limit_error", l.APIErrorType == "billing_error":
		return process.FailQuota
	case l.Subtype == "error_during_execution":
		return process.FailHarnessError
	}
	return process.FailOther
}

// ClassifyExit gives the final event of a run whose output ended without a result line.
func (d *Driver) ClassifyExit(x process.ExitStatus) process.Event {
	if x.Interrupted {
		return process.Event{Case: process.TurnFailed, FailureKind: process.FailCanceled, Text: "claude-code: interrupted"}
	}
	if x.SawTerminal && d.end != nil { // parse answered it already: the same again
		return *d.end
	}
	tail := strings.TrimSpace(x.StderrTail)
	low := strings.ToLower(tail)
	kind := process.FailHarnessError
	switch {
	case strings.Contains(low, "invalid api key"), strings.Contains(low, "authentication"), strings.Contains(low, "not logged in"),
		strings.Contains(low, "/login"), strings.Contains(low, " 401"):
		kind = process.FailAuth
	case strings.Contains(low, "credit balance"), strings.Contains(low, "usage limit"), strings.Contains(low, "rate limit"), strings.Contains(low, " 429"):
		kind = process.FailQuota
	}
	msg := "claude-code " + x.How() + " without a result"
	if tail != "" {
		msg += ": " + tail
	}
	return process.Event{Case: process.TurnFailed, FailureKind: kind, Text: msg}
}

// ReadLogin reads `claude auth status --json`.
func (*Driver) ReadLogin(o process.LoginOutput) (string, string) {
	var st struct {
		LoggedIn         *bool  `json:"loggedIn"`
		AuthMethod       string `json:"authMethod"`
		APIProvider      string `json:"apiProvider"`
		APIKeySource     string `json:"apiKeySource"`
		SubscriptionType string `json:"subscriptionType"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(o.Stdout)), &st); err != nil || st.LoggedIn == nil {
		why := strings.TrimSpace(o.Stderr)
		if why == "" {
			why = strings.TrimSpace(o.Stdout)
		}
		if o.Code != nil {
			why = fmt.Sprintf("auth status exited %d: %s", *o.Code, why)
		}
		return process.Unknown, "claude-code: unreadable auth status: " + why
	}
	if !*st.LoggedIn {
		return process.LoggedOut, "claude-code: not logged in (run claude auth login, or let the credential gateway supply the key)"
	}
	how := st.AuthMethod
	if st.APIKeySource != "" {
		how += " from " + st.APIKeySource
	}
	if st.SubscriptionType != "" {
		how += ", " + st.SubscriptionType + " subscription"
	}
	if st.APIProvider != "" && st.APIProvider != "firstParty" {
		how += " via " + st.APIProvider
	}
	return process.LoggedIn, "claude-code: " + how
}
