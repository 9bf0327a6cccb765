package abi

import "fmt"

// Names of the P1 exports and import modules (docs/reference/guest-abi.md "Names and
// versions served").
const (
	ExportToolRun01   = "murmur:tool/run@0.1.0#run"
	ExportCapsuleRun  = "murmur:capsule/run@0.1.0#run"
	ModuleRegistry    = "murmur:tool-registry/invoke@0.1.0"
	ModuleStream      = "murmur:stream/events@0.1.0"
	ModuleTask        = "murmur:task/task@0.1.0"
	ModuleHTTP        = "capsulegate:http/outgoing@0.1.0"
	ModuleHTTP02      = "capsulegate:http/outgoing@0.2.0"
	ModuleArtifacts   = "murmur:artifact-manager/manage@0.1.0"
	ModuleMessage     = "murmur:message/send@0.1.0"
	ExportRealloc     = "cabi_realloc"
	PostReturnPrefix  = "cabi_post_"
	ExportInitialize  = "_initialize"
	ImportInvoke      = "invoke"
	ImportEmitChunk   = "emit-chunk"
	ImportEmitThink   = "emit-thinking-chunk"
	ImportCallStarted = "tool-call-started"
	ImportInputBytes  = "tool-call-input-bytes"
	ImportRequest     = "request-input"
	ImportSend        = "send"
	ImportOpen        = "open"
	ImportReadBody    = "read-body"
	ImportCloseBody   = "close-body"
	ImportAMList      = "list"
	ImportAMDescribe  = "describe"
	ImportAMSearch    = "search"
	ImportAMPull      = "pull"
	ImportAMRemove    = "remove"
	ImportAMDiagnose  = "diagnostics"
)

// RuntimeType is murmur:artifact-manager/manage's enum runtime-type.
type RuntimeType uint32

// RuntimeType cases, in WIT order.
const (
	RuntimeWasm RuntimeType = iota
	RuntimeNative
)

// PeerMessage is murmur:message/send's message.
type PeerMessage struct {
	MessageID string
	ContextID *string
	Text      string
}

// PeerTaskResult is murmur:message/send's task-result.
type PeerTaskResult struct {
	TaskID, ContextID, State string
}

// PeerMessageOf reads a message's generic value, of PeerMessageType.
func PeerMessageOf(v any) PeerMessage {
	f := v.([]any)
	m := PeerMessage{MessageID: f[0].(string), Text: f[2].(string)}
	if o := f[1].(Option); o.Some {
		s := o.Value.(string)
		m.ContextID = &s
	}
	return m
}

// Value is r's generic value, of PeerTaskResultType.
func (r PeerTaskResult) Value() any { return []any{r.TaskID, r.ContextID, r.State} }

// ArtifactSummary is murmur:artifact-manager/manage's artifact-summary.
type ArtifactSummary struct {
	Name, Version string
	Runtime       RuntimeType
}

// ArtifactInfo is murmur:artifact-manager/manage's artifact-info.
type ArtifactInfo struct {
	Name, Version, Description string
	Tags                       []string
	Runtime                    RuntimeType
	InputSchema, OutputSchema  *string
}

// RuntimeState is murmur:artifact-manager/manage's runtime-state.
type RuntimeState struct {
	CapsuleID    string
	Installed    []ArtifactSummary
	Capabilities string
}

// Status is murmur:tool/run's enum status.
type Status uint32

// Status cases, in WIT order.
const (
	StatusPassed Status = iota
	StatusFailed
	StatusError
)

func (s Status) String() string {
	switch s {
	case StatusPassed:
		return "passed"
	case StatusFailed:
		return "failed"
	case StatusError:
		return "error"
	}
	return fmt.Sprintf("status(%d)", uint32(s))
}

// ToolInput is murmur:tool/run's tool-input.
type ToolInput struct {
	Data, LogPath *string
}

// Attachment is murmur:tool/run@0.2.0's attachment.
type Attachment struct {
	MediaType, Path string
}

// ToolResult is murmur:tool/run's tool-result; Attachments exist only in 0.2.0.
type ToolResult struct {
	Status                  Status
	Summary, Data, DataPath *string
	Truncated               bool
	Metadata                [][2]string
	Attachments             []Attachment
}

// HTTPRequest is capsulegate:http/outgoing's request.
type HTTPRequest struct {
	Method, URL string
	Headers     [][2]string
	Body        []byte
}

// HTTPResponse is capsulegate:http/outgoing's response.
type HTTPResponse struct {
	Status  uint16
	Headers [][2]string
	Body    []byte
}

var optString = OptionOf(String)
var pairs = List(Tuple(String, String))

