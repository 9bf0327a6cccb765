package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
)

// JSON-RPC and A2A error codes (docs/reference/a2a.md, "JSON-RPC").
const (
	codeParse            = -32700
	codeInvalidRequest   = -32600
	codeMethodNotFound   = -32601
	codeInvalidParams    = -32602
	codeInternal         = -32603
	codeTaskNotFound     = -32001
	codeNotCancelable    = -32002
	codePushNotSupported = -32003
	codeUnsupported      = -32004
	codeContentType      = -32005
	codeNoExtendedCard   = -32007
	codeVersion          = -32009
)

// reasons are the google.rpc.ErrorInfo reasons of A2A 1.0 errors: the error's name in
// upper snake case without "Error".
var reasons = map[int]string{
	codeParse:            "PARSE_ERROR",
	codeInvalidRequest:   "INVALID_REQUEST",
	codeMethodNotFound:   "METHOD_NOT_FOUND",
	codeInvalidParams:    "INVALID_PARAMS",
	codeInternal:         "INTERNAL_ERROR",
	codeTaskNotFound:     "TASK_NOT_FOUND",
	codeNotCancelable:    "TASK_NOT_CANCELABLE",
	codePushNotSupported: "PUSH_NOTIFICATION_NOT_SUPPORTED",
	codeUnsupported:      "UNSUPPORTED_OPERATION",
	codeContentType:      "CONTENT_TYPE_NOT_SUPPORTED",
	codeNoExtendedCard:   "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
	codeVersion:          "VERSION_NOT_SUPPORTED",
	codeUnauthenticated:  "UNAUTHENTICATED",
	codePermissionDenied: "PERMISSION_DENIED",
	codeRateLimited:      "RATE_LIMITED",
	codeTokenBudget:      "TOKEN_BUDGET_EXHAUSTED",
	codeOverloaded:       "OVERLOADED",
}

// rpcError is a JSON-RPC error object. The message names the error and what was wrong;
// Data carries the detail in the shape of the request's dialect (see in).
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`

	detail string
	meta   map[string]any
	// retryAfter is the Retry-After a refusal the client may retry is answered with, in
	// seconds (0: none); status, when set, is the HTTP status of every HTTP binding's
	// answer (an overload's 503, which even JSON-RPC clients read).
	retryAfter int64
	status     int
}

func newRPCError(code int, name, detail string, meta map[string]any) *rpcError {
	return &rpcError{Code: code, Message: name + ": " + detail, detail: detail, meta: meta}
}

// errorInfo is google.rpc.ErrorInfo in its JSON form, as A2A 1.0 puts it in error.data.
type errorInfo struct {
	Type     string            `json:"@type"`
	Reason   string            `json:"reason"`
	Domain   string            `json:"domain"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

// in renders the error for dialect d: 1.0 clients read error.data as a list holding a
// google.rpc.ErrorInfo (its metadata the detail and the error's fields, as strings);
// 0.3 clients read an object whose "error" member is the detail (where the Go SDK
// looks for it).
func (e *rpcError) in(d dialect) *rpcError {
	c := *e
	if d == v10 {
		md := map[string]string{"detail": e.detail}
		for k, v := range e.meta {
			if s, ok := v.(string); ok {
				md[k] = s
			} else {
				b, _ := json.Marshal(v)
				md[k] = string(b)
			}
		}
		c.Data = []errorInfo{{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: reasons[e.Code], Domain: "a2a-protocol.org", Metadata: md}}
		return &c
	}
	data := map[string]any{"error": e.detail}
	for k, v := range e.meta {
		data[k] = v
	}
	c.Data = data
	return &c
}

func errParse(detail string) *rpcError {
	return newRPCError(codeParse, "Invalid JSON payload", detail, nil)
}

func errInvalidRequest(detail string) *rpcError {
	return newRPCError(codeInvalidRequest, "Invalid request", detail, nil)
}

func errInvalidParams(detail string) *rpcError {
	return newRPCError(codeInvalidParams, "Invalid parameters", detail, nil)
}

