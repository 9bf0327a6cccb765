package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm"

	"github.com/capsulegate/capsulegate/manifest"
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
	ctx = s.traced(ctx, t)
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
	var tools []agentTool
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
		// What the capsule pulled is read once a turn: a tool pulled or removed during
		// the last turn is offered, or not, from this one.
		s.turnPulled = s.staged.artifacts.pulled(ctx)
		tools = s.offeredTools()
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
		// A decision point: a sink may stop the task before another turn (the budget
		// sink, once the principal's tokens are spent).
		evt, verdict, _ := s.stream.Ask(EventInference, t.evt, ev, map[string]string{"output": string(mustJSON(resp.Content))})
		t.setTurnEvt(evt)
		if verdict.Denied && resp.StopReason == "tool_call" {
			return "", StateFailed, errors.New(verdict.Reason)
		}
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
		} else if s.shell != nil {
			if _, ok := s.shell.natives[st.Name]; ok {
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
	if s.staged.artifacts.granted() {
		for _, t := range managerTools {
			add(t, KindManager)
		}
	}
	if s.offersPeers() {
		add(s.peerTool(), KindPeer)
	}
	tools := make([]agentTool, 0, len(best))
	for _, o := range best {
		tools = append(tools, o.tool)
	}
	// What the capsule pulled while it ran (read at the turn's start), under names
	// nothing above took, marked.
	for name, pulled := range s.turnPulled {
		if _, taken := best[name]; taken {
			continue
		}
		t := agentTool{Name: name, Description: runtimeMark(name, pulled.pin.Version), Parameters: emptyObject}
		am := pulled.arc.Manifest()
		if am.Description != "" {
			t.Description += " " + am.Description
		}
		if am.InputSchema != nil {
			t.Parameters = mustJSON(am.InputSchema)
		}
		tools = append(tools, t)
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

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}
