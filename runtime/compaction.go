package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// EventCompaction records one compaction of an agent task's conversation
// (docs/reference/trace.md "compaction").
const EventCompaction = "compaction"

// Compaction is the data of a compaction event.
type Compaction struct {
	Turn            int    `json:"turn"`
	TokensBefore    int    `json:"tokens_before"`
	TokensAfter     int    `json:"tokens_after"`
	ThresholdTokens int    `json:"threshold_tokens"`
	Summariser      string `json:"summariser"`
	MessagesBefore  int    `json:"messages_before"`
	MessagesAfter   int    `json:"messages_after"`
	SummaryInput    int    `json:"summary_input_tokens"`
	SummaryOutput   int    `json:"summary_output_tokens"`
	DurationMS      int64  `json:"duration_ms"`
	Error           string `json:"error,omitempty"`
}

// Summarisers, as a compaction event names them.
const (
	SummariserHook   = "hook"
	SummariserDriver = "driver"
)

const (
	// compactionKeepTurns is how many of the latest driver turns (an assistant message
	// and the tool results after it) a compaction keeps after the summary. The manifest
	// has no key for it; upstream Murmur leaves it to its compaction hook.
	compactionKeepTurns = 2
	// summaryPrefix opens the user message that stands for the summarised messages.
	summaryPrefix = "Summary of the conversation so far:\n\n"
	// summariseRequest opens the one user message of the driver's summarisation call,
	// before the transcript; replay cassettes match it.
	summariseRequest = "Summarise the conversation below.\n\n"
	// defaultCompactionPrompt is the summarisation call's system prompt when
	// inference.compaction.system_prompt is not written.
	defaultCompactionPrompt = "You summarise conversations between a user, an assistant and its tools. " +
		"Write a summary that lets the assistant carry on without the conversation: the user's request, " +
		"what was done and found, the decisions made, and what is left to do. Answer with the summary only."
)

// compactionInput is what a summariser is asked to summarise.
type compactionInput struct {
	Turn     int            // the turn whose input tokens reached the threshold
	Messages []agentMessage // the messages the summary replaces, oldest first
	Model    string         // inference.compaction.model, else inference.model
	System   string         // inference.compaction.system_prompt; "" when not written
	// Tokens is the input token count that reached the threshold, Threshold the policy's.
	Tokens    int
	Threshold float64
}

// summariser writes the summary that replaces in.Messages; outputTokens is its size as
// reported (0: unknown, estimated). ok false declines, so the driver summarises instead.
// The on-compaction hook fills session.compactHook with one (replace-context).
type summariser func(ctx context.Context, t *task, in compactionInput) (summary string, outputTokens int, ok bool, err error)

// compactionPolicy is when and how an agent capsule's conversation is compacted.
type compactionPolicy struct {
	budget    int     // context.max_tokens
	threshold float64 // inference.compaction.threshold
	model     string
	system    string
	dump      bool
}

// compactionPolicyOf reads m's policy; ok is false when m sets no context.max_tokens, in
// which case compaction never fires.
func compactionPolicyOf(m *manifest.Manifest) (p compactionPolicy, ok bool) {
	if m.Context == nil || m.Context.MaxTokens <= 0 || m.Inference == nil {
		return p, false
	}
	p = compactionPolicy{budget: m.Context.MaxTokens, threshold: manifest.DefaultCompactionThreshold, model: m.Inference.Model}
	if c := m.Inference.Compaction; c != nil {
		if c.Threshold > 0 {
			p.threshold = c.Threshold
		}
		if c.Model != "" {
			p.model = c.Model
		}
		p.system, p.dump = c.SystemPrompt, c.DumpSummaries
	}
	return p, true
}

// limit is the input token count at which compaction fires: threshold × budget, rounded
// up (the epsilon keeps 0.98 × 100 at 98 despite floating point).
func (p compactionPolicy) limit() int {
	return int(math.Ceil(p.threshold*float64(p.budget) - 1e-6))
}

