package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// StateMaxTurns ends an agent task that used up inference.max_turns.
const StateMaxTurns = "max_turns_reached"

// EventInference records one driver turn.
const EventInference = "inference"

// Inference is one turn of the model.
type Inference struct {
	Turn         int      `json:"turn"`
	InputTokens  int      `json:"input_tokens"`
	OutputTokens int      `json:"output_tokens"`
	StopReason   string   `json:"stop_reason"`
	Tools        []string `json:"tool_names"` // never nil: [] when the turn asked for no tool
	DurationMS   int64    `json:"duration_ms"`
	Error        string   `json:"error,omitempty"`
}

// The driver JSON, host side (docs/reference/driver-protocol.md "Input" and "Output").
type (
	agentBlock struct {
		Type  string          `json:"type"`
		Text  string          `json:"text,omitempty"`
		ID    string          `json:"id,omitempty"`
		Name  string          `json:"name,omitempty"`
		Input json.RawMessage `json:"input,omitempty"`
	}
	agentMessage struct {
		Role       string       `json:"role"`
		Content    []agentBlock `json:"content"`
		ToolCallID string       `json:"tool_call_id,omitempty"`
		IsError    bool         `json:"is_error,omitempty"`
	}
	agentTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	driverRequest struct {
		Model     string         `json:"model"`
		MaxTokens int            `json:"max_tokens"`
		System    string         `json:"system"`
		Messages  []agentMessage `json:"messages"`
		Tools     []agentTool    `json:"tools"`
		// Params is always {}: upstream Murmur sends it, and its drivers read it.
		Params struct{} `json:"params"`
		// ContinuationID is the one the driver returned last; Messages then holds only
		// the messages after what it acknowledged.
		ContinuationID string `json:"continuation_id,omitempty"`
	}
	driverResponse struct {
		StopReason string       `json:"stop_reason"`
		Content    []agentBlock `json:"content"`
		Usage      struct {
			InputTokens  int `json:"input_tokens"`
			OutputTokens int `json:"output_tokens"`
		} `json:"usage"`
		Error          string `json:"error"`
		ContinuationID string `json:"continuation_id"`
	}
)

