package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/edgepolicy"
)

// answer is where one request's reply goes, shaped by the binding it came in on
// (docs/reference/a2a.md "Bindings"): JSON-RPC wraps results and errors in a response
// object carrying the request's id; HTTP+JSON answers with the bare result and maps
// errors to HTTP statuses. The operations below serve both through it.
type answer struct {
	w    http.ResponseWriter
	r    *http.Request
	d    dialect
	who  caller
	id   json.RawMessage // the JSON-RPC request's id; unused by HTTP+JSON
	rest bool
	// shape reshapes a result where HTTP+JSON's differs from JSON-RPC's in the dialect
	// (rest.go, rest03.go); nil where it does not.
	shape func(any) any
	// cfg is the configuration that applies to r, read once per operation (config);
	// policy is the policy's view of it, parsed once (policyInput).
	cfg    *Config
	policy *edgepolicy.Input
}

// config is the configuration that applies to the request (Handler.configFor), read
// once: an operation's checks all judge it by the same settings.
func (a *answer) config(h *Handler) Config {
	if a.cfg == nil {
		c, _ := h.configFor(a.r)
		a.cfg = &c
	}
	return *a.cfg
}

// body is what carries result in this binding.
func (a *answer) body(result any) any {
	if a.rest {
		if a.shape != nil {
			return a.shape(result)
		}
		return result
	}
	return a.d.response(a.id, result, nil)
}

// ok answers with result.
func (a *answer) ok(result any) { writeJSON(a.w, http.StatusOK, a.body(result)) }

// fail answers with rerr. stream says the method answers with SSE: a JSON-RPC client of
// a streaming method reads only SSE, so its errors come as a one-event stream; HTTP+JSON
// clients read the status first, so theirs never do.
func (a *answer) fail(rerr *rpcError, stream bool) {
	if rerr.retryAfter > 0 {
		a.w.Header().Set("Retry-After", strconv.FormatInt(rerr.retryAfter, 10))
	}
	if rerr.status != 0 {
		// A refusal every HTTP client reads the same way (an overload's 503): the status
		// whatever the binding, the body in the binding's shape, never a stream.
		if a.rest {
			writeRESTStatus(a.w, a.d, rerr.status, rerr)
		} else {
			writeJSON(a.w, rerr.status, a.d.response(a.id, nil, rerr))
		}
		return
	}
	if a.rest {
		writeRESTError(a.w, a.d, rerr)
		return
	}
	if !stream {
		writeJSON(a.w, http.StatusOK, a.d.response(a.id, nil, rerr))
		return
	}
	s, err := startSSE(a.w)
	if err != nil {
		writeJSON(a.w, http.StatusOK, a.d.response(a.id, nil, newRPCError(codeInternal, "Internal error", err.Error(), nil)))
		return
	}
	_ = s.write(0, "", a.d.response(a.id, nil, rerr))
	_ = s.flush()
}

// do runs one A2A operation, whichever binding asked for it; name is the method as the
// client called it (for messages).
func (h *Handler) do(a *answer, m method, name string, params json.RawMessage) {
	defer h.traceCall(a, name)()
	if a.d == v10 {
		params = protoNames(params)
	}
	noteCaller(a.r, a.who)
	if !h.guard(a, m, params) {
		return
	}
	switch m {
	case mSend, mStream:
		h.doSend(a, params, m == mStream)
	case mGet:
		h.doGet(a, params)
	case mList:
		h.doList(a, params)
	case mCancel:
		h.doCancel(a, params)
	case mSubscribe:
		h.doSubscribe(a, params)
	case mPushSet, mPushGet, mPushList, mPushDelete:
		h.doPush(a, m, name, params)
	case mExtCard:
		h.doExtendedCard(a)
	default:
		a.fail(newRPCError(codeMethodNotFound, "Method not found", fmt.Sprintf("no method %q", name), map[string]any{"method": name}), false)
	}
}

