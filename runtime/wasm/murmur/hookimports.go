package murmur

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// HookImports serves what a hook may import (world murmur:runtime@0.4.0 hook,
// docs/reference/guest-abi.md "The hook world") during one hook call. A nil part answers
// as Murmur's WIT says an ungranted one does: the hook still links and runs.
type HookImports struct {
	// Inference runs one completion through the capsule's own driver; nil answers err.
	Inference func(ctx context.Context, req abi.InferenceRequest) (abi.InferenceResponse, error)
	// TaskIO is the task in scope at this call; nil answers not-granted.
	TaskIO *TaskScope
	// Conversation returns the conversation record of the task in scope, oldest first;
	// nil answers err("not-granted").
	Conversation func(ctx context.Context) ([]abi.Message, error)
}

// TaskScope is what murmur:task-io/read reads: the task in scope, if any, and its
// result text once the loop produced one.
type TaskScope struct {
	InScope bool
	// AsGiven is the text the attempt's loop was handed, Original the task's text before
	// any reopen feedback was appended.
	AsGiven, Original string
	// Output is the attempt's result text; nil until it has one.
	Output *string
}

// EstimateTokens is the host's token count of text for murmur:runtime/tokens: one token
// per 4 bytes, rounded up — the estimate the agent loop uses where a provider reports
// no count (docs/reference/guest-abi.md "The hook world").
func EstimateTokens(text string) uint64 { return (uint64(len(text)) + 3) / 4 }

// MaxPageMessages bounds a murmur:conversation/read page; a smaller limit is clamped up
// to 1, so a paging loop always makes progress.
const MaxPageMessages = 100

func hookOf(h *Imports) *HookImports {
	if h.Hook == nil {
		return &HookImports{}
	}
	return h.Hook
}

func ioErr(e abi.IOError) []any { return []any{abi.Result{Err: true, Value: uint32(e)}} }

// taskText is the text a task-io read names: the input in form, or the output.
func taskText(h *HookImports, output bool, form uint32) (string, []any) {
	s := h.TaskIO
	switch {
	case s == nil:
		return "", ioErr(abi.IONotGranted)
	case !s.InScope:
		return "", ioErr(abi.IONoTask)
	case output && s.Output == nil:
		return "", ioErr(abi.IONoOutput)
	case output:
		return *s.Output, nil
	case form == 1:
		return s.Original, nil
	}
	return s.AsGiven, nil
}

// window is the longest prefix of text[offset:] within max bytes that ends on a UTF-8
// character boundary; an offset past the end or inside a character is out-of-range.
func window(text string, offset, max uint64) []any {
	if offset > uint64(len(text)) || offset < uint64(len(text)) && !utf8.RuneStart(text[offset]) {
		return ioErr(abi.IOOutOfRange)
	}
	rest := text[offset:]
	if max < uint64(len(rest)) {
		end := int(max)
		for end > 0 && !utf8.RuneStart(rest[end]) {
			end--
		}
		rest = rest[:end]
	}
	return []any{abi.Result{Value: rest}}
}

func importInputLen(ctx context.Context, h *Imports, a []any) ([]any, error) {
	s, fail := taskText(hookOf(h), false, a[0].(uint32))
	if fail != nil {
		return fail, nil
	}
	return []any{abi.Result{Value: uint64(len(s))}}, nil
}

func importReadInput(ctx context.Context, h *Imports, a []any) ([]any, error) {
	s, fail := taskText(hookOf(h), false, a[0].(uint32))
	if fail != nil {
		return fail, nil
	}
	return window(s, a[1].(uint64), a[2].(uint64)), nil
}

func importOutputLen(ctx context.Context, h *Imports, _ []any) ([]any, error) {
	s, fail := taskText(hookOf(h), true, 0)
	if fail != nil {
		return fail, nil
	}
	return []any{abi.Result{Value: uint64(len(s))}}, nil
}

func importReadOutput(ctx context.Context, h *Imports, a []any) ([]any, error) {
	s, fail := taskText(hookOf(h), true, 0)
	if fail != nil {
		return fail, nil
	}
	return window(s, a[0].(uint64), a[1].(uint64)), nil
}

func importCountTokens(_ context.Context, _ *Imports, a []any) ([]any, error) {
	return []any{EstimateTokens(a[0].(string))}, nil
}

func importRunInference(ctx context.Context, h *Imports, a []any) ([]any, error) {
	req, err := abi.ToInferenceRequest(a[0])
	if err != nil {
		return nil, err
	}
	hk := hookOf(h)
	if hk.Inference == nil {
		return []any{abi.Result{Err: true, Value: "inference: this hook has no inference driver to call"}}, nil
	}
	resp, err := hk.Inference(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err // the hook's own deadline: it stops here
		}
		return []any{abi.Result{Err: true, Value: err.Error()}}, nil
	}
	return []any{abi.Result{Value: resp.Value()}}, nil
}

// errInvalidCursor answers a read-messages cursor the host did not hand out.
var errInvalidCursor = errors.New("invalid-cursor")

// importReadMessages pages the conversation record newest first. A cursor is "m" and the
// count of messages, from the oldest, not yet read: pages are anchored at the oldest
// message, so what is appended while a hook pages is never repeated or skipped.
func importReadMessages(ctx context.Context, h *Imports, a []any) ([]any, error) {
	fail := func(msg string) ([]any, error) { return []any{abi.Result{Err: true, Value: msg}}, nil }
	hk := hookOf(h)
	if hk.Conversation == nil {
		return fail("not-granted")
	}
	msgs, err := hk.Conversation(ctx)
	if err != nil {
		return fail("unavailable: " + err.Error())
	}
	end := len(msgs)
	if c, ok := a[0].(abi.Option); ok && c.Some {
		n, err := parseCursor(c.Value.(string), len(msgs))
		if err != nil {
			return fail(err.Error())
		}
		end = n
	}
	limit := int(min(max(a[1].(uint32), 1), MaxPageMessages))
	start := max(end-limit, 0)
	page := abi.MessagePage{Total: uint32(len(msgs))}
	for i := end - 1; i >= start; i-- {
		page.Messages = append(page.Messages, msgs[i])
	}
	if page.Messages == nil {
		page.Messages = []abi.Message{}
	}
	if start > 0 {
		next := "m" + strconv.Itoa(start)
		page.NextCursor = &next
	}
	return []any{abi.Result{Value: page.Value()}}, nil
}

func parseCursor(c string, total int) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(c, "m"))
	if !strings.HasPrefix(c, "m") || err != nil || n <= 0 || n > total {
		return 0, errInvalidCursor
	}
	return n, nil
}