func errUnsupported(detail string) *rpcError {
	return newRPCError(codeUnsupported, "Unsupported operation", detail, nil)
}

func errPushNotSupported(detail string) *rpcError {
	return newRPCError(codePushNotSupported, "Push notifications not supported", detail, nil)
}

func errContentType(detail, mediaType string) *rpcError {
	return newRPCError(codeContentType, "Content type not supported", detail, map[string]any{"mediaType": mediaType})
}

func errNoExtendedCard(detail string) *rpcError {
	return newRPCError(codeNoExtendedCard, "Extended agent card not configured", detail, nil)
}

func errTaskNotFound(id string) *rpcError {
	return newRPCError(codeTaskNotFound, "Task not found", fmt.Sprintf("no task %q (finished tasks are kept for a while, then forgotten)", id), map[string]any{"taskId": id})
}

// errStore answers a request whose state the task store could not make durable.
func errStore(err error) *rpcError {
	var meta map[string]any
	if e := (*errs.Error)(nil); errors.As(err, &e) {
		meta = map[string]any{"storeCode": e.Code}
	}
	return newRPCError(codeInternal, "Internal error", "the task store could not record the task: "+err.Error(), meta)
}

// errStoreTask is errStore for a task that exists, admitted before its write failed: it
// may run and be recorded once the store is back, so the error names it for the client
// to ask about (tasks/get) rather than send again.
func errStoreTask(err error, id string) *rpcError {
	e := errStore(err)
	if e.meta == nil {
		e.meta = map[string]any{}
	}
	e.meta["taskId"] = id
	e.Message += " (task " + id + " was admitted: ask for it with tasks/get rather than send the message again)"
	e.detail += " (task " + id + " was admitted: ask for it with tasks/get rather than send the message again)"
	return e
}

func errNotCancelable(id, state string) *rpcError {
	return newRPCError(codeNotCancelable, "Task not cancelable", fmt.Sprintf("task %s is already %s", id, state), map[string]any{"taskId": id, "state": state})
}

func errVersion(v string) *rpcError {
	return newRPCError(codeVersion, "Version not supported", fmt.Sprintf("A2A-Version %q: this agent speaks 0.3 (header absent or 0.3) and 1.0", v), map[string]any{"supportedVersions": []string{"0.3", "1.0"}})
}

// rpcRequest is a checked JSON-RPC 2.0 request.
type rpcRequest struct {
	id     json.RawMessage // string, number or null, echoed verbatim
	method string
	params json.RawMessage
}

var nullID = json.RawMessage("null")

// parseRequest checks the JSON-RPC envelope. Batches are refused: a batch cannot mix
// with SSE answers, and no A2A client sends one. A request without an id is a
// notification (notify true): it is checked like any other but never answered.
func parseRequest(body []byte) (req rpcRequest, notify bool, rerr *rpcError) {
	req, rerr = parseEnvelope(body)
	return req, req.id == nil, rerr
}

func parseEnvelope(body []byte) (rpcRequest, *rpcError) {
	req := rpcRequest{id: nullID}
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return req, errParse("the body is not valid JSON")
	}
	if body[0] == '[' {
		return req, errInvalidRequest("batch requests are not supported; send one request per HTTP request")
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(body, &env); err != nil {
		return req, errInvalidRequest("the request must be a JSON object")
	}
	if id, ok := env["id"]; ok {
		switch {
		case len(id) > 0 && (id[0] == '"' || id[0] == '-' || id[0] >= '0' && id[0] <= '9' || string(id) == "null"):
			req.id = id
		default:
			return req, errInvalidRequest("id must be a string, a number or null")
		}
	}
	var version string
	if err := json.Unmarshal(env["jsonrpc"], &version); err != nil || version != "2.0" {
		return req, errInvalidRequest(`jsonrpc must be "2.0"`)
	}
	if err := json.Unmarshal(env["method"], &req.method); err != nil || req.method == "" {
		return req, errInvalidRequest("method must be a non-empty string")
	}
	req.params = env["params"]
	if _, ok := env["id"]; !ok {
		req.id = nil
	}
	return req, nil
}

