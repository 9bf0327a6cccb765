package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JSON-RPC and A2A error codes (SPEC §9).
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	codeTaskNotFound   = -32001
	codeNotCancelable  = -32002
	codeUnsupported    = -32004
	codeVersion        = -32009
)

// rpcError is a JSON-RPC error object. The message names the error and what was wrong;
// data.error repeats the detail, which is where the Go SDK looks for it.
type rpcError struct {
	Code    int            `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

func newRPCError(code int, name, detail string, data map[string]any) *rpcError {
	if data == nil {
		data = map[string]any{}
	}
	data["error"] = detail
	return &rpcError{Code: code, Message: name + ": " + detail, Data: data}
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

func errTaskNotFound(id string) *rpcError {
	return newRPCError(codeTaskNotFound, "Task not found", fmt.Sprintf("no task %q (finished tasks are kept for a while, then forgotten)", id), map[string]any{"taskId": id})
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
// with SSE answers, and no A2A client sends one.
func parseRequest(body []byte) (rpcRequest, *rpcError) {
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
	} else {
		return req, errInvalidRequest("id is required: notifications are not supported")
	}
	var version string
	if err := json.Unmarshal(env["jsonrpc"], &version); err != nil || version != "2.0" {
		return req, errInvalidRequest(`jsonrpc must be "2.0"`)
	}
	if err := json.Unmarshal(env["method"], &req.method); err != nil || req.method == "" {
		return req, errInvalidRequest("method must be a non-empty string")
	}
	req.params = env["params"]
	return req, nil
}

// rpcResponse is a JSON-RPC 2.0 response.
type rpcResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

func response(id json.RawMessage, result any, rerr *rpcError) rpcResponse {
	if rerr != nil {
		return rpcResponse{JSONRPC: "2.0", ID: id, Error: rerr}
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
	mUnsupported // known A2A methods this agent does not offer (push, extended card)
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
		"tasks/pushNotificationConfig/set":    mUnsupported,
		"tasks/pushNotificationConfig/get":    mUnsupported,
		"tasks/pushNotificationConfig/list":   mUnsupported,
		"tasks/pushNotificationConfig/delete": mUnsupported,
		"agent/getAuthenticatedExtendedCard":  mUnsupported,
	},
	v10: {
		"SendMessage":                      mSend,
		"SendStreamingMessage":             mStream,
		"GetTask":                          mGet,
		"ListTasks":                        mList,
		"CancelTask":                       mCancel,
		"SubscribeToTask":                  mSubscribe,
		"CreateTaskPushNotificationConfig": mUnsupported,
		"SetTaskPushNotificationConfig":    mUnsupported,
		"GetTaskPushNotificationConfig":    mUnsupported,
		"ListTaskPushNotificationConfigs":  mUnsupported,
		"ListTaskPushNotificationConfig":   mUnsupported,
		"DeleteTaskPushNotificationConfig": mUnsupported,
		"GetExtendedAgentCard":             mUnsupported,
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
