package hook

import "fmt"

// InferenceRequest is murmur:runtime/inference's inference-request: nil SystemPrompt
// sends none, nil Model means the capsule's inference.model.
type InferenceRequest struct {
	Messages            []Message
	SystemPrompt, Model *string
}

// InferenceResponse is murmur:runtime/inference's inference-response; the token counts
// are the host's estimates of what was sent and received.
type InferenceResponse struct {
	Text, ModelUsed           string
	InputTokens, OutputTokens uint64
}

// InputForm chooses which rendering of the task input murmur:task-io/read reads.
type InputForm uint32

// The task-input-form cases, in WIT order.
const (
	// AsGiven is what the model has been handed as the task, reopen messages included.
	AsGiven InputForm = iota
	// Original is the task's text before any reopen message.
	Original
)

// IOError is murmur:task-io/read's io-error: why a read produced nothing.
type IOError uint32

// The io-error cases, in WIT order.
const (
	NotGranted IOError = iota
	NoTask
	NoOutput
	OutOfRange
)

func (e IOError) Error() string {
	switch e {
	case NotGranted:
		return "task-io: not-granted (the hook's entry does not set capabilities.task_io.read)"
	case NoTask:
		return "task-io: no-task (no task is in scope at this event)"
	case NoOutput:
		return "task-io: no-output (the task has produced no result text yet)"
	case OutOfRange:
		return "task-io: out-of-range"
	}
	return fmt.Sprintf("task-io: io-error %d", uint32(e))
}

// MessagePage is one page of murmur:conversation/read, newest first.
type MessagePage struct {
	Messages []Message
	// NextCursor reads the next (older) page; nil when this page reached the oldest.
	NextCursor *string
	// Total is how many messages the record held when the page was served.
	Total uint32
}
