package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// restRoute is an HTTP+JSON route recognised by the final segments of a request's path
// (docs/reference/a2a.md "HTTP+JSON (REST)"): whatever precedes them — the capsule's
// route prefix, 0.3's /v1, a 1.0 tenant — is not the route's business.
type restRoute struct {
	found          bool
	get, post, del method // the operation each HTTP method runs; 0 where not allowed
	taskID, cfgID  string
	segs           int // how many trailing path segments the route spans
}

// op returns the operation of HTTP method hm on the route, 0 if the route has none.
func (rt restRoute) op(hm string) method {
	switch hm {
	case http.MethodGet:
		return rt.get
	case http.MethodPost:
		return rt.post
	case http.MethodDelete:
		return rt.del
	}
	return 0
}

// allow is the route's Allow header.
func (rt restRoute) allow() string {
	var a []string
	for _, m := range []struct {
		name string
		op   method
	}{{http.MethodGet, rt.get}, {http.MethodPost, rt.post}, {http.MethodDelete, rt.del}} {
		if m.op != 0 {
			a = append(a, m.name)
		}
	}
	return strings.Join(a, ", ")
}

// matchREST recognises an HTTP+JSON route in the escaped path p. looks says p is shaped
// like one (so a miss is a 404, not JSON-RPC); a path ending in "/" never is, which keeps
// the JSON-RPC endpoint (the card's url always ends in "/") JSON-RPC whatever its prefix.
func matchREST(p string) (rt restRoute, looks bool) {
	if p == "" || strings.HasSuffix(p, "/") {
		return rt, false
	}
	raw := strings.Split(p, "/")
	segs := make([]string, len(raw))
	for i, s := range raw {
		u, err := url.PathUnescape(s)
		if err != nil {
			return rt, true
		}
		segs[i] = u
	}
	n := len(segs)
	at := func(back int) string { // the segment back places from the end, "" before the start
		if n-back < 0 {
			return ""
		}
		return segs[n-back]
	}
	last := at(1)
	switch {
	case last == "message:send":
		return restRoute{found: true, post: mSend, segs: 1}, true
	case last == "message:stream":
		return restRoute{found: true, post: mStream, segs: 1}, true
	case last == "extendedAgentCard":
		return restRoute{found: true, get: mExtCard, segs: 1}, true
	case last == "card" && at(2) == "v1":
		return restRoute{found: true, get: mExtCard, segs: 1}, true
	case last == "tasks":
		return restRoute{found: true, get: mList, segs: 1}, true
	case at(2) == "tasks" && last != "":
		if id, verb, ok := cutLast(last, ":"); ok && id != "" {
			switch verb {
			case "cancel":
				return restRoute{found: true, post: mCancel, taskID: id, segs: 2}, true
			case "subscribe":
				// The specs' text and clients POST; both protos annotate GET: serve both.
				return restRoute{found: true, get: mSubscribe, post: mSubscribe, taskID: id, segs: 2}, true
			}
		}
		return restRoute{found: true, get: mGet, taskID: last, segs: 2}, true
	case at(3) == "tasks" && last == "pushNotificationConfigs" && at(2) != "":
		return restRoute{found: true, get: mPushList, post: mPushSet, taskID: at(2), segs: 3}, true
	case at(4) == "tasks" && at(2) == "pushNotificationConfigs" && at(3) != "" && last != "":
		return restRoute{found: true, get: mPushGet, del: mPushDelete, taskID: at(3), cfgID: last, segs: 4}, true
	}
	looks = strings.HasPrefix(last, "message:") || last == "pushNotificationConfigs"
	for back := 2; back <= 5; back++ {
		looks = looks || at(back) == "tasks"
	}
	return rt, looks
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return s, "", false
}

// restBase returns the escaped path p without its HTTP+JSON route and 0.3's "v1"
// segment before it: the path of the JSON-RPC endpoint beside it.
func restBase(p string) (string, bool) {
	rt, _ := matchREST(p)
	if !rt.found {
		return "", false
	}
	segs := strings.Split(p, "/")
	keep := len(segs) - rt.segs
	if keep > 0 && segs[keep-1] == "v1" {
		keep--
	}
	return strings.Join(segs[:keep], "/"), true
}

