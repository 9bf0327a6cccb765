// Package hook makes a Go program a murmur hook guest: importing it exports the
// functions of murmur:hook/lifecycle@0.9.0 (each with its cabi_post), and Handle installs
// the handlers they call. A function with no handler answers none.
//
//	//go:build wasip1
//	package main
//
//	import "github.com/capsulegate/capsulegate/wit/guest/hook"
//
//	func init() {
//		hook.Handle(hook.Handlers{ToolCall: func(e hook.ToolEvent) (hook.Output, error) { ... }})
//	}
//	func main() {}
package hook

// Output cases a Go hook can answer: none, the hook-output cases carrying a string, and
// replace-context, which carries messages. Write-manifests is offered in stage.go
// (WriteManifests).
const (
	CaseNone           = "none"
	CaseReplaceContext = "replace-context"
	CaseArtifact       = "artifact"
	CaseReopenTask     = "reopen-task"
	CaseDeny           = "deny"
)

// caseIndex is each offered case's discriminant in hook-output's WIT order.
var caseIndex = map[string]byte{CaseNone: 0, CaseReplaceContext: 1, CaseWriteManifests: 2, CaseArtifact: 3, CaseReopenTask: 4, CaseDeny: 6}

// Output is a hook's answer: its case and, for the cases that carry one, its string or
// its messages (replace-context).
type Output struct {
	Case     string
	Text     string
	Messages []Message
	// Manifests is write-manifests' payload (WriteManifests).
	Manifests []ToolManifest
}

// None is the answer that changes nothing; the host always honours it.
func None() Output { return Output{Case: CaseNone} }

// Deny refuses the call about to be made (on-tool-call or on-shell under commit_policy
// deny); the model is shown reason.
func Deny(reason string) Output { return Output{Case: CaseDeny, Text: reason} }

// ReopenTask reopens the task that ended (on-task-end under commit_policy reopen-task)
// with message as its next user turn.
func ReopenTask(message string) Output { return Output{Case: CaseReopenTask, Text: message} }

// ReplaceContext answers on-compaction (under commit_policy replace-context) with the
// messages that stand for the ones being compacted: usually one summary message.
func ReplaceContext(msgs ...Message) Output { return Output{Case: CaseReplaceContext, Messages: msgs} }

// SessionContext is murmur:hook's session-context.
type SessionContext struct {
	CapsuleName    string   `json:"capsule_name"`
	CapsuleVersion string   `json:"capsule_version"`
	SessionID      string   `json:"session_id"`
	Model          string   `json:"model"`
	Capabilities   []string `json:"capabilities"`
}

// TaskStartEvent is murmur:hook's task-start-event.
type TaskStartEvent struct {
	TaskID        string `json:"task_id"`
	ContextID     string `json:"context_id"`
	Source        string `json:"source"`
	InputBytes    uint64 `json:"input_bytes"`
	BudgetTokens  uint64 `json:"budget_tokens"`
	ContextWindow uint64 `json:"context_window"`
	PriorTokens   uint64 `json:"prior_tokens"`
}

// InferenceEvent is murmur:hook's inference-event.
type InferenceEvent struct {
	Turn         uint32  `json:"turn"`
	InputTokens  uint64  `json:"input_tokens"`
	OutputTokens uint64  `json:"output_tokens"`
	Decision     string  `json:"decision"`
	ToolName     *string `json:"tool_name,omitempty"`
	Prompt       *string `json:"prompt,omitempty"`
	Output       *string `json:"output,omitempty"`
	Tools        *string `json:"tools,omitempty"`
}

// ToolOutcome is murmur:hook's tool-outcome: what a call that ran produced.
type ToolOutcome struct {
	OutputBytes uint64 `json:"output_bytes"`
	DurationMS  uint64 `json:"duration_ms"`
	Status      string `json:"status"`
}

// ToolEvent is murmur:hook's tool-event: Outcome nil is the decision point, before the
// call runs; set, the call ran.
type ToolEvent struct {
	Turn       uint32       `json:"turn"`
	ToolName   string       `json:"tool_name"`
	InputBytes uint64       `json:"input_bytes"`
	Input      string       `json:"input"`
	Outcome    *ToolOutcome `json:"outcome,omitempty"`
}

// ShellOutcome is murmur:hook's shell-outcome: what a shell command that ran wrote. The
// host passes each stream's head (up to 16 KiB); the byte counts are the full sizes.
type ShellOutcome struct {
	ExitCode    int32  `json:"exit_code"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	StdoutBytes uint64 `json:"stdout_bytes"`
	StderrBytes uint64 `json:"stderr_bytes"`
	DurationMS  uint64 `json:"duration_ms"`
}

// ShellEvent is murmur:hook's shell-event: Outcome nil is the decision point, before the
// command runs (where a deny is honoured); set, it ran.
type ShellEvent struct {
	Turn    uint32        `json:"turn"`
	Binary  string        `json:"binary"`
	Command string        `json:"command"`
	Argv    []string      `json:"argv"`
	Script  *string       `json:"script,omitempty"`
	Recipe  *string       `json:"recipe,omitempty"`
	Outcome *ShellOutcome `json:"outcome,omitempty"`
}

// Message is murmur:hook's message; InsertedBy is "replace-context", "seed-context" or
// nil.
type Message struct {
	Role       string  `json:"role"`
	Content    string  `json:"content"`
	ID         *string `json:"id,omitempty"`
	SourceID   *string `json:"source_id,omitempty"`
	InsertedBy *string `json:"inserted_by,omitempty"`
}

// CompactionEvent is murmur:hook's compaction-event: the messages being compacted and
// the summarisation call's settings.
type CompactionEvent struct {
	Messages      []Message `json:"messages"`
	SessionTokens uint64    `json:"session_tokens"`
	Threshold     float64   `json:"threshold"`
	Model         *string   `json:"model,omitempty"`
	SystemPrompt  *string   `json:"system_prompt,omitempty"`
}

// TaskEndEvent is murmur:hook's task-end-event.
type TaskEndEvent struct {
	TaskID     string `json:"task_id"`
	ExitStatus string `json:"exit_status"`
}

// SessionEndEvent is murmur:hook's session-end-event.
type SessionEndEvent struct {
	TotalTurns        uint32 `json:"total_turns"`
	TotalInputTokens  uint64 `json:"total_input_tokens"`
	TotalOutputTokens uint64 `json:"total_output_tokens"`
	TotalToolCalls    uint32 `json:"total_tool_calls"`
	TotalShellCalls   uint32 `json:"total_shell_calls"`
	DurationMS        uint64 `json:"duration_ms"`
	ExitStatus        string `json:"exit_status"`
}

// Handlers are a hook's lifecycle functions; a nil one answers none. An error answers
// err(string), which the host records and never lets fail the session.
type Handlers struct {
	Stage        func(StageEvent) (Output, error)
	SessionStart func(SessionContext) (Output, error)
	TaskStart    func(TaskStartEvent) (Output, error)
	Inference    func(InferenceEvent) (Output, error)
	ToolCall     func(ToolEvent) (Output, error)
	Shell        func(ShellEvent) (Output, error)
	Compaction   func(CompactionEvent) (Output, error)
	TaskEnd      func(TaskEndEvent) (Output, error)
	SessionEnd   func(SessionEndEvent) (Output, error)
}

var handlers Handlers

// Handle installs h; call it from an init function, since the host may call a lifecycle
// function right after _initialize. A panic in a handler answers err.
func Handle(h Handlers) { handlers = h }
