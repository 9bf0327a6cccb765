package a2a

// A2A 0.3's HTTP+JSON binding speaks the protobuf JSON of 0.3's a2a.proto, not the
// JSON-RPC 0.3 shapes: messages hold "content" instead of "parts", parts carry no kind,
// roles and states are enum names (ROLE_USER, TASK_STATE_CANCELLED with two Ls), and a
// push config is named by a resource name. Rather than a third dialect threaded through
// every renderer and parser, the conversion happens here at the REST edge, in both
// directions: requests are rewritten into JSON-RPC 0.3 params before h.do, and results
// rendered in 0.3 are reshaped after — the operations stay one implementation, and the
// proto shapes live in this one file (docs/reference/a2a.md "HTTP+JSON (REST)").

import (
	"encoding/json"
	"fmt"
	"strings"
)

// proto03 reads members of a proto-JSON object under their JSON names (restParams has
// renamed proto field names, which protobuf JSON parsers also accept, to those).
type proto03 map[string]json.RawMessage

func (o proto03) get(name string) (json.RawMessage, bool) {
	v, ok := o[name]
	return v, ok && isSet(v)
}

func (o proto03) str(camel string) string {
	var s string
	if v, ok := o.get(camel); ok {
		_ = json.Unmarshal(v, &s)
	}
	return s
}

func (o proto03) obj(camel string) (proto03, *rpcError) {
	v, ok := o.get(camel)
	if !ok {
		return nil, nil
	}
	var m proto03
	if err := json.Unmarshal(v, &m); err != nil || m == nil {
		return nil, errInvalidParams(camel + " must be an object")
	}
	return m, nil
}

// send03 turns a 0.3 proto-JSON SendMessageRequest into message/send params. A message
// already in the JSON-RPC shape (with parts) passes unchanged.
func send03(body map[string]json.RawMessage) (json.RawMessage, *rpcError) {
	o := proto03(body)
	p := map[string]any{}
	msg, rerr := o.obj("message")
	if rerr != nil {
		return nil, rerr
	}
	if msg == nil {
		if msg, rerr = o.obj("request"); rerr != nil { // the proto field's own name
			return nil, rerr
		}
	}
	if msg != nil {
		if _, jsonrpc := msg["parts"]; jsonrpc {
			p["message"] = map[string]json.RawMessage(msg)
		} else {
			m, rerr := message03(msg)
			if rerr != nil {
				return nil, rerr
			}
			p["message"] = m
		}
	}
	cfg, rerr := o.obj("configuration")
	if rerr != nil {
		return nil, rerr
	}
	if cfg != nil {
		c := map[string]json.RawMessage{}
		for _, k := range []string{"acceptedOutputModes", "historyLength", "blocking"} {
			if v, ok := cfg.get(k); ok {
				c[k] = v
			}
		}
		if _, ok := c["blocking"]; !ok {
			// Proto-JSON leaves a false bool out: the JS SDK asks for a non-blocking send
			// with a configuration that lacks blocking.
			c["blocking"] = json.RawMessage("false")
		}
		for _, k := range []string{"pushNotification", "pushNotificationConfig"} {
			if v, ok := cfg.get(k); ok {
				c["pushNotificationConfig"] = v
			}
		}
		p["configuration"] = c
	}
	if v, ok := o.get("metadata"); ok {
		p["metadata"] = v
	}
	return marshalParams(p)
}

// message03 turns a proto-JSON Message into the JSON-RPC 0.3 one.
func message03(m proto03) (map[string]any, *rpcError) {
	out := map[string]any{"kind": "message", "messageId": m.str("messageId"), "role": role03(m.str("role"))}
	for _, k := range []string{"contextId", "taskId"} {
		if s := m.str(k); s != "" {
			out[k] = s
		}
	}
	var content []proto03
	if v, ok := m.get("content"); ok {
		if err := json.Unmarshal(v, &content); err != nil {
			return nil, errInvalidParams("message.content must be a list of parts")
		}
	}
	parts := []map[string]any{}
	for i, part := range content {
		switch {
		case part == nil:
			return nil, errInvalidParams(fmt.Sprintf("message.content[%d] must be an object", i))
		case isSet(part["text"]):
			var s string
			if json.Unmarshal(part["text"], &s) != nil {
				return nil, errInvalidParams(fmt.Sprintf("message.content[%d].text must be a string", i))
			}
			parts = append(parts, map[string]any{"kind": "text", "text": s})
		case isSet(part["file"]):
			file, rerr := file03(i, part["file"])
			if rerr != nil {
				return nil, rerr
			}
			parts = append(parts, map[string]any{"kind": "file", "file": file})
		case isSet(part["data"]):
			// The proto DataPart wraps its Struct: {"data": {"data": {…}}}.
			var dp proto03
			if json.Unmarshal(part["data"], &dp) != nil || dp == nil {
				return nil, errInvalidParams(fmt.Sprintf("message.content[%d].data must be a DataPart object holding data", i))
			}
			parts = append(parts, map[string]any{"kind": "data", "data": dp["data"]})
		default:
			return nil, errInvalidParams(fmt.Sprintf("message.content[%d] holds none of text, file or data", i))
		}
	}
	out["parts"] = parts
	return out, nil
}

