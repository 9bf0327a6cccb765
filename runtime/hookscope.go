package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// hookScope is what a task shows the hooks' murmur:task-io/read and
// murmur:conversation/read (docs/reference/guest-abi.md "The hook world"). A task is in
// scope from the start of an attempt until the reopen loop returns for it; hooks may read
// it from their own goroutines (async hooks), hence the lock.
type hookScope struct {
	mu      sync.Mutex
	inScope bool
	// original is the task's text; asGiven what the model has been handed as the task:
	// the text, then each reopen message, blank-line separated.
	original, asGiven string
	output            *string
	// record is every message that entered the task's conversation, in order: the
	// context's earlier messages, then the task's own, then any summary. Append-only,
	// so a reader's snapshot is never written under it.
	record []agentMessage
}

// attempt puts the task in scope for one attempt, handed text; its output is cleared,
// so a hook never judges attempt N by attempt N-1's result.
func (h *hookScope) attempt(text string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.original == "" && h.asGiven == "" {
		h.original, h.asGiven = text, text
	} else {
		h.asGiven += "\n\n" + text
	}
	h.inScope, h.output = true, nil
}

// finish records the attempt's result text; only a completed attempt has one.
func (h *hookScope) finish(result string) {
	h.mu.Lock()
	h.output = &result
	h.mu.Unlock()
}

// leave takes the task out of scope.
func (h *hookScope) leave() {
	h.mu.Lock()
	h.inScope = false
	h.mu.Unlock()
}

// start records the conversation an attempt's loop begins with: whole on the first
// attempt; on a reopened one only its new user message, the rest being in the record.
func (h *hookScope) start(msgs []agentMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.record) > 0 && len(msgs) > 0 {
		msgs = msgs[len(msgs)-1:]
	}
	h.record = append(h.record, msgs...)
}

// enter appends messages to the conversation record.
func (h *hookScope) enter(msgs ...agentMessage) {
	h.mu.Lock()
	h.record = append(h.record, msgs...)
	h.mu.Unlock()
}

func (h *hookScope) taskIO() *murmur.TaskScope {
	h.mu.Lock()
	defer h.mu.Unlock()
	return &murmur.TaskScope{InScope: h.inScope, AsGiven: h.asGiven, Original: h.original, Output: h.output}
}

func (h *hookScope) conversation() []agentMessage {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.record[:len(h.record):len(h.record)]
}

// hookImports is what one call of a hook granted g may import: inference through the
// capsule's driver (agent capsules), and the task and conversation in scope when the
// hook's entry grants reading them.
func (s *session) hookImports(g *manifest.HookGrants) *murmur.HookImports {
	h := &murmur.HookImports{}
	if s.staged.Manifest.IsAgent() {
		h.Inference = s.hookInference
	}
	if g == nil {
		return h
	}
	t := s.current.Load()
	if g.TaskIO.Read {
		h.TaskIO = &murmur.TaskScope{}
		if t != nil {
			h.TaskIO = t.scope.taskIO()
		}
	}
	if g.Conversation.Read {
		h.Conversation = func(context.Context) ([]abi.Message, error) {
			if t == nil {
				return nil, nil // no task yet: no record, an empty page
			}
			return abiMessages(hookMessages(t.scope.conversation())), nil
		}
	}
	return h
}

// hookInference serves murmur:runtime/inference: one completion through the capsule's
// own driver, with the hook's messages, no tools and no continuation. The token counts
// are the host's estimates of what was sent and received, as Murmur's WIT asks.
func (s *session) hookInference(ctx context.Context, req abi.InferenceRequest) (abi.InferenceResponse, error) {
	inf := s.staged.Manifest.Inference
	driver := s.staged.Modules[inf.Driver.Artifact]
	if driver == nil {
		return abi.InferenceResponse{}, fmt.Errorf("inference: driver %s is not a wasm driver this release can run", inf.Driver.Artifact)
	}
	model, system := inf.Model, ""
	if req.Model != nil {
		// Never a silent fallback to inference.model: a refused model is the hook's error.
		model = *req.Model
	}
	if req.SystemPrompt != nil {
		system = *req.SystemPrompt
	}
	if len(req.Messages) == 0 {
		return abi.InferenceResponse{}, errors.New("inference: the request holds no messages")
	}
	msgs := make([]agentMessage, len(req.Messages))
	for i, m := range req.Messages {
		role := m.Role
		if role != "assistant" {
			// A tool result or system note the hook forwards is text the model reads.
			role = "user"
		}
		msgs[i] = agentMessage{Role: role, Content: []agentBlock{{Type: "text", Text: m.Content}}}
	}
	text, sent, resp, err := s.completeOnce(ctx, driver, model, system, msgs)
	if err != nil {
		return abi.InferenceResponse{}, fmt.Errorf("inference: %w", err)
	}
	return abi.InferenceResponse{Text: text, ModelUsed: model, InputTokens: murmur.EstimateTokens(sent),
		OutputTokens: murmur.EstimateTokens(string(mustJSON(resp.Content)))}, nil
}

// toolEnvelope is how a tool result reaches a hook as a message's content (Murmur's
// encoding, the same in compaction-event and murmur:conversation/read): a tool result
// carries more than one string.
type toolEnvelope struct {
	Marker     bool    `json:"__murmur_tool_msg__"`
	ToolCallID *string `json:"tool_call_id"`
	IsError    *bool   `json:"is_error"`
	Body       string  `json:"body"`
}

// hookMessages renders conversation messages as murmur:hook messages: text blocks as
// text, a tool call as a line naming it with its input, a tool result as the envelope.
func hookMessages(msgs []agentMessage) []HookMessage {
	out := make([]HookMessage, 0, len(msgs))
	for _, m := range msgs {
		var b strings.Builder
		for _, c := range m.Content {
			if c.Type == "tool_call" {
				if b.Len() > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "called %s (%s): %s", c.Name, c.ID, c.Input)
			} else {
				b.WriteString(c.Text)
			}
		}
		content := b.String()
		if m.Role == "tool" {
			env := toolEnvelope{Marker: true, IsError: &m.IsError, Body: content}
			if m.ToolCallID != "" {
				env.ToolCallID = &m.ToolCallID
			}
			content = string(mustJSON(env))
		}
		out = append(out, HookMessage{Role: m.Role, Content: content})
	}
	return out
}

func abiMessages(ms []HookMessage) []abi.Message {
	out := make([]abi.Message, len(ms))
	for i, m := range ms {
		out[i] = abi.Message{Role: m.Role, Content: m.Content}
	}
	return out
}