// restNames are the JSON-RPC names of the operations, for messages; ListTasks has no
// 0.3 JSON-RPC method and keeps its 1.0 name.
var restNames = [2]map[method]string{
	v03: {mSend: "message/send", mStream: "message/stream", mGet: "tasks/get", mList: "ListTasks", mCancel: "tasks/cancel",
		mSubscribe: "tasks/resubscribe", mPushSet: "tasks/pushNotificationConfig/set", mPushGet: "tasks/pushNotificationConfig/get",
		mPushList: "tasks/pushNotificationConfig/list", mPushDelete: "tasks/pushNotificationConfig/delete", mExtCard: "agent/getAuthenticatedExtendedCard"},
	v10: {mSend: "SendMessage", mStream: "SendStreamingMessage", mGet: "GetTask", mList: "ListTasks", mCancel: "CancelTask",
		mSubscribe: "SubscribeToTask", mPushSet: "CreateTaskPushNotificationConfig", mPushGet: "GetTaskPushNotificationConfig",
		mPushList: "ListTaskPushNotificationConfigs", mPushDelete: "DeleteTaskPushNotificationConfig", mExtCard: "GetExtendedAgentCard"},
}

// serveREST serves one HTTP+JSON request on route rt: it checks what JSON-RPC's envelope
// would (version, auth, Content-Type, body), builds the params the JSON-RPC method takes
// and runs the same operation through h.do, so the two bindings share every operation.
func (h *Handler) serveREST(w http.ResponseWriter, r *http.Request, rt restRoute) {
	d, vok := parseVersion(requestVersion(r))
	ed := d // the dialect errors are shaped in: an unknown version gets 1.0's
	if !vok {
		ed = v10
	}
	if !rt.found {
		writeRESTError(w, ed, newRPCError(codeMethodNotFound, "Method not found",
			fmt.Sprintf("%s %s is no HTTP+JSON route of this agent; see docs/reference/a2a.md \"HTTP+JSON (REST)\"", r.Method, r.URL.EscapedPath()), nil))
		return
	}
	m := rt.op(r.Method)
	if m == 0 {
		w.Header().Set("Allow", rt.allow())
		writeRESTStatus(w, ed, http.StatusMethodNotAllowed, errInvalidRequest(fmt.Sprintf("%s is not served on this route; use %s", r.Method, rt.allow())))
		return
	}
	if !vok {
		writeRESTError(w, v10, errVersion(requestVersion(r)))
		return
	}
	cfg, _ := h.configFor(r)
	who, f := identify(r, cfg)
	if f != nil {
		h.refusedAuth(r, f)
		w.Header().Set("WWW-Authenticate", f.challenge())
		writeRESTStatus(w, d, http.StatusUnauthorized, f.rpc("this agent needs a bearer token (Authorization: Bearer <token>), see the agent card's securitySchemes"))
		return
	}
	who, _ = asPeer(r, who)
	var body []byte
	if r.Method == http.MethodPost {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isRESTType(ct) {
			writeRESTError(w, d, errContentType(fmt.Sprintf("Content-Type %q: HTTP+JSON requests are application/json or application/a2a+json", ct), ct))
			return
		}
		var err error
		if body, err = readBody(w, r, cfg.MaxBody); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeRESTStatus(w, d, http.StatusRequestEntityTooLarge, errInvalidRequest(fmt.Sprintf("request body over %d bytes", cfg.MaxBody)))
				return
			}
			writeRESTError(w, d, errInvalidRequest("cannot read the request body"))
			return
		}
	}
	a := &answer{w: w, r: r, d: d, who: who, rest: true, shape: restShape(d, m)}
	params, rerr := restParams(d, m, rt, r.URL.Query(), body)
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	h.do(a, m, restNames[d][m], params)
}

// isRESTType accepts the two media types A2A's HTTP+JSON binding names, with parameters.
func isRESTType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || mt == "application/a2a+json")
}