// agentTask runs the agent loop (docs/reference/driver-protocol.md "One turn") once:
// driver turn, dispatch of every tool call, results appended, until end_turn, max_tokens
// or max_turns. It returns the final text and the task state.
func (s *session) agentTask(ctx context.Context, t *task, text string, history []Turn) (result, state string, err error) {
	m := s.staged.Manifest
	inf := m.Inference
	driver := s.staged.Modules[inf.Driver.Artifact]
	if driver == nil {
		return "", StateFailed, fmt.Errorf("driver %s is not a wasm driver this release can run", inf.Driver.Artifact)
	}
	system, err := s.systemPrompt()
	if err != nil {
		return "", StateFailed, err
	}
	// Never null (offeredTools returns []): upstream Murmur's drivers read tools as a list
	// and refuse null.
	tools := s.offeredTools()
	msgs := historyMessages(history)
	// The driver's continuation and how many of msgs it acknowledged: only those after
	// are sent. One issued by another driver (a reload changed it) is not handed on.
	by := s.driverKey()
	cont, acked := "", 0
	if n := len(history); n > 0 && history[n-1].Continuation != "" && history[n-1].ContinuationBy == by {
		cont, acked = history[n-1].Continuation, len(msgs)
	}
	first := len(msgs)
	compacted := false // msgs starts with a summary: the thread hands all of it on
	msgs = append(msgs, agentMessage{Role: "user", Content: []agentBlock{{Type: "text", Text: text}}})
	t.scope.start(msgs)
	for turn := 1; turn <= inf.MaxTurns; turn++ {
		t.setTurn(turn)
		if acked == len(msgs) {
			// Nothing after what it acknowledged (a tool_call turn without a call): drivers
			// refuse an empty list, so it gets the whole conversation instead.
			cont, acked = "", 0
		}
		req, _ := json.Marshal(driverRequest{Model: inf.Model, MaxTokens: inf.MaxTokens, System: system, Messages: msgs[acked:], Tools: tools,
			ContinuationID: cont})
		start := time.Now()
		resp, streamed, err := s.callDriver(ctx, t, driver, string(req))
		ev := Inference{Turn: turn, Tools: []string{}, DurationMS: time.Since(start).Milliseconds()}
		if err != nil {
			ev.StopReason, ev.Error = "error", err.Error()
			s.stream.Emit(EventInference, t.evt, ev, nil)
			return "", StateFailed, err
		}
		ev.InputTokens, ev.OutputTokens, ev.StopReason = resp.Usage.InputTokens, resp.Usage.OutputTokens, resp.StopReason
		if resp.Content == nil {
			// A driver may answer "content": null; what the host writes and sends back is [].
			resp.Content = []agentBlock{}
		}
		for _, b := range resp.Content {
			if b.Type == "tool_call" {
				ev.Tools = append(ev.Tools, b.Name)
			}
		}
		evt, _ := s.stream.Emit(EventInference, t.evt, ev, map[string]string{"output": string(mustJSON(resp.Content))})
		t.setTurnEvt(evt)
		// A driver that streamed its text (murmur:text/chunks) has sent it already.
		if answer := finalText(resp.Content); answer != "" && !streamed {
			s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: answer}, nil)
		}
		msgs = append(msgs, agentMessage{Role: "assistant", Content: resp.Content})
		t.scope.enter(msgs[len(msgs)-1])
		// A driver that answers without one has acknowledged nothing: it gets the whole
		// conversation next turn.
		cont, acked = resp.ContinuationID, 0
		if cont != "" {
			acked = len(msgs)
		}
		switch resp.StopReason {
		case "end_turn", "max_tokens":
			if cont == "" {
				by = ""
			}
			kept := msgs[first:]
			if compacted {
				// The summary stands for the earlier turns and the task's start: the next task
				// starts from the compacted conversation, which is what a continuation
				// issued since acknowledges.
				kept = msgs
			}
			t.thread = Thread{Messages: mustJSON(kept), Continuation: cont, ContinuationBy: by, Compacted: compacted}
			return finalText(resp.Content), StateCompleted, nil
		case "tool_call":
			for _, b := range resp.Content {
				if b.Type != "tool_call" {
					continue
				}
				out, isErr := s.dispatchGated(ctx, t, b) // hooks may refuse it first (hooks.go)
				msgs = append(msgs, agentMessage{Role: "tool", ToolCallID: b.ID, IsError: isErr, Content: []agentBlock{{Type: "text", Text: out}}})
				t.scope.enter(msgs[len(msgs)-1])
			}
			c, err := s.compact(ctx, t, driver, msgs, first, resp.Usage.InputTokens)
			if err != nil {
				return "", StateFailed, err
			}
			if c != nil {
				t.scope.enter(c.msgs[0]) // the summary enters the record; nothing leaves it
				// A replaced conversation is not the one the driver's continuation holds.
				msgs, first, cont, acked, compacted = c.msgs, c.first, "", 0, true
			}
		case "error":
			return "", StateFailed, fmt.Errorf("driver %s: %s", inf.Driver.Artifact, resp.Error)
		default:
			return "", StateFailed, fmt.Errorf("driver %s answered stop_reason %q", inf.Driver.Artifact, resp.StopReason)
		}
	}
	return "", StateMaxTurns, fmt.Errorf("the task used all %d turns (inference.max_turns) without a final answer", inf.MaxTurns)
}

// callDriver runs one driver turn and parses its answer; streamed reports whether the
// driver streamed text chunks (murmur:text/chunks) to the task's subscribers.
func (s *session) callDriver(ctx context.Context, t *task, driver *wasm.Module, req string) (resp *driverResponse, streamed bool, err error) {
	return s.callDriverWith(ctx, driver, req, s.chunks(t))
}