// rpcResponse is a JSON-RPC 2.0 response.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// MarshalJSON writes result even when it is null (a 0.3 push config delete answers
// null): JSON-RPC 2.0 §5 wants exactly one of result and error in every response.
func (r rpcResponse) MarshalJSON() ([]byte, error) {
	if r.Error != nil {
		return json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *rpcError       `json:"error"`
		}{r.JSONRPC, r.ID, r.Error})
	}
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{r.JSONRPC, r.ID, r.Result})
}

// response answers request id in dialect d.
func (d dialect) response(id json.RawMessage, result any, rerr *rpcError) rpcResponse {
	if id == nil {
		id = nullID
	}
	if rerr != nil {
		return rpcResponse{JSONRPC: "2.0", ID: id, Error: rerr.in(d)}
	}
	return rpcResponse{JSONRPC: "2.0", ID: id, Result: result}
}

// method is what a JSON-RPC method does, whatever the dialect calls it.
type method uint8

const (
	mSend method = iota + 1
	mStream
	mGet
	mList
	mCancel
	mSubscribe
	mPushSet    // create (set) a task's push-notification config
	mPushGet    // read one
	mPushList   // list a task's configs
	mPushDelete // delete one
	mExtCard    // the authenticated extended card
)

// streams reports whether the method answers with SSE, errors included.
func (m method) streams() bool { return m == mStream || m == mSubscribe }

var methods = [2]map[string]method{
	v03: {
		"message/send":                        mSend,
		"message/stream":                      mStream,
		"tasks/get":                           mGet,
		"tasks/cancel":                        mCancel,
		"tasks/resubscribe":                   mSubscribe,
		"tasks/pushNotificationConfig/set":    mPushSet,
		"tasks/pushNotificationConfig/get":    mPushGet,
		"tasks/pushNotificationConfig/list":   mPushList,
		"tasks/pushNotificationConfig/delete": mPushDelete,
		"agent/getAuthenticatedExtendedCard":  mExtCard,
	},
	v10: {
		"SendMessage":                      mSend,
		"SendStreamingMessage":             mStream,
		"GetTask":                          mGet,
		"ListTasks":                        mList,
		"CancelTask":                       mCancel,
		"SubscribeToTask":                  mSubscribe,
		"CreateTaskPushNotificationConfig": mPushSet,
		"SetTaskPushNotificationConfig":    mPushSet,
		"GetTaskPushNotificationConfig":    mPushGet,
		"ListTaskPushNotificationConfigs":  mPushList,
		"ListTaskPushNotificationConfig":   mPushList,
		"DeleteTaskPushNotificationConfig": mPushDelete,
		"GetExtendedAgentCard":             mExtCard,
	},
}

// lookupMethod finds name in dialect d; for a name of the other dialect it says which
// header would select it.
func lookupMethod(d dialect, name string) (method, *rpcError) {
	if m, ok := methods[d][name]; ok {
		return m, nil
	}
	other := v10
	if d == v10 {
		other = v03
	}
	if _, ok := methods[other][name]; ok {
		hint := `send the header "A2A-Version: 1.0"`
		if other == v03 {
			hint = `omit the A2A-Version header or send "A2A-Version: 0.3"`
		}
		return 0, newRPCError(codeMethodNotFound, "Method not found",
			fmt.Sprintf("%s is an A2A %s method but this request speaks %s; %s", name, other, d, hint),
			map[string]any{"method": name})
	}
	return 0, newRPCError(codeMethodNotFound, "Method not found", fmt.Sprintf("no method %q in A2A %s", name, d), map[string]any{"method": name})
}

// streamsInAny reports whether name is a streaming method in either dialect, so that
// errors found before the dialect is known still reach SSE clients as SSE.
func streamsInAny(name string) bool {
	return methods[v03][name].streams() || methods[v10][name].streams()
}