// due says whether a turn that took inputTokens reached the threshold.
func (p compactionPolicy) due(inputTokens int) bool { return inputTokens >= p.limit() }

// compacted is a conversation after a compaction.
type compacted struct {
	msgs  []agentMessage // the summary, then the kept messages
	first int            // where the task's own messages start in msgs
}

// keepFrom is the index of the first message kept after the summary: the keep-th last
// assistant message, so a tool result is never kept without its call. It is at least 1:
// the first message (a user message) is always summarised.
func keepFrom(msgs []agentMessage, keep int) int {
	cut := len(msgs)
	for i := len(msgs) - 1; i > 0 && keep > 0; i-- {
		if msgs[i].Role == "assistant" {
			cut, keep = i, keep-1
		}
	}
	return cut
}

// replaceWithSummary builds the compacted conversation: msgs before cut replaced by one
// user message holding the summary. first is where the task's own messages started.
func replaceWithSummary(msgs []agentMessage, cut, first int, summary string) *compacted {
	c := &compacted{msgs: make([]agentMessage, 0, 1+len(msgs)-cut)}
	first = max(first, cut) // the task's own messages summarised start with the summary
	c.msgs = append(c.msgs, agentMessage{Role: "user", Content: []agentBlock{{Type: "text", Text: summaryPrefix + summary}}})
	c.msgs = append(c.msgs, msgs[cut:]...)
	c.first = first - cut + 1
	return c
}

// compact runs the compaction step after a turn that took inputTokens: when the policy
// says it is due, the messages before the latest turns are summarised (the hook, else
// the driver) and replaced. It returns nil when nothing was replaced: not due, or the
// driver's summary failed (the compaction event says why, and the task goes on
// uncompacted). An on-compaction hook that fails fails the task: the error says so.
func (s *session) compact(ctx context.Context, t *task, driver *wasm.Module, msgs []agentMessage, first, inputTokens int) (*compacted, error) {
	p, ok := compactionPolicyOf(s.staged.Manifest)
	if !ok || !p.due(inputTokens) {
		return nil, nil
	}
	start := time.Now()
	cut := keepFrom(msgs, compactionKeepTurns)
	ev := Compaction{Turn: t.turnNo(), TokensBefore: inputTokens, ThresholdTokens: p.limit(), MessagesBefore: len(msgs), MessagesAfter: len(msgs)}
	in := compactionInput{Turn: t.turnNo(), Messages: msgs[:cut], Model: p.model, System: p.system, Tokens: inputTokens, Threshold: p.threshold}
	summary, out, err := "", 0, error(nil)
	ok = false
	if s.compactHook != nil {
		summary, out, ok, err = s.compactHook(ctx, t, in)
		ev.Summariser = SummariserHook
	}
	hookErr := err
	if err == nil && !ok {
		ev.Summariser = SummariserDriver
		summary, ev.SummaryInput, out, err = s.summariseWithDriver(ctx, driver, in)
	}
	if err == nil && strings.TrimSpace(summary) == "" {
		err = errors.New("the summary is empty")
	}
	ev.SummaryOutput = out
	if err != nil {
		ev.Error, ev.DurationMS = err.Error(), time.Since(start).Milliseconds()
		s.stream.Emit(EventCompaction, t.parent(), ev, nil)
		if hookErr != nil {
			return nil, fmt.Errorf("compaction: %w", err) // upstream: a failing on-compaction hook fails the task
		}
		return nil, nil // the driver's summary failed: the task goes on uncompacted
	}
	c := replaceWithSummary(msgs, cut, first, summary)
	ev.MessagesAfter, ev.TokensAfter = len(c.msgs), estimateAfter(out, summary, msgs[cut:])
	ev.DurationMS = time.Since(start).Milliseconds()
	s.stream.Emit(EventCompaction, t.parent(), ev, map[string]string{"summary": summary})
	if p.dump {
		if err := s.dumpSummary(ev, summary); err != nil {
			// The compaction stands: the file is a record of it, not part of it.
			fmt.Fprintf(s.log("bootstrap.log"), "%s compaction: out/compaction-summaries.jsonl: %v\n", time.Now().UTC().Format(time.RFC3339), err)
		}
	}
	return c, nil
}