func (h *Handler) doSend(a *answer, params json.RawMessage, stream bool) {
	in, rerr := a.d.parseSend(params)
	if rerr != nil {
		a.fail(rerr, stream)
		return
	}
	cfg := a.config(h)
	if rerr := in.admit(a.r.Context(), cfg.Inputs); rerr != nil {
		a.fail(rerr, stream)
		return
	}
	in.url = h.endpoint(a.r, cfg)
	in.owner, in.peer = a.who.principal, a.who.peer
	if in.taskID == "" {
		// A message that may start a task: the gateway's load, the principal's limits
		// and the policy's narrowing of its reach apply.
		var ok bool
		if in.hold, ok = h.admitEdge(a, stream); !ok {
			return
		}
		defer in.hold.releaseUnlessTaken()
		if in.egress, ok = h.egressFor(a, params, stream); !ok {
			return
		}
	}
	in.trace = h.taskParent(a.r.Context(), in)
	if in.pushRaw != "" {
		// An inline push config is checked before the task exists: a refused one refuses
		// the send (docs/reference/a2a.md "Push notifications").
		p := h.pusherNow()
		if p == nil {
			a.fail(errPushNotSupported("this agent offers no push notifications ("+in.pushField+"); poll the task or stream it"), stream)
			return
		}
		c, _, rerr := parsePushConfig(a.d, json.RawMessage(in.pushRaw), in.pushField)
		if rerr == nil {
			rerr = p.checkURL(a.r.Context(), c.URL)
		}
		if rerr != nil {
			a.fail(rerr, stream)
			return
		}
		in.push = &c
	}
	// A store that knows its storage is unreachable (a database gone away) refuses the
	// message before a task exists, at once: nothing admitted that cannot be recorded.
	if err := h.storeReady(); err != nil {
		a.fail(errStore(err), stream)
		return
	}
	t, sub, pushWrite, rerr := h.send(in, stream)
	if rerr != nil {
		a.fail(rerr, stream)
		return
	}
	if h.fleet != nil && in.hold != nil && in.hold.taken.Load() {
		// In a fleet the store counts the task once its write is in: the hold stands
		// for it until then (or until it ends here, if sooner).
		t.mu.Lock()
		added := t.last
		t.mu.Unlock()
		go func() {
			_ = added.settle()
			in.hold.release()
		}()
	}
	if err := pushWrite.wait(); err != nil {
		if sub != nil {
			sub.close()
		}
		a.fail(errStoreTask(err, t.id), stream)
		return
	}
	noteTask(a.r, t.id)
	if stream {
		traceTask(a.r, t.id, t.contextID, "")
		h.stream(a, sub)
		return
	}
	if in.blocking {
		t.mu.Lock()
		mirror := t.mirror
		t.mu.Unlock()
		if mirror {
			// Queued in the store for any replica to run: a task the store did not take
			// will not run, and is not waited for.
			if _, err := t.durableSnapshot(); err != nil {
				a.fail(errStoreTask(err, t.id), false)
				return
			}
			// Watched from here on, a mirror is refreshed on its signals; what it missed
			// before is read now.
			t.watch()
			defer t.unwatch()
			h.fresh(t)
		}
		ok, away := h.waitSettled(a.r.Context(), t)
		if !ok {
			return // the client went away
		}
		if away != nil {
			a.fail(errStoreTask(away, t.id), false)
			return
		}
		// The task ends and hands its slot on in one critical section under h.mu
		// (execute); taking the lock once makes the answer follow that whole section, so
		// a client told "completed" finds the slot, and its metrics, already released.
		h.mu.Lock()
		h.mu.Unlock()
	}
	snap, err := t.durableSnapshot()
	if err != nil {
		a.fail(errStoreTask(err, t.id), false)
		return
	}
	traceTask(a.r, t.id, t.contextID, string(snap.Status.State))
	a.ok(a.d.sendResult(h.linksFor(a.r).snapshot(snap), in.historyLength, in.blocking))
}

func (h *Handler) doGet(a *answer, params json.RawMessage) {
	p, rerr := parseTaskParams(params)
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	noteTask(a.r, p.ID)
	t := h.lookup(p.ID, a.who)
	if t == nil {
		a.fail(errTaskNotFound(p.ID), false)
		return
	}
	snap, err := t.durableSnapshot()
	if err != nil {
		a.fail(errStore(err), false)
		return
	}
	a.ok(a.d.task(h.linksFor(a.r).snapshot(snap), p.HistoryLength, true))
}

func (h *Handler) doCancel(a *answer, params json.RawMessage) {
	p, rerr := parseTaskParams(params)
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	noteTask(a.r, p.ID)
	snap, rerr := h.cancel(p.ID, a.who)
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	a.ok(a.d.task(h.linksFor(a.r).snapshot(snap), p.HistoryLength, true))
}