// Descriptors of the P1 WIT types.
var (
	StatusType     = Enum("passed", "failed", "error").Named("status")
	ToolInputType  = Record(F("data", optString), F("log-path", optString)).Named("tool-input")
	AttachmentType = Record(F("media-type", String), F("path", String)).Named("attachment")
	ToolResultType = Record(
		F("status", StatusType), F("summary", optString), F("data", optString),
		F("data-path", optString), F("truncated", Bool), F("metadata", pairs)).Named("tool-result")
	ToolResultType02 = Record(append(append([]Field(nil), ToolResultType.fields...),
		F("attachments", List(AttachmentType)))...).Named("tool-result@0.2.0")
	HTTPRequestType = Record(F("method", String), F("url", String),
		F("headers", pairs), F("body", List(U8))).Named("request")
	HTTPResponseType = Record(F("status", U16), F("headers", pairs), F("body", List(U8))).Named("response")
	HTTPHeadType     = Record(F("body", U32), F("status", U16), F("headers", pairs)).Named("response-head")

	RuntimeTypeType     = Enum("wasm", "native").Named("runtime-type")
	ArtifactSummaryType = Record(F("name", String), F("version", String), F("runtime", RuntimeTypeType)).Named("artifact-summary")
	ArtifactInfoType    = Record(F("name", String), F("version", String), F("description", String), F("tags", List(String)),
		F("runtime", RuntimeTypeType), F("input-schema", optString), F("output-schema", optString)).Named("artifact-info")
	RuntimeStateType = Record(F("capsule-id", String), F("installed", List(ArtifactSummaryType)), F("capabilities", String)).Named("runtime-state")

	// murmur:message/send's records.
	PeerMessageType    = Record(F("message-id", String), F("context-id", optString), F("text", String)).Named("message")
	PeerTaskResultType = Record(F("task-id", String), F("context-id", String), F("state", String)).Named("task-result")
)

// Functions of the P1 interfaces.
var (
	ToolRun01   = NewFunc([]*Type{ToolInputType}, []*Type{ToolResultType})
	ToolRun02   = NewFunc([]*Type{ToolInputType}, []*Type{ToolResultType02}) // its result adds attachments
	capsuleRun  = NewFunc(nil, nil)
	Invoke      = NewFunc([]*Type{String, ToolInputType}, []*Type{ResultOf(ToolResultType, String)})
	EmitChunk   = NewFunc([]*Type{String}, nil)
	EmitThink   = NewFunc([]*Type{String}, nil)
	CallStarted = NewFunc([]*Type{String, String}, nil)
	InputBytes  = NewFunc([]*Type{String, U64}, nil)
	RequestIn   = NewFunc([]*Type{String}, []*Type{String})
	HTTPSend    = NewFunc([]*Type{HTTPRequestType}, []*Type{ResultOf(HTTPResponseType, String)})
	HTTPOpen    = NewFunc([]*Type{HTTPRequestType}, []*Type{ResultOf(HTTPHeadType, String)})
	HTTPRead    = NewFunc([]*Type{U32, U32}, []*Type{ResultOf(List(U8), String)})
	HTTPClose   = NewFunc([]*Type{U32}, nil)

	AMList     = NewFunc(nil, []*Type{List(ArtifactSummaryType)})
	AMDescribe = NewFunc([]*Type{String}, []*Type{ResultOf(ArtifactInfoType, String)})
	AMSearch   = NewFunc([]*Type{String}, []*Type{ResultOf(List(ArtifactSummaryType), String)})
	AMPull     = NewFunc([]*Type{String, String}, []*Type{ResultOf(ArtifactSummaryType, String)})
	AMRemove   = NewFunc([]*Type{String}, []*Type{ResultOf(Bool, String)})
	AMDiagnose = NewFunc(nil, []*Type{ResultOf(RuntimeStateType, String)})

	MessageSend = NewFunc([]*Type{String, PeerMessageType}, []*Type{ResultOf(PeerTaskResultType, String)})
)

func optValue[T any](p *T) Option {
	if p == nil {
		return Option{}
	}
	return Option{Some: true, Value: *p}
}

func pairsValue(ps [][2]string) []any {
	vals := make([]any, len(ps))
	for i, p := range ps {
		vals[i] = []any{p[0], p[1]}
	}
	return vals
}

// Value is in's generic value, of ToolInputType.
func (in ToolInput) Value() any {
	return []any{optValue(in.Data), optValue(in.LogPath)}
}

// Value is r's generic value: of ToolResultType02 if v02, else of ToolResultType
// (Attachments dropped).
func (r ToolResult) Value(v02 bool) any {
	vals := []any{uint32(r.Status), optValue(r.Summary), optValue(r.Data),
		optValue(r.DataPath), r.Truncated, pairsValue(r.Metadata)}
	if v02 {
		atts := make([]any, len(r.Attachments))
		for i, a := range r.Attachments {
			atts[i] = []any{a.MediaType, a.Path}
		}
		vals = append(vals, atts)
	}
	return vals
}

// value is r's generic value, of HTTPRequestType.
func (r HTTPRequest) value() any {
	return []any{r.Method, r.URL, pairsValue(r.Headers), bytesOrEmpty(r.Body)}
}

// Value is r's generic value, of HTTPResponseType.
func (r HTTPResponse) Value() any {
	return []any{r.Status, pairsValue(r.Headers), bytesOrEmpty(r.Body)}
}

// HTTPHead is capsulegate:http/outgoing@0.2.0's response-head.
type HTTPHead struct {
	Body    uint32
	Status  uint16
	Headers [][2]string
}