// file03 turns a proto FilePart (fileWithUri or fileWithBytes, mimeType, name) into the
// JSON-RPC 0.3 file (uri or bytes, mimeType, name) of content part i.
func file03(i int, raw json.RawMessage) (map[string]json.RawMessage, *rpcError) {
	var fp proto03
	if json.Unmarshal(raw, &fp) != nil || fp == nil {
		return nil, errInvalidParams(fmt.Sprintf("message.content[%d].file must be a FilePart object", i))
	}
	out := map[string]json.RawMessage{}
	for from, to := range map[string]string{"fileWithUri": "uri", "fileWithBytes": "bytes", "mimeType": "mimeType", "name": "name"} {
		if v, ok := fp.get(from); ok {
			out[to] = v
		}
	}
	return out, nil
}

// role03 spells a proto role the JSON-RPC way; anything else is left for checkRole to
// refuse by name.
func role03(r string) string {
	switch r {
	case "ROLE_USER":
		return "user"
	case "ROLE_AGENT":
		return "agent"
	}
	return r
}

// pushSet03 turns a 0.3 create-config body into tasks/pushNotificationConfig/set
// params. Three shapes are in use: the JS SDK sends the bare TaskPushNotificationConfig
// {name, pushNotificationConfig}, the 0.3 spec's text wraps it in {config}, and the TCK
// sends {parent, configId, config}; the task is always the path's.
func pushSet03(taskID string, body map[string]json.RawMessage) (json.RawMessage, *rpcError) {
	o := proto03(body)
	tpc := o
	if c, rerr := o.obj("config"); rerr != nil {
		return nil, rerr
	} else if c != nil {
		tpc = c
	}
	pnc, rerr := tpc.obj("pushNotificationConfig")
	if rerr != nil {
		return nil, rerr
	}
	if pnc == nil {
		return nil, errInvalidParams("pushNotificationConfig is required")
	}
	cfg := map[string]json.RawMessage{}
	for _, k := range []string{"id", "url", "token", "authentication"} {
		if v, ok := pnc.get(k); ok {
			cfg[k] = v
		}
	}
	if _, ok := cfg["id"]; !ok {
		id := o.str("configId")
		if id == "" {
			_, id, _ = cutLast(tpc.str("name"), "/pushNotificationConfigs/")
		}
		if id != "" {
			cfg["id"], _ = json.Marshal(id)
		}
	}
	return marshalParams(map[string]any{"taskId": taskID, "pushNotificationConfig": cfg})
}

// Results in 0.3 proto-JSON.