// callDriverWith is callDriver with the text the driver streams handed to emit, which a
// call whose text is not the task's answer (a compaction's summary) discards.
func (s *session) callDriverWith(ctx context.Context, driver *wasm.Module, req string, emit func(thinking bool, text string)) (resp *driverResponse, streamed bool, err error) {
	g := s.grants(driver.Artifact, manifest.RoleDriver)
	g.Env = append(append([]string(nil), g.Env...), s.driverEnv...)
	chunk := func(thinking bool, text string) {
		streamed = streamed || !thinking
		emit(thinking, text)
	}
	out, err := murmur.CallTool(ctx, s.rt.engine, driver, g, &murmur.Imports{Who: driver.Artifact, HTTP: s.driverHTTP, Chunk: chunk}, abi.ToolInput{Data: &req})
	if err != nil {
		return nil, streamed, err
	}
	if out.Status != abi.StatusPassed {
		return nil, streamed, fmt.Errorf("driver %s answered %s: %s", driver.Artifact, out.Status, value(out.Summary))
	}
	resp = &driverResponse{}
	if err := json.Unmarshal([]byte(value(out.Data)), resp); err != nil {
		return nil, streamed, fmt.Errorf("driver %s returned data that is not the driver JSON (%v): %q", driver.Artifact, err, clip.String(value(out.Data), 200))
	}
	if resp.ContinuationID == "" {
		// Upstream Murmur's drivers return it as tool-result metadata.
		for _, kv := range out.Metadata {
			if kv[0] == "continuation_id" {
				resp.ContinuationID = kv[1]
			}
		}
	}
	return resp, streamed, nil
}

// historyMessages is the conversation of a threaded context's earlier tasks, oldest
// first: each turn's kept messages, or, for a turn kept without them, its user text and
// answer as two text messages. It starts at the newest turn whose task compacted: its
// messages are the whole conversation up to its end, the turns before summarised in it.
func historyMessages(history []Turn) []agentMessage {
	start := 0
	for i := len(history) - 1; i >= 0; i-- {
		if history[i].Compacted && len(history[i].Messages) > 0 {
			start = i
			break
		}
	}
	var msgs []agentMessage
	for _, h := range history[start:] {
		var kept []agentMessage
		if len(h.Messages) > 0 && json.Unmarshal(h.Messages, &kept) == nil && len(kept) > 0 {
			msgs = append(msgs, kept...)
			continue
		}
		msgs = append(msgs, agentMessage{Role: "user", Content: []agentBlock{{Type: "text", Text: h.User}}},
			agentMessage{Role: "assistant", Content: []agentBlock{{Type: "text", Text: h.Agent}}})
	}
	return msgs
}

// driverKey names the capsule's driver as it is staged: the issuer of its continuations.
func (s *session) driverKey() string {
	d := s.staged.Manifest.Inference.Driver.Artifact
	for _, a := range s.staged.Artifacts {
		if a.Name == d {
			return a.Name + "@" + a.Version
		}
	}
	return d
}

// Tool kinds, as a tool_call event's kind names them (docs/reference/trace.md "tool_call").
const (
	KindNative  = "native"
	KindShell   = "shell"
	KindSkill   = "skill"
	KindWasm    = "wasm"
	KindUnknown = "unknown"
)

// kindRank is the dispatch precedence: a lower rank wins when one name is declared as
// several kinds (docs/reference/driver-protocol.md "Dispatch").
var kindRank = map[string]int{KindNative: 0, KindShell: 1, KindSkill: 2, KindWasm: 3}

// toolKind says which of the capsule's tools a call named name runs: the first match
// in the order native, shell, skill, wasm; KindUnknown when the name is none of them.
func (s *session) toolKind(name string) string {
	if s.sub != nil {
		if _, ok := s.sub.natives[name]; ok {
			return KindNative
		}
	}
	if slices.Contains(s.staged.Manifest.Capabilities.Shell.Allow, name) {
		return KindShell
	}
	for _, a := range s.staged.Artifacts {
		if a.Name == name && a.Role == manifest.RoleSkill {
			return KindSkill
		}
	}
	if mod := s.staged.Modules[name]; mod != nil && mod.Role == string(manifest.RoleTool) {
		return KindWasm
	}
	return KindUnknown
}