// Value is r's generic value, of HTTPHeadType.
func (r HTTPHead) Value() any {
	return []any{r.Body, r.Status, pairsValue(r.Headers)}
}

func bytesOrEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ToToolInput converts a lifted value of ToolInputType.
func ToToolInput(v any) (ToolInput, error) {
	f, err := fields(ToolInputType, v)
	if err != nil {
		return ToolInput{}, err
	}
	var in ToolInput
	if in.Data, err = toOptString(f[0]); err != nil {
		return ToolInput{}, err
	}
	if in.LogPath, err = toOptString(f[1]); err != nil {
		return ToolInput{}, err
	}
	return in, nil
}

// ToToolResult converts a lifted value of ToolResultType or ToolResultType02.
func ToToolResult(v any) (ToolResult, error) {
	vals, _ := v.([]any)
	t := ToolResultType
	if len(vals) == len(ToolResultType02.fields) {
		t = ToolResultType02
	}
	f, err := fields(t, v)
	if err != nil {
		return ToolResult{}, err
	}
	var r ToolResult
	st, ok := f[0].(uint32)
	if !ok || st > uint32(StatusError) {
		return ToolResult{}, valueErr(StatusType, "got %v", f[0])
	}
	r.Status = Status(st)
	for i, dst := range []**string{&r.Summary, &r.Data, &r.DataPath} {
		if *dst, err = toOptString(f[i+1]); err != nil {
			return ToolResult{}, err
		}
	}
	if r.Truncated, ok = f[4].(bool); !ok {
		return ToolResult{}, valueErr(Bool, "got %T", f[4])
	}
	if r.Metadata, err = toPairs(f[5]); err != nil {
		return ToolResult{}, err
	}
	if t == ToolResultType02 {
		atts, ok := f[6].([]any)
		if !ok {
			return ToolResult{}, valueErr(List(AttachmentType), "got %T", f[6])
		}
		r.Attachments = make([]Attachment, len(atts))
		for i, a := range atts {
			af, err := fields(AttachmentType, a)
			if err != nil {
				return ToolResult{}, err
			}
			mt, ok1 := af[0].(string)
			p, ok2 := af[1].(string)
			if !ok1 || !ok2 {
				return ToolResult{}, valueErr(AttachmentType, "got %v", a)
			}
			r.Attachments[i] = Attachment{MediaType: mt, Path: p}
		}
	}
	return r, nil
}

// ToHTTPRequest converts a lifted value of HTTPRequestType.
func ToHTTPRequest(v any) (HTTPRequest, error) {
	f, err := fields(HTTPRequestType, v)
	if err != nil {
		return HTTPRequest{}, err
	}
	m, ok1 := f[0].(string)
	u, ok2 := f[1].(string)
	body, ok3 := f[3].([]byte)
	if !ok1 || !ok2 || !ok3 {
		return HTTPRequest{}, valueErr(HTTPRequestType, "got %v", v)
	}
	h, err := toPairs(f[2])
	if err != nil {
		return HTTPRequest{}, err
	}
	return HTTPRequest{Method: m, URL: u, Headers: h, Body: body}, nil
}

// toHTTPResponse converts a lifted value of HTTPResponseType.
func toHTTPResponse(v any) (HTTPResponse, error) {
	f, err := fields(HTTPResponseType, v)
	if err != nil {
		return HTTPResponse{}, err
	}
	st, ok1 := f[0].(uint16)
	body, ok2 := f[2].([]byte)
	if !ok1 || !ok2 {
		return HTTPResponse{}, valueErr(HTTPResponseType, "got %v", v)
	}
	h, err := toPairs(f[1])
	if err != nil {
		return HTTPResponse{}, err
	}
	return HTTPResponse{Status: st, Headers: h, Body: body}, nil
}

func fields(t *Type, v any) ([]any, error) {
	vals, ok := v.([]any)
	if !ok || len(vals) != len(t.fields) {
		return nil, valueErr(t, "want []any of %d fields, got %T", len(t.fields), v)
	}
	return vals, nil
}

func toOptString(v any) (*string, error) {
	o, ok := v.(Option)
	if !ok {
		return nil, valueErr(optString, "got %T", v)
	}
	if !o.Some {
		return nil, nil
	}
	s, ok := o.Value.(string)
	if !ok {
		return nil, valueErr(optString, "got %T", o.Value)
	}
	return &s, nil
}

func toPairs(v any) ([][2]string, error) {
	vals, ok := v.([]any)
	if !ok {
		return nil, valueErr(pairs, "got %T", v)
	}
	out := make([][2]string, len(vals))
	for i, e := range vals {
		p, ok := e.([]any)
		if !ok || len(p) != 2 {
			return nil, valueErr(pairs, "element %d: got %T", i, e)
		}
		k, ok1 := p[0].(string)
		x, ok2 := p[1].(string)
		if !ok1 || !ok2 {
			return nil, valueErr(pairs, "element %d: got %v", i, p)
		}
		out[i] = [2]string{k, x}
	}
	return out, nil
}