type p03Part struct {
	Text     *string        `json:"text,omitempty"`
	File     *p03File       `json:"file,omitempty"`
	Data     *p03Data       `json:"data,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// p03File is the proto FilePart: fileWithUri or fileWithBytes.
type p03File struct {
	FileWithURI   string  `json:"fileWithUri,omitempty"`
	FileWithBytes *string `json:"fileWithBytes,omitempty"`
	MimeType      string  `json:"mimeType,omitempty"`
	Name          string  `json:"name,omitempty"`
}

// p03Data is the proto DataPart, its value wrapped in data.
type p03Data struct {
	Data json.RawMessage `json:"data"`
}

type p03Message struct {
	MessageID string    `json:"messageId"`
	ContextID string    `json:"contextId,omitempty"`
	TaskID    string    `json:"taskId,omitempty"`
	Role      string    `json:"role"`
	Content   []p03Part `json:"content"`
}

type p03Status struct {
	State     string      `json:"state"`
	Message   *p03Message `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

type p03Artifact struct {
	ArtifactID string    `json:"artifactId"`
	Name       string    `json:"name,omitempty"`
	Parts      []p03Part `json:"parts"`
}

type p03Task struct {
	ID        string                     `json:"id"`
	ContextID string                     `json:"contextId"`
	Status    p03Status                  `json:"status"`
	Artifacts []p03Artifact              `json:"artifacts,omitempty"`
	History   []p03Message               `json:"history,omitempty"`
	Metadata  map[string]json.RawMessage `json:"metadata,omitempty"`
}

type p03StatusUpdate struct {
	TaskID    string         `json:"taskId"`
	ContextID string         `json:"contextId"`
	Status    p03Status      `json:"status"`
	Final     bool           `json:"final"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

type p03ArtifactUpdate struct {
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  p03Artifact `json:"artifact"`
	Append    bool        `json:"append"`
	LastChunk bool        `json:"lastChunk"`
}

// p03Stream is 0.3's StreamResponse and SendMessageResponse: one member set.
type p03Stream struct {
	Msg            *p03Message        `json:"msg,omitempty"`
	Task           *p03Task           `json:"task,omitempty"`
	StatusUpdate   *p03StatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *p03ArtifactUpdate `json:"artifactUpdate,omitempty"`
}

type p03List struct {
	Tasks         []p03Task `json:"tasks"`
	NextPageToken string    `json:"nextPageToken"`
	PageSize      int       `json:"pageSize"`
	TotalSize     int       `json:"totalSize"`
}

func parts03(ps []wirePart) []p03Part {
	out := make([]p03Part, len(ps))
	for i, p := range ps {
		out[i] = p03Part{Text: p.Text, Metadata: p.Metadata}
		if f := p.File; f != nil {
			out[i].File = &p03File{FileWithURI: f.URI, FileWithBytes: f.Bytes, MimeType: f.MimeType, Name: f.Name}
		}
		if p.Data != nil {
			out[i].Data = &p03Data{Data: p.Data}
		}
	}
	return out
}

func protoMessage03(m wireMessage) p03Message {
	return p03Message{MessageID: m.MessageID, ContextID: m.ContextID, TaskID: m.TaskID, Role: "ROLE_" + strings.ToUpper(m.Role), Content: parts03(m.Parts)}
}

// state03 is the proto name of a 0.3 state, which spells canceled with two Ls.
func state03(s string) string {
	if s == stateCanceled {
		return "TASK_STATE_CANCELLED"
	}
	return v10.wireState(s)
}

func status03(s wireStatus) p03Status {
	out := p03Status{State: state03(s.State), Timestamp: s.Timestamp}
	if s.Message != nil {
		m := protoMessage03(*s.Message)
		out.Message = &m
	}
	return out
}

func artifact03(a wireArtifact) p03Artifact {
	return p03Artifact{ArtifactID: a.ArtifactID, Name: a.Name, Parts: parts03(a.Parts)}
}

func task03(t *wireTask) *p03Task {
	out := &p03Task{ID: t.ID, ContextID: t.ContextID, Status: status03(t.Status), Metadata: t.Metadata}
	for _, a := range t.Artifacts {
		out.Artifacts = append(out.Artifacts, artifact03(a))
	}
	for _, m := range t.History {
		out.History = append(out.History, protoMessage03(m))
	}
	return out
}

// stream03 wraps a 0.3-rendered task or event as a StreamResponse.
func stream03(v any) any {
	switch e := v.(type) {
	case *wireTask:
		return p03Stream{Task: task03(e)}
	case *wireMessage:
		m := protoMessage03(*e)
		return p03Stream{Msg: &m}
	case *wireStatusUpdate:
		return p03Stream{StatusUpdate: &p03StatusUpdate{TaskID: e.TaskID, ContextID: e.ContextID, Status: status03(e.Status), Final: e.Final != nil && *e.Final, Metadata: e.Metadata}}
	case *wireArtifactUpdate:
		return p03Stream{ArtifactUpdate: &p03ArtifactUpdate{TaskID: e.TaskID, ContextID: e.ContextID, Artifact: artifact03(e.Artifact), Append: e.Append, LastChunk: e.LastChunk}}
	}
	return v
}

// shape03 reshapes operation m's 0.3 JSON-RPC result as 0.3 proto-JSON.
func shape03(m method) func(any) any {
	switch m {
	case mSend, mStream, mSubscribe:
		return stream03
	case mGet, mCancel:
		return func(v any) any {
			if t, ok := v.(*wireTask); ok {
				return task03(t)
			}
			return v
		}
	case mList:
		return func(v any) any {
			l, ok := v.(*listResult)
			if !ok {
				return v
			}
			out := p03List{Tasks: []p03Task{}, NextPageToken: l.NextPageToken, PageSize: l.PageSize, TotalSize: l.TotalSize}
			for _, t := range l.Tasks {
				out.Tasks = append(out.Tasks, *task03(t))
			}
			return out
		}
	case mPushSet, mPushGet:
		return func(v any) any { return pushConfig03(toJSONValue(v)) }
	case mPushList:
		return func(v any) any {
			configs := []any{}
			list, _ := toJSONValue(v).([]any)
			if obj, ok := toJSONValue(v).(map[string]any); ok { // a paged {configs} answer
				list, _ = obj["configs"].([]any)
			}
			for _, c := range list {
				configs = append(configs, pushConfig03(c))
			}
			return map[string]any{"configs": configs}
		}
	case mPushDelete:
		return emptyIfNull
	}
	return nil
}

// toJSONValue is v as encoding/json's generic values: push results come from push.go
// in whatever Go type it chose.
func toJSONValue(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// pushConfig03 turns a JSON-RPC TaskPushNotificationConfig {taskId,
// pushNotificationConfig} into the proto one, named
// tasks/{taskId}/pushNotificationConfigs/{configId}: the JS SDK takes the task from
// the name and refuses a config without one.
func pushConfig03(v any) any {
	c, ok := v.(map[string]any)
	if !ok {
		return v
	}
	taskID, _ := c["taskId"].(string)
	pnc, _ := c["pushNotificationConfig"].(map[string]any)
	id, _ := pnc["id"].(string)
	return map[string]any{"name": "tasks/" + taskID + "/pushNotificationConfigs/" + id, "pushNotificationConfig": pnc}
}
