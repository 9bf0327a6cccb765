package a2a

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/internal/jsontext"
)

// dialect is the A2A protocol version a request speaks, chosen by its A2A-Version
// header: the two differ in method names, enum spellings and how stream events and
// parts are told apart (kind fields in 0.3, wrapper members in 1.0).
type dialect uint8

const (
	v03 dialect = iota
	v10
)

func (d dialect) String() string {
	if d == v10 {
		return "1.0"
	}
	return "0.3"
}

// parseVersion maps the A2A-Version header to a dialect: empty or 0.3[.x] is 0.3,
// 1.0[.x] is 1.0 (patch versions never matter, A2A §3.6).
func parseVersion(h string) (dialect, bool) {
	h = strings.TrimSpace(h)
	switch {
	case h == "" || h == "0.3" || strings.HasPrefix(h, "0.3."):
		return v03, true
	case h == "1.0" || strings.HasPrefix(h, "1.0."):
		return v10, true
	}
	return 0, false
}

// wireState renders a state: "input-required" in 0.3, "TASK_STATE_INPUT_REQUIRED" in 1.0.
func (d dialect) wireState(s string) string {
	if d == v10 {
		return "TASK_STATE_" + strings.ToUpper(strings.ReplaceAll(s, "-", "_"))
	}
	return s
}

// parseState reads a state in either spelling; "" for unknown or unspecified.
func parseState(s string) string {
	s = strings.TrimPrefix(s, "TASK_STATE_")
	s = strings.ToLower(strings.ReplaceAll(s, "_", "-"))
	switch s {
	case stateSubmitted, stateWorking, stateInputRequired, stateCompleted, stateFailed, stateCanceled, stateRejected:
		return s
	}
	return ""
}

func (d dialect) wireRole(r string) string {
	if d == v10 {
		return "ROLE_" + strings.ToUpper(r)
	}
	return r
}

// Wire shapes. Kind fields are set in 0.3 and left empty (omitted) in 1.0.

type wirePart struct {
	Kind      string          `json:"kind,omitempty"`
	Text      *string         `json:"text,omitempty"`
	File      *wireFile03     `json:"file,omitempty"` // 0.3 FilePart
	Raw       *string         `json:"raw,omitempty"`  // 1.0: base64
	URL       string          `json:"url,omitempty"`  // 1.0
	Data      json.RawMessage `json:"data,omitempty"`
	Filename  string          `json:"filename,omitempty"`  // 1.0
	MediaType string          `json:"mediaType,omitempty"` // 1.0
	Metadata  map[string]any  `json:"metadata,omitempty"`
}

// MarshalJSON writes a text part — nearly every part — by hand; any other as its fields.
func (p wirePart) MarshalJSON() ([]byte, error) {
	if p.Text == nil || p.File != nil || p.Raw != nil || p.URL != "" || p.Data != nil || p.Filename != "" || p.MediaType != "" || p.Metadata != nil {
		type fields wirePart
		return json.Marshal(fields(p))
	}
	b := make([]byte, 0, len(*p.Text)+24)
	b = append(b, '{')
	if p.Kind != "" {
		b = append(b, `"kind":`...)
		b = jsontext.AppendString(b, p.Kind)
		b = append(b, ',')
	}
	b = append(b, `"text":`...)
	b = jsontext.AppendString(b, *p.Text)
	return append(b, '}'), nil
}

// wireFile03 is A2A 0.3's FileWithBytes or FileWithUri.
type wireFile03 struct {
	Bytes    *string `json:"bytes,omitempty"` // base64
	URI      string  `json:"uri,omitempty"`
	Name     string  `json:"name,omitempty"`
	MimeType string  `json:"mimeType,omitempty"`
}

type wireMessage struct {
	Kind      string     `json:"kind,omitempty"`
	MessageID string     `json:"messageId"`
	ContextID string     `json:"contextId,omitempty"`
	TaskID    string     `json:"taskId,omitempty"`
	Role      string     `json:"role"`
	Parts     []wirePart `json:"parts"`
}

type wireStatus struct {
	State     string       `json:"state"`
	Message   *wireMessage `json:"message,omitempty"`
	Timestamp string       `json:"timestamp,omitempty"`
}

type wireArtifact struct {
	ArtifactID  string     `json:"artifactId"`
	Name        string     `json:"name,omitempty"`
	Description string     `json:"description,omitempty"`
	Parts       []wirePart `json:"parts"`
}

type wireTask struct {
	Kind      string         `json:"kind,omitempty"`
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    wireStatus     `json:"status"`
	Artifacts []wireArtifact `json:"artifacts,omitempty"`
	History   []wireMessage  `json:"history,omitempty"`
	// Metadata are the finished task's extension members (Outcome.Metadata).
	Metadata map[string]json.RawMessage `json:"metadata,omitempty"`
}