// dispatch runs one tool call by its kind (toolKind), and returns the text the model
// sees and whether it is an error. Every call, an unknown name included, is counted and
// written as a tool_call event.
func (s *session) dispatch(ctx context.Context, t *task, call agentBlock) (string, bool) {
	switch s.toolKind(call.Name) {
	case KindNative:
		return s.runSubprocess(ctx, t, call, s.sub.natives[call.Name])
	case KindShell:
		return s.runSubprocess(ctx, t, call, "")
	case KindSkill:
		return s.runSkill(t, call)
	case KindWasm:
		input := string(call.Input)
		if input == "" {
			input = "{}"
		}
		out, err := s.invokeAt(ctx, t, call.Name, abi.ToolInput{Data: &input})
		if err != nil {
			return err.Error(), true
		}
		text := value(out.Data)
		if text == "" {
			text = value(out.Summary)
		}
		return text, out.Status != abi.StatusPassed
	}
	names := make([]string, 0, 8)
	for _, tool := range s.offeredTools() {
		names = append(names, tool.Name)
	}
	if len(names) == 0 {
		names = append(names, "none")
	}
	s.unknownCall(t, call.Name, string(call.Input))
	return fmt.Sprintf("no tool named %q is declared in the manifest (declared: %s)", call.Name, strings.Join(names, ", ")), true
}

// runSkill answers a call of a skill with its text.
func (s *session) runSkill(t *task, call agentBlock) (string, bool) {
	for _, a := range s.staged.Artifacts {
		if a.Name != call.Name || a.Role != manifest.RoleSkill {
			continue
		}
		text, err := skillText(a)
		s.toolCalls.Add(1)
		rec := ToolCall{Turn: t.turnNo(), ToolName: call.Name, Kind: KindSkill, OutputBytes: len(text), Status: "passed"}
		if err != nil {
			rec.Status = "error"
		}
		s.stream.Emit(EventToolCall, t.parent(), rec, map[string]string{"output": text})
		if err != nil {
			return "skill " + call.Name + ": " + err.Error(), true
		}
		return text, false
	}
	return "skill " + call.Name + " is not staged", true // toolKind found it: never reached
}