// restParams builds the JSON-RPC params of operation m from the route, query and body.
func restParams(d dialect, m method, rt restRoute, q url.Values, body []byte) (json.RawMessage, *rpcError) {
	// Proto field names (snake_case) become JSON names first, for both versions' bodies
	// (0.3 clients such as the TCK send message_id, history_length), as in h.do.
	obj, rerr := bodyObject(protoNames(body), m == mSend || m == mStream || m == mPushSet)
	if rerr != nil {
		return nil, rerr
	}
	p := map[string]any{}
	switch m {
	case mSend, mStream:
		if d == v03 {
			return send03(obj)
		}
		return marshalParams(obj)
	case mGet, mCancel, mSubscribe:
		p["id"] = rt.taskID
		if m == mGet {
			if err := queryInt(q, p, "historyLength", "history_length"); err != nil {
				return nil, err
			}
		}
	case mList:
		for _, k := range [][2]string{{"contextId", "context_id"}, {"status", "status"}, {"pageToken", "page_token"}, {"statusTimestampAfter", "status_timestamp_after"}} {
			if v, ok := queryValue(q, k[0], k[1]); ok {
				p[k[0]] = v
			}
		}
		for _, k := range [][2]string{{"pageSize", "page_size"}, {"historyLength", "history_length"}} {
			if err := queryInt(q, p, k[0], k[1]); err != nil {
				return nil, err
			}
		}
		if v, ok := queryValue(q, "includeArtifacts", "include_artifacts"); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, errInvalidParams(fmt.Sprintf("query includeArtifacts %q is not true or false", v))
			}
			p["includeArtifacts"] = b
		}
	case mPushSet:
		if d == v03 {
			return pushSet03(rt.taskID, obj)
		}
		for k, v := range obj {
			p[k] = v
		}
		p["taskId"] = rt.taskID
	case mPushGet, mPushDelete:
		if d == v03 {
			p["id"], p["pushNotificationConfigId"] = rt.taskID, rt.cfgID
		} else {
			p["taskId"], p["id"] = rt.taskID, rt.cfgID
		}
	case mPushList:
		if d == v03 {
			p["id"] = rt.taskID
			break
		}
		p["taskId"] = rt.taskID
		if err := queryInt(q, p, "pageSize", "page_size"); err != nil {
			return nil, err
		}
		if v, ok := queryValue(q, "pageToken", "page_token"); ok {
			p["pageToken"] = v
		}
	case mExtCard:
		return nil, nil
	}
	return marshalParams(p)
}

// bodyObject decodes a request body, which must be a JSON object when present; need
// says the operation takes one.
func bodyObject(body []byte, need bool) (map[string]json.RawMessage, *rpcError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		if need {
			return nil, errInvalidParams("the request body is empty; send a JSON object")
		}
		return nil, nil
	}
	if !json.Valid(body) {
		return nil, errParse("the body is not valid JSON")
	}
	var obj map[string]json.RawMessage
	if body[0] != '{' || json.Unmarshal(body, &obj) != nil {
		return nil, errInvalidParams("the request body must be a JSON object")
	}
	if obj == nil {
		obj = map[string]json.RawMessage{}
	}
	return obj, nil
}

func marshalParams(v any) (json.RawMessage, *rpcError) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errInvalidParams(err.Error())
	}
	return b, nil
}

// queryValue reads query parameter camel, or its snake_case spelling (proto-JSON
// clients of 0.3 send either).
func queryValue(q url.Values, camel, snake string) (string, bool) {
	for _, k := range []string{camel, snake} {
		if vs, ok := q[k]; ok && len(vs) > 0 {
			return vs[0], true
		}
	}
	return "", false
}

// queryInt copies integer query parameter camel (or snake) into p.
func queryInt(q url.Values, p map[string]any, camel, snake string) *rpcError {
	v, ok := queryValue(q, camel, snake)
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return errInvalidParams(fmt.Sprintf("query %s %q is not an integer", camel, v))
	}
	p[camel] = n
	return nil
}

// restStatus is the HTTP status of each error over HTTP+JSON: A2A 1.0's table
// (specification §5.4), except where the A2A TCK asserts otherwise — 409 for
// TaskNotCancelable, 415 for ContentTypeNotSupported — since those are what clients are
// tested against (docs/reference/a2a.md "HTTP+JSON (REST)").
var restStatus = map[int]int{
	codeParse:            http.StatusBadRequest,
	codeInvalidRequest:   http.StatusBadRequest,
	codeMethodNotFound:   http.StatusNotFound,
	codeInvalidParams:    http.StatusBadRequest,
	codeInternal:         http.StatusInternalServerError,
	codeTaskNotFound:     http.StatusNotFound,
	codeNotCancelable:    http.StatusConflict,
	codePushNotSupported: http.StatusBadRequest,
	codeUnsupported:      http.StatusBadRequest,
	codeContentType:      http.StatusUnsupportedMediaType,
	codeNoExtendedCard:   http.StatusBadRequest,
	codeVersion:          http.StatusBadRequest,
	codeUnauthenticated:  http.StatusUnauthorized,
	codePermissionDenied: http.StatusForbidden,
	codeRateLimited:      http.StatusTooManyRequests,
	codeTokenBudget:      http.StatusTooManyRequests,
	codeOverloaded:       http.StatusServiceUnavailable,
}