type wireStatusUpdate struct {
	Kind      string         `json:"kind,omitempty"`
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    wireStatus     `json:"status"`
	Final     *bool          `json:"final,omitempty"` // 0.3 only; 1.0 ends the stream instead
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type wireArtifactUpdate struct {
	Kind      string       `json:"kind,omitempty"`
	TaskID    string       `json:"taskId"`
	ContextID string       `json:"contextId"`
	Artifact  wireArtifact `json:"artifact"`
	Append    bool         `json:"append,omitempty"`
	LastChunk bool         `json:"lastChunk,omitempty"`
}

// wireStream is the 1.0 StreamResponse: exactly one member set.
type wireStream struct {
	Message        *wireMessage        `json:"message,omitempty"`
	Task           *wireTask           `json:"task,omitempty"`
	StatusUpdate   *wireStatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *wireArtifactUpdate `json:"artifactUpdate,omitempty"`
}

// timestamp is ISO 8601 UTC with milliseconds, as A2A 1.0 asks (and 0.3 accepts).
func timestamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func (d dialect) kind(k string) string {
	if d == v10 {
		return ""
	}
	return k
}

func (d dialect) parts(text string) []wirePart {
	return []wirePart{{Kind: d.kind("text"), Text: &text}}
}

// partsOf renders parts; text stands for them when there are none.
func (d dialect) partsOf(parts []Part, text string) []wirePart {
	if parts == nil {
		return d.parts(text)
	}
	out := make([]wirePart, len(parts))
	for i, p := range parts {
		out[i] = d.part(p)
	}
	return out
}

// part renders one part: 0.3's kinds, or 1.0's members.
func (d dialect) part(p Part) wirePart {
	w := wirePart{Kind: d.kind(p.Kind)}
	switch p.Kind {
	case KindText:
		text := p.Text
		w.Text = &text
	case KindData:
		w.Data = p.Data
		if len(w.Data) == 0 {
			w.Data = json.RawMessage("null")
		}
	case KindFile:
		var b64 *string
		if p.URL == "" {
			s := base64.StdEncoding.EncodeToString(p.Bytes)
			b64 = &s
		}
		if d == v03 {
			w.File = &wireFile03{Bytes: b64, URI: p.URL, Name: p.Name, MimeType: p.MediaType}
		} else {
			w.Raw, w.URL, w.Filename, w.MediaType = b64, p.URL, p.Name, p.MediaType
		}
	}
	return w
}

func (d dialect) message(m message) wireMessage {
	w := wireMessage{
		Kind: d.kind("message"), MessageID: m.ID, ContextID: m.ContextID, TaskID: m.TaskID,
		Role: d.wireRole(m.Role), Parts: d.partsOf(m.Parts, m.Text),
	}
	if m.Thinking {
		w.Parts[0].Metadata = map[string]any{"thinking": true}
	}
	return w
}

func (d dialect) status(s status) wireStatus {
	w := wireStatus{State: d.wireState(s.State), Timestamp: timestamp(s.Time)}
	if s.Msg != nil {
		m := d.message(*s.Msg)
		w.Message = &m
	}
	return w
}

func (d dialect) artifact(a artifact) wireArtifact {
	return wireArtifact{ArtifactID: a.ID, Name: a.Name, Description: a.Description, Parts: d.partsOf(a.Parts, a.Text)}
}

// task renders a snapshot; historyLength nil keeps all history, 0 none, n the last n.
func (d dialect) task(s *snapshot, historyLength *int, withArtifacts bool) *wireTask {
	w := &wireTask{Kind: d.kind("task"), ID: s.ID, ContextID: s.ContextID, Status: d.status(s.Status), Metadata: s.Status.Meta}
	if withArtifacts {
		for _, a := range s.Artifacts {
			w.Artifacts = append(w.Artifacts, d.artifact(a))
		}
	}
	hist := s.History
	if historyLength != nil && *historyLength < len(hist) {
		hist = hist[len(hist)-*historyLength:]
	}
	for _, m := range hist {
		w.History = append(w.History, d.message(m))
	}
	return w
}

// sendResult is the result of message/send (a Task, or a Message when the capsule
// answered with one) or SendMessage ({"task": Task} or {"message": Message}).
func (d dialect) sendResult(s *snapshot, historyLength *int, blocking bool) any {
	// A non-blocking send shows the task whenever it is answered, even one that ended
	// before the answer: what the client gets does not depend on that race.
	if blocking && s.Reply && s.Status.Msg != nil && s.Status.State == stateCompleted {
		m := d.message(*s.Status.Msg)
		m.TaskID = "" // a Message answer stands alone: the task is the gateway's bookkeeping
		if d == v10 {
			return wireStream{Message: &m}
		}
		return &m
	}
	t := d.task(s, historyLength, true)
	if d == v10 {
		return wireStream{Task: t}
	}
	return t
}

// event renders one stream event as the result of a JSON-RPC response.
func (d dialect) event(e event, taskID, contextID string) any {
	var (
		task *wireTask
		su   *wireStatusUpdate
		au   *wireArtifactUpdate
	)
	switch e.kind {
	case evTask:
		task = d.task(e.task, nil, true)
	case evStatus, evLagged:
		su = &wireStatusUpdate{Kind: d.kind("status-update"), TaskID: taskID, ContextID: contextID, Status: d.status(e.status)}
		if d == v03 {
			final := e.kind == evStatus && e.final
			su.Final = &final
		}
		if e.kind == evLagged {
			su.Metadata = map[string]any{"lagged": map[string]any{"missed": e.missed, "firstMissedId": e.seq}}
		}
		for k, v := range e.status.Meta { // a finished task's: the status that ends the stream carries them
			if su.Metadata == nil {
				su.Metadata = map[string]any{}
			}
			su.Metadata[k] = v
		}
	case evArtifact:
		au = &wireArtifactUpdate{
			Kind: d.kind("artifact-update"), TaskID: taskID, ContextID: contextID,
			Artifact: d.artifact(e.art), Append: e.append, LastChunk: e.last,
		}
	}
	if d == v10 {
		return wireStream{Task: task, StatusUpdate: su, ArtifactUpdate: au}
	}
	switch {
	case task != nil:
		return task
	case su != nil:
		return su
	}
	return au
}

// Incoming shapes: lenient about what either dialect might send.

type inPart struct {
	Kind      string          `json:"kind"` // 0.3: text, file or data
	Text      *string         `json:"text"`
	File      json.RawMessage `json:"file"`      // 0.3 FilePart
	Data      json.RawMessage `json:"data"`      // 0.3 DataPart, 1.0 data member
	Raw       json.RawMessage `json:"raw"`       // 1.0 bytes member
	URL       json.RawMessage `json:"url"`       // 1.0 url member
	MediaType string          `json:"mediaType"` // 1.0
	Filename  string          `json:"filename"`  // 1.0
}

type inMessage struct {
	MessageID string   `json:"messageId"`
	ContextID string   `json:"contextId"`
	TaskID    string   `json:"taskId"`
	Role      string   `json:"role"`
	Parts     []inPart `json:"parts"`
	// Metadata is read for W3C trace context only (traceparent, tracestate); a member of
	// another type is no trace context.
	Metadata struct {
		Traceparent, Tracestate json.RawMessage
	} `json:"metadata"`
}

type sendParams struct {
	Message       *inMessage `json:"message"`
	Configuration *struct {
		Blocking                   *bool           `json:"blocking"`          // 0.3
		ReturnImmediately          bool            `json:"returnImmediately"` // 1.0
		HistoryLength              *int            `json:"historyLength"`
		PushNotificationConfig     json.RawMessage `json:"pushNotificationConfig"`     // 0.3
		TaskPushNotificationConfig json.RawMessage `json:"taskPushNotificationConfig"` // 1.0
	} `json:"configuration"`
}

// incoming is a checked user message.
type incoming struct {
	messageID, taskID, contextID string
	parts                        []part // as decoded (parseSend)
	// text is the message's text parts joined with "\n", and payload its parts as the
	// executor gets them, both set once admitParts accepted them.
	text          string
	payload       []Part
	url           string      // the endpoint as this request reached it
	owner         string      // the principal sending it
	peer          *PeerOrigin // where it comes from, when a capsule's runtime sent it
	blocking      bool
	historyLength *int
	// pushRaw is the send's inline push config (0.3 configuration.pushNotificationConfig,
	// 1.0 configuration.taskPushNotificationConfig), read by doSend; push is it checked.
	pushRaw, pushField string
	push               *pushConfig
	// traceparent and tracestate are the message metadata's W3C trace context, which
	// parents the task (taskParent); trace is the span context the task runs under.
	traceparent, tracestate string
	trace                   trace.SpanContext
	// egress is what the route's policy narrowed the task to (nil: not narrowed); hold
	// its count among the principal's unfinished tasks (nil: not counted).
	egress *[]string
	hold   *limitHold
}

// validID accepts a client-chosen id as data the gateway keeps and logs: valid UTF-8,
// at most maxIDLen bytes, no control characters. Ids are never used as file names.
func validID(id string) bool {
	return len(id) <= maxIDLen && utf8.ValidString(id) &&
		!strings.ContainsFunc(id, func(r rune) bool { return r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 })
}

// maxIDLen bounds client-chosen ids (context and task), which end up in logs and maps.
const maxIDLen = 256

// parseSend checks the params of message/send, message/stream, SendMessage and
// SendStreamingMessage.
func (d dialect) parseSend(raw json.RawMessage) (incoming, *rpcError) {
	var p sendParams
	if err := strictUnmarshal(raw, &p); err != nil {
		return incoming{}, errInvalidParams(err.Error())
	}
	if p.Message == nil {
		return incoming{}, errInvalidParams("params.message is required")
	}
	m := p.Message
	in := incoming{messageID: m.MessageID, taskID: m.TaskID, contextID: m.ContextID, blocking: true}
	in.traceparent, in.tracestate = jsonString(m.Metadata.Traceparent), jsonString(m.Metadata.Tracestate)
	if m.MessageID == "" {
		return in, errInvalidParams("message.messageId is required")
	}
	if rerr := d.checkRole(m.Role); rerr != nil {
		return in, rerr
	}
	for _, f := range []struct{ name, id string }{{"messageId", m.MessageID}, {"taskId", m.TaskID}, {"contextId", m.ContextID}} {
		if !validID(f.id) {
			return in, errInvalidParams(fmt.Sprintf("message.%s must be at most %d printable characters of valid UTF-8", f.name, maxIDLen))
		}
	}
	if len(m.Parts) == 0 {
		return in, errInvalidParams("message.parts is empty; send at least one text part")
	}
	in.parts = make([]part, 0, len(m.Parts))
	for i, p := range m.Parts {
		pt, rerr := d.parsePart(i, p)
		if rerr != nil {
			return in, rerr
		}
		in.parts = append(in.parts, pt)
	}
	if c := p.Configuration; c != nil {
		push := c.PushNotificationConfig
		if d == v10 {
			push = c.TaskPushNotificationConfig
		}
		if isSet(push) {
			in.pushRaw = string(push)
			in.pushField = "configuration." + map[dialect]string{v03: "pushNotificationConfig", v10: "taskPushNotificationConfig"}[d]
		}
		if c.HistoryLength != nil && *c.HistoryLength < 0 {
			return in, errInvalidParams("configuration.historyLength must not be negative")
		}
		in.historyLength = c.HistoryLength
		if d == v03 && c.Blocking != nil {
			in.blocking = *c.Blocking
		}
		if d == v10 {
			in.blocking = !c.ReturnImmediately
		}
	}
	return in, nil
}

// checkRole accepts a user message: role "user" in 0.3, "ROLE_USER" in 1.0.
func (d dialect) checkRole(role string) *rpcError {
	want := d.wireRole("user")
	switch role {
	case want:
		return nil
	case "":
		return errInvalidParams(fmt.Sprintf("message.role is required; send %q", want))
	case "user", "ROLE_USER":
		return errInvalidParams(fmt.Sprintf("message.role %q is spelled %q in A2A %s", role, want, d))
	case "agent", "ROLE_AGENT":
		return errInvalidParams(fmt.Sprintf("message.role %q: only user messages can be sent to an agent", role))
	}
	return errInvalidParams(fmt.Sprintf("message.role %q is not a role; send %q", role, want))
}

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// isTextPlain accepts text/plain with any parameters (charset).
func isTextPlain(mt string) bool {
	base, _, _ := strings.Cut(mt, ";")
	return strings.EqualFold(strings.TrimSpace(base), "text/plain")
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// taskParams are the params of the task methods: get, cancel, resubscribe.
type taskParams struct {
	ID            string `json:"id"`
	HistoryLength *int   `json:"historyLength"`
}

func parseTaskParams(raw json.RawMessage) (taskParams, *rpcError) {
	var p taskParams
	if err := strictUnmarshal(raw, &p); err != nil {
		return p, errInvalidParams(err.Error())
	}
	if p.ID == "" {
		return p, errInvalidParams("params.id is required")
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return p, errInvalidParams("historyLength must not be negative")
	}
	return p, nil
}

// strictUnmarshal decodes params, which must be a JSON object.
func strictUnmarshal(raw json.RawMessage, v any) error {
	if len(raw) == 0 || raw[0] != '{' {
		return fmt.Errorf("params must be an object")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("params: %w", err)
	}
	return nil
}

// jsonString is raw as a JSON string, "" when it is absent or not a string.
func jsonString(raw json.RawMessage) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return ""
}
