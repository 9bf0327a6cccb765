package abi

// Names of the interfaces a hook may import: world murmur:runtime@0.4.0 hook
// (wit/murmur-runtime-0.4.0.wit, wit/murmur-task-io-0.1.0.wit,
// wit/murmur-conversation-0.2.0.wit; docs/reference/guest-abi.md "The hook world").
const (
	ModuleInference    = "murmur:runtime/inference@0.4.0"
	ModuleTokens       = "murmur:runtime/tokens@0.4.0"
	ModuleTaskIO       = "murmur:task-io/read@0.1.0"
	ModuleConversation = "murmur:conversation/read@0.2.0"

	ImportRunInference = "run-inference"
	ImportCount        = "count"
	ImportInputLen     = "input-len"
	ImportReadInput    = "read-input"
	ImportOutputLen    = "output-len"
	ImportReadOutput   = "read-output"
	ImportReadMessages = "read-messages"
)

// Types of the hook world's imports, in WIT field order.
var (
	InferenceRequestType  = Record(F("messages", List(hookMessage)), F("system-prompt", optString), F("model", optString)).Named("inference-request")
	InferenceResponseType = Record(F("text", String), F("model-used", String), F("input-tokens", U64), F("output-tokens", U64)).Named("inference-response")
	// TaskInputFormType is murmur:task-io/read's task-input-form: as-given (0) or original (1).
	TaskInputFormType = Enum("as-given", "original").Named("task-input-form")
	// IOErrorType is murmur:task-io/read's io-error; its cases are the IOError constants.
	IOErrorType     = Enum("not-granted", "no-task", "no-output", "out-of-range").Named("io-error")
	MessagePageType = Record(F("messages", List(hookMessage)), F("next-cursor", optString), F("total", U32)).Named("message-page")
)

// Functions of the hook world's imports.
var (
	RunInference = NewFunc([]*Type{InferenceRequestType}, []*Type{ResultOf(InferenceResponseType, String)})
	CountTokens  = NewFunc([]*Type{String}, []*Type{U64})
	InputLen     = NewFunc([]*Type{TaskInputFormType}, []*Type{ResultOf(U64, IOErrorType)})
	ReadInput    = NewFunc([]*Type{TaskInputFormType, U64, U64}, []*Type{ResultOf(String, IOErrorType)})
	OutputLen    = NewFunc(nil, []*Type{ResultOf(U64, IOErrorType)})
	ReadOutput   = NewFunc([]*Type{U64, U64}, []*Type{ResultOf(String, IOErrorType)})
	ReadMessages = NewFunc([]*Type{optString, U32}, []*Type{ResultOf(MessagePageType, String)})
)

// IOError is a case of murmur:task-io/read's io-error.
type IOError uint32

// io-error's cases, in WIT order.
const (
	IONotGranted IOError = iota
	IONoTask
	IONoOutput
	IOOutOfRange
)

// Message is murmur:hook/lifecycle's message as the host hands it and takes it back.
type Message struct {
	Role, Content string
	ID, SourceID  *string
}

// Value is m's generic value; inserted-by is none, as the host never marks what it hands
// out.
func (m Message) Value() any {
	return []any{m.Role, m.Content, optValue(m.ID), optValue(m.SourceID), Option{}}
}

// MessagesValue is the generic value of a list<message>.
func MessagesValue(ms []Message) []any {
	out := make([]any, len(ms))
	for i, m := range ms {
		out[i] = m.Value()
	}
	return out
}

// InferenceRequest is murmur:runtime/inference's inference-request.
type InferenceRequest struct {
	Messages            []Message
	SystemPrompt, Model *string
}

// InferenceResponse is murmur:runtime/inference's inference-response.
type InferenceResponse struct {
	Text, ModelUsed           string
	InputTokens, OutputTokens uint64
}

// Value is r's generic value, of InferenceResponseType.
func (r InferenceResponse) Value() any {
	return []any{r.Text, r.ModelUsed, r.InputTokens, r.OutputTokens}
}

// MessagePage is murmur:conversation/read's message-page.
type MessagePage struct {
	Messages   []Message
	NextCursor *string
	Total      uint32
}

// Value is p's generic value, of MessagePageType.
func (p MessagePage) Value() any {
	return []any{MessagesValue(p.Messages), optValue(p.NextCursor), p.Total}
}

// ToInferenceRequest converts a lifted value of InferenceRequestType.
func ToInferenceRequest(v any) (InferenceRequest, error) {
	f, err := fields(InferenceRequestType, v)
	if err != nil {
		return InferenceRequest{}, err
	}
	var r InferenceRequest
	if r.Messages, err = ToMessages(f[0]); err != nil {
		return r, err
	}
	if r.SystemPrompt, err = toOptString(f[1]); err != nil {
		return r, err
	}
	r.Model, err = toOptString(f[2])
	return r, err
}

// ToMessages converts a lifted value of list<message>.
func ToMessages(v any) ([]Message, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, valueErr(List(hookMessage), "got %T", v)
	}
	out := make([]Message, len(list))
	for i, m := range list {
		f, err := fields(hookMessage, m)
		if err != nil {
			return nil, err
		}
		role, ok1 := f[0].(string)
		content, ok2 := f[1].(string)
		if !ok1 || !ok2 {
			return nil, valueErr(hookMessage, "got %v", m)
		}
		out[i] = Message{Role: role, Content: content}
		if out[i].ID, err = toOptString(f[2]); err != nil {
			return nil, err
		}
		if out[i].SourceID, err = toOptString(f[3]); err != nil {
			return nil, err
		}
	}
	return out, nil
}