// estimateAfter is the compacted conversation's size in tokens: the summary's reported
// output tokens (else the host's estimate, murmur.EstimateTokens) plus the estimate of the
// kept messages' JSON. The next turn's input_tokens is the exact figure; this one is
// known at compaction time.
func estimateAfter(summaryTokens int, summary string, kept []agentMessage) int {
	if summaryTokens <= 0 {
		summaryTokens = int(murmur.EstimateTokens(summaryPrefix + summary))
	}
	if len(kept) == 0 {
		return summaryTokens
	}
	return summaryTokens + int(murmur.EstimateTokens(string(mustJSON(kept))))
}

// summariseWithDriver asks the capsule's driver for the summary: one user message with
// the transcript of in.Messages, no tools, no continuation. Its streamed text is not the
// task's, so it reaches no subscriber.
func (s *session) summariseWithDriver(ctx context.Context, driver *wasm.Module, in compactionInput) (summary string, inputTokens, outputTokens int, err error) {
	system := in.System
	if system == "" {
		system = defaultCompactionPrompt
	}
	msgs := []agentMessage{{Role: "user", Content: []agentBlock{{Type: "text", Text: summariseRequest + transcript(in.Messages)}}}}
	summary, _, resp, err := s.completeOnce(ctx, driver, in.Model, system, msgs)
	if resp != nil {
		inputTokens, outputTokens = resp.Usage.InputTokens, resp.Usage.OutputTokens
	}
	if err != nil {
		return "", inputTokens, outputTokens, fmt.Errorf("summarising: %w", err)
	}
	return summary, inputTokens, outputTokens, nil
}

// transcript writes msgs as plain text, one line per block, for the summarisation call:
// a transcript holds tool calls without the pairing rules providers put on messages.
func transcript(msgs []agentMessage) string {
	var b strings.Builder
	for _, m := range msgs {
		for _, c := range m.Content {
			switch {
			case m.Role == "tool" && m.IsError:
				fmt.Fprintf(&b, "tool error (%s): %s\n", m.ToolCallID, c.Text)
			case m.Role == "tool":
				fmt.Fprintf(&b, "tool result (%s): %s\n", m.ToolCallID, c.Text)
			case c.Type == "tool_call":
				fmt.Fprintf(&b, "%s called %s (%s): %s\n", m.Role, c.Name, c.ID, c.Input)
			default:
				fmt.Fprintf(&b, "%s: %s\n", m.Role, c.Text)
			}
		}
	}
	return b.String()
}

// summaryLine is one line of out/compaction-summaries.jsonl, as upstream Murmur writes it.
type summaryLine struct {
	Turn         int    `json:"turn"`
	TokensBefore int    `json:"tokens_before"`
	TokensAfter  int    `json:"tokens_after"`
	Summary      string `json:"summary"`
}

// dumpSummary appends a compaction's line to out/compaction-summaries.jsonl in the
// workdir, through os.Root: a guest that planted a symlink there cannot send the write
// elsewhere.
func (s *session) dumpSummary(ev Compaction, summary string) error {
	if err := s.prep.make(); err != nil {
		return err
	}
	root, err := os.OpenRoot(s.layout.Work)
	if err != nil {
		return err
	}
	defer root.Close()
	f, err := root.OpenFile("out/compaction-summaries.jsonl", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(summaryLine{Turn: ev.Turn, TokensBefore: ev.TokensBefore, TokensAfter: ev.TokensAfter, Summary: summary})
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