// offeredTools lists what the model may call, sorted by name
// (docs/reference/driver-protocol.md "Tools offered"). A name declared as several kinds
// is offered once, as the kind dispatch runs.
func (s *session) offeredTools() []agentTool {
	type offer struct {
		tool agentTool
		kind string
	}
	best := map[string]offer{}
	add := func(t agentTool, kind string) {
		if o, ok := best[t.Name]; !ok || kindRank[kind] < kindRank[o.kind] {
			best[t.Name] = offer{t, kind}
		}
	}
	emptyObject := json.RawMessage(`{"type":"object","properties":{}}`)
	for _, st := range s.staged.Tools() {
		t := agentTool{Name: st.Name, Description: st.Description, Parameters: emptyObject}
		if st.InputSchema != nil {
			t.Parameters = st.InputSchema
		}
		kind := KindWasm
		if st.Role == manifest.RoleSkill {
			kind = KindSkill
			if t.Description == "" {
				t.Description = "Returns the skill's text: " + st.Name
			}
		} else if s.sub != nil {
			if _, ok := s.sub.natives[st.Name]; ok {
				kind = KindNative
			}
		}
		add(t, kind)
	}
	for _, b := range s.staged.Manifest.Capabilities.Shell.Allow {
		t := agentTool{Name: b, Description: "Runs " + b + " in the workdir",
			Parameters: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}
		// An on-stage hook's tool manifest describes the binary instead (write-manifests).
		if st, ok := s.staged.ShellTools[b]; ok {
			t.Description = cmp.Or(st.Description, t.Description)
			if st.InputSchema != nil {
				t.Parameters = st.InputSchema
			}
		}
		add(t, KindShell)
	}
	tools := make([]agentTool, 0, len(best))
	for _, o := range best {
		tools = append(tools, o.tool)
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools
}

// systemPrompt reads inference.system_prompt, _file or _artifact.
func (s *session) systemPrompt() (string, error) {
	m := s.staged.Manifest
	inf := m.Inference
	switch {
	case inf.SystemPrompt != "":
		return inf.SystemPrompt, nil
	case inf.SystemPromptFile != "":
		data, err := os.ReadFile(filepath.Join(m.Dir, inf.SystemPromptFile))
		if err != nil {
			return "", fmt.Errorf("system_prompt_file: %w", err)
		}
		return string(data), nil
	case inf.SystemPromptArtifact != "":
		for _, a := range s.staged.Artifacts {
			if a.Name == inf.SystemPromptArtifact {
				return skillText(a)
			}
		}
	}
	return "", nil
}

// skillText is a skill's text, from its local source or its archive's skill.md.
func skillText(a registry.Resolved) (string, error) {
	if a.Text != nil {
		return string(a.Text), nil
	}
	text, err := a.Archive.ReadFile(a.Archive.Payload().Path)
	return string(text), err
}

// driverSetup prepares what the driver alone gets: the MURMUR_INFERENCE_* environment and
// an HTTP host that may reach its gateway endpoint, adding the key to those requests.
func (s *session) driverSetup() error {
	m := s.staged.Manifest
	inf := m.Inference
	d := m.Artifact(inf.Driver.Artifact)
	endpoint, key := "", ""
	if d != nil && d.Gateway != nil {
		endpoint, key = strings.TrimSuffix(d.Gateway.Endpoint, "/"), d.Gateway.APIKey
	}
	cfg := "{}"
	if inf.Driver.Config != nil {
		cfg = string(mustJSON(inf.Driver.Config))
	}
	s.driverEnv = []string{"MURMUR_INFERENCE_TRANSPORT=" + inf.Transport, "MURMUR_INFERENCE_MODEL=" + inf.Model,
		"MURMUR_INFERENCE_ENDPOINT=" + endpoint, "MURMUR_INFERENCE_DRIVER=" + inf.Driver.Artifact, "MURMUR_INFERENCE_DRIVER_CONFIG=" + cfg}
	rules := append(netpolicy.Rules(nil), m.Capabilities.NetworkRules...)
	var creds []murmur.Credential
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" {
			return fmt.Errorf("driver %s: gateway endpoint %q is not a URL", inf.Driver.Artifact, endpoint)
		}
		r, err := netpolicy.ParseRule(u.Scheme + "://" + u.Host)
		if err != nil {
			return fmt.Errorf("driver %s: gateway endpoint %q: %w", inf.Driver.Artifact, endpoint, err)
		}
		rules = append(rules, r)
		if key != "" {
			creds = append(creds, murmur.Credential{Endpoint: endpoint, Headers: s.upstreamAuth(inf.Driver.Artifact).Headers(key)})
		}
	}
	s.driverHTTP = &murmur.Outgoing{Capsule: m.Name, Rules: rules, Metrics: s.rt.engine.Metrics(), Credentials: creds, OnDeny: s.http.OnDeny, Sleep: s.http.Sleep}
	s.driverHTTP.Init()
	return nil
}

// upstreamAuth is how the driver's provider expects the key: the driver artifact's own
// upstream_auth, else a bearer token.
func (s *session) upstreamAuth(driver string) manifest.UpstreamAuth {
	for _, a := range s.staged.Artifacts {
		if a.Name == driver && a.Archive != nil {
			if u := a.Archive.Manifest().UpstreamAuth; u != nil {
				return *u
			}
		}
	}
	return manifest.DefaultUpstreamAuth
}

func finalText(content []agentBlock) string {
	var parts []string
	for _, b := range content {
		if b.Type == "text" && b.Text != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