// doSubscribe serves tasks/resubscribe and SubscribeToTask: the task's current state,
// then its events as they happen — or, for a client reconnecting with Last-Event-ID, the
// events after that one. A finished task answers 0.3 with its final state alone; 1.0
// refuses it with UnsupportedOperationError as a plain response, not a stream, as A2A
// 1.0 prescribes for a task in a terminal state.
func (h *Handler) doSubscribe(a *answer, params json.RawMessage) {
	p, rerr := parseTaskParams(params)
	if rerr != nil {
		a.fail(rerr, true)
		return
	}
	noteTask(a.r, p.ID)
	t := h.lookup(p.ID, a.who)
	if t == nil {
		a.fail(errTaskNotFound(p.ID), true)
		return
	}
	t.mu.Lock()
	if st := t.st.State; a.d == v10 && terminal(st) {
		t.mu.Unlock()
		a.fail(errUnsupported(fmt.Sprintf("task %s is already %s and sends no more events; read it with GetTask", t.id, st)), false)
		return
	}
	var sub *subscription
	if last, ok := lastEventID(a.r); ok && !(terminal(t.st.State) && last >= t.seq) {
		// A reconnecting client: the events after the last one it saw, from the task's
		// buffer or the store's journal.
		sub = t.subscribeLocked(min(last, t.seq) + 1)
	} else {
		// A new subscriber, or one that saw the end of a finished task: the task's state.
		sub = t.subscribeSnapshotLocked()
	}
	t.mu.Unlock()
	// A mirror is refreshed on its signals while subscribed: what came between the read
	// above and the subscription is read now.
	h.fresh(t)
	h.stream(a, sub)
}

func (h *Handler) doList(a *answer, params json.RawMessage) {
	var p listParams
	if len(params) > 0 && string(params) != "null" {
		if err := strictUnmarshal(params, &p); err != nil {
			a.fail(errInvalidParams(err.Error()), false)
			return
		}
	}
	res, rerr := h.list(a.d, a.who, p, h.linksFor(a.r))
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	a.ok(res)
}

// doExtendedCard serves the authenticated extended card: the card an authenticated
// caller gets (docs/reference/a2a.md "The extended card").
func (h *Handler) doExtendedCard(a *answer) {
	cfg := a.config(h)
	if !a.who.authenticated {
		a.fail(errNoExtendedCard("this agent serves its extended card to authenticated callers only, and this one is anonymous; its public card at .well-known/agent-card.json is all there is"), false)
		return
	}
	a.ok(json.RawMessage(buildCard(cfg, h.endpoint(a.r, cfg), a.d == v10 || cfg.CardVersion == CardV10)))
}

// snakeKey finds a member name in proto field spelling (snake_case) in a JSON text.
var snakeKey = regexp.MustCompile(`"[a-z][a-z0-9]*_[a-z0-9_]*"\s*:`)

// protoNames renames the members of 1.0 params spelled as proto fields (task_id,
// history_length) to their JSON names (taskId, historyLength), at any depth, unless the
// JSON name is there too: A2A 1.0 encodes its messages as ProtoJSON, whose readers accept
// both spellings (docs/reference/a2a.md "JSON-RPC"). Params without such a member are
// returned as they are, unparsed. The client's own values — a data part's and every
// `metadata` — keep their members' names, and every number its digits.
func protoNames(params json.RawMessage) json.RawMessage {
	if !snakeKey.Match(params) {
		return params
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.UseNumber()
	if dec.Decode(&v) != nil || dec.More() {
		return params // the operation reports it
	}
	b, err := json.Marshal(camelMembers(v))
	if err != nil {
		return params
	}
	return b
}

// camelMembers renames snake_case members of every object in v, but not inside the
// values of members named data or metadata: a data part's value and metadata are the
// client's own JSON (google.protobuf.Value and Struct), not proto messages.
func camelMembers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if k != "data" && k != "metadata" {
				x[k] = camelMembers(val)
			}
			if !strings.Contains(k, "_") {
				continue
			}
			c := lowerCamel(k)
			if _, taken := x[c]; !taken {
				x[c] = x[k]
				delete(x, k)
			}
		}
	case []any:
		for i := range x {
			x[i] = camelMembers(x[i])
		}
	}
	return v
}

// lowerCamel spells a snake_case name in lowerCamelCase, as protobuf derives JSON names.
func lowerCamel(s string) string {
	var b strings.Builder
	up := false
	for _, r := range s {
		if r == '_' {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	return b.String()
}