// grpcStatus is the google.rpc.Code name 1.0 error bodies carry, per A2A 1.0 §5.4.
var grpcStatus = map[int]string{
	codeParse:            "INVALID_ARGUMENT",
	codeInvalidRequest:   "INVALID_ARGUMENT",
	codeMethodNotFound:   "NOT_FOUND",
	codeInvalidParams:    "INVALID_ARGUMENT",
	codeInternal:         "INTERNAL",
	codeTaskNotFound:     "NOT_FOUND",
	codeNotCancelable:    "FAILED_PRECONDITION",
	codePushNotSupported: "FAILED_PRECONDITION",
	codeUnsupported:      "FAILED_PRECONDITION",
	codeContentType:      "INVALID_ARGUMENT",
	codeNoExtendedCard:   "FAILED_PRECONDITION",
	codeVersion:          "FAILED_PRECONDITION",
	codeUnauthenticated:  "UNAUTHENTICATED",
	codePermissionDenied: "PERMISSION_DENIED",
	codeRateLimited:      "RESOURCE_EXHAUSTED",
	codeTokenBudget:      "RESOURCE_EXHAUSTED",
	codeOverloaded:       "UNAVAILABLE",
}

// httpGRPCStatus names the google.rpc.Code of errors the HTTP layer answers itself.
var httpGRPCStatus = map[int]string{
	http.StatusUnauthorized:          "UNAUTHENTICATED",
	http.StatusMethodNotAllowed:      "UNIMPLEMENTED",
	http.StatusRequestEntityTooLarge: "RESOURCE_EXHAUSTED",
}

// restErrorBody is A2A 1.0's HTTP+JSON error: google.rpc.Status as JSON, its code the
// HTTP status.
type restErrorBody struct {
	Error struct {
		Code    int         `json:"code"`
		Status  string      `json:"status"`
		Message string      `json:"message"`
		Details []errorInfo `json:"details"`
	} `json:"error"`
}

// writeRESTError answers an HTTP+JSON request with rerr at its status.
func writeRESTError(w http.ResponseWriter, d dialect, rerr *rpcError) {
	status := restStatus[rerr.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeRESTStatus(w, d, status, rerr)
}

// writeRESTStatus answers an HTTP+JSON request with rerr at status. 1.0 clients read
// google.rpc.Status with an ErrorInfo; the A2A JS SDK 0.3's REST transport reads a flat
// {code, message, data} with the JSON-RPC code at the top and ignores anything nested.
func writeRESTStatus(w http.ResponseWriter, d dialect, status int, rerr *rpcError) {
	if d == v03 {
		writeJSON(w, status, rerr.in(v03))
		return
	}
	var b restErrorBody
	b.Error.Code, b.Error.Message = status, rerr.Message
	b.Error.Status = httpGRPCStatus[status]
	if b.Error.Status == "" {
		b.Error.Status = grpcStatus[rerr.Code]
	}
	if b.Error.Status == "" {
		b.Error.Status = "UNKNOWN"
	}
	b.Error.Details, _ = rerr.in(v10).Data.([]errorInfo)
	writeJSON(w, status, b)
}

// restShape is how operation m's results differ over HTTP+JSON from JSON-RPC's in
// dialect d; nil where they do not.
func restShape(d dialect, m method) func(any) any {
	if d == v03 {
		return shape03(m)
	}
	if m == mPushDelete {
		return emptyIfNull
	}
	return nil
}

// emptyIfNull turns a null result (google.protobuf.Empty over JSON-RPC) into {}, which
// is how HTTP+JSON writes Empty.
func emptyIfNull(v any) any {
	if b, err := json.Marshal(v); err != nil || string(b) == "null" {
		return struct{}{}
	}
	return v
}
