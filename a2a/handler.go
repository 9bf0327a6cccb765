package a2a

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of the task registry and streams.
const (
	replayEvents  = 512              // per-task replay buffer (docs/reference/a2a.md "Streams")
	keepFinished  = 1000             // finished tasks kept per handler, least recently used dropped
	heartbeatTick = 15 * time.Second // SSE keep-alive comment
)

// Handler serves A2A for one capsule. Its zero value is not usable: call NewHandler.
type Handler struct {
	mu      sync.Mutex
	cfg     Config
	spec    *runSpec
	store   store // the tasks and threaded turns (store.go)
	slots   slots // who runs and who waits (slots.go)
	waiting map[string]*task
	// cardTime is when what the card says last changed (its Last-Modified); cardKey is
	// what it was computed from.
	cardTime time.Time
	cardKey  string
	closing  bool
	idle     chan struct{} // closed when shutting down and no task holds or waits for the slot
	base     context.Context
	stop     context.CancelFunc

	ringSize  int
	heartbeat time.Duration
	// swept is closed when the retention sweeper (retention.go) has returned; nil
	// without a durable store.
	swept chan struct{}
}

// NewHandler validates cfg and returns a Handler serving it.
func NewHandler(cfg Config) (*Handler, error) {
	cfg, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	spec := specOf(cfg)
	var st store = newMemoryStore(keepFinished)
	if cfg.Store != nil {
		ds, err := newDurableStore(cfg.Store, cfg.Card.Name, spec, replayEvents)
		if err != nil {
			return nil, err
		}
		st = ds
	}
	base, stop := context.WithCancel(context.Background())
	h := &Handler{
		cfg: cfg, spec: spec,
		waiting: map[string]*task{}, slots: newSlots(),
		base: base, stop: stop,
		store:    st,
		ringSize: replayEvents, heartbeat: heartbeatTick,
	}
	h.cardKey, h.cardTime = cardKeyOf(cfg), time.Now()
	h.slotMetricsLocked()
	if ds, ok := st.(*durableStore); ok {
		// Tasks admitted but never started before the restart run now, in admission order.
		h.mu.Lock()
		for _, t := range ds.requeued {
			h.placeLocked(t, time.Now())
		}
		ds.requeued = nil
		h.mu.Unlock()
	}
	if cfg.Store != nil {
		h.sweep(time.Now())
		h.swept = make(chan struct{})
		go h.sweeper()
	}
	return h, nil
}

// cardKeyOf sums up the settings the card shows, so Update can tell whether it changed.
func cardKeyOf(cfg Config) string {
	b, _ := json.Marshal([]any{cfg.Card, cfg.Bearer != "", cfg.PublicURL, cfg.CardVersion})
	return string(b)
}

// cardConfig returns the current configuration and when the card last changed.
func (h *Handler) cardConfig() (Config, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg, h.cardTime
}

func specOf(cfg Config) *runSpec {
	return &runSpec{
		exec: cfg.Executor, metrics: cfg.Metrics, capsule: cfg.Card.Name,
		inputTimeout: cfg.Lifecycle.InputTimeout, threaded: cfg.Lifecycle.Threaded,
		logger: cfg.Logger,
	}
}

// Update swaps card, executor, lifecycle and auth for tasks admitted from now on.
// Tasks admitted before finish with the executor they were admitted with and stay
// visible (tasks/get, resubscribe): a config reload replaces a capsule without dropping
// work. The capsule's one slot is shared across the swap, so old and new tasks never
// run at the same time.
func (h *Handler) Update(cfg Config) error {
	cfg, err := normalize(cfg)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cfg, h.spec = cfg, specOf(cfg)
	if key := cardKeyOf(cfg); key != h.cardKey {
		h.cardKey, h.cardTime = key, time.Now()
	}
	h.fillLocked(time.Now()) // a higher concurrency starts waiting tasks now
	return nil
}

// Shutdown stops admitting tasks, waits until the admitted ones (running, waiting for
// input, queued) have ended or ctx ends (the grace period), then ends those left failed
// "interrupted", as a restart would. Streams and task reads keep working while it waits.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	// A task waiting for input would hold the shutdown for its whole grace period for an
	// answer that is not coming: it ends now.
	now := time.Now()
	h.slots.each(func(t *task) {
		t.mu.Lock()
		if t.st.State == stateInputRequired {
			h.cancelLocked(t, "canceled: the capsule is shutting down while the task waited for input", now)
		}
		t.mu.Unlock()
	})
	if h.slots.idle() {
		h.mu.Unlock()
		h.halt()
		return nil
	}
	if h.idle == nil {
		h.idle = make(chan struct{})
	}
	idle := h.idle
	h.mu.Unlock()
	select {
	case <-idle:
		h.halt()
		return nil
	case <-ctx.Done():
	}
	h.mu.Lock()
	now = time.Now()
	h.slots.each(func(t *task) {
		t.mu.Lock()
		if !terminal(t.st.State) {
			h.interruptLocked(t, now)
		}
		t.mu.Unlock()
	})
	h.mu.Unlock()
	h.halt()
	return fmt.Errorf("a2a: shutdown: the tasks still admitted at the end of the grace period ended interrupted: %w", ctx.Err())
}

// halt ends the handler's background work: the tasks' contexts, and the retention
// sweeper, waited for so that the caller may close the store.
func (h *Handler) halt() {
	h.stop()
	if h.swept != nil {
		<-h.swept
	}
}

// config returns the current configuration.
func (h *Handler) config() Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// ServeHTTP serves the card at <prefix>/.well-known/agent-card.json (and agent.json)
// and JSON-RPC on POST to any other path under the prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := cardPrefix(r.URL.EscapedPath()); ok {
		h.serveCard(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "this is an A2A JSON-RPC endpoint: POST a JSON-RPC 2.0 request; the agent card is at .well-known/agent-card.json", http.StatusMethodNotAllowed)
		return
	}
	cfg := h.config()
	if !authorized(r, cfg.Bearer) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="capsule"`)
		http.Error(w, "unauthorized: this agent needs a bearer token (Authorization: Bearer <token>), see the agent card's securitySchemes", http.StatusUnauthorized)
		return
	}
	body, err := readBody(w, r, cfg.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, fmt.Sprintf("request body over %d bytes", cfg.MaxBody), http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "cannot read the request body", http.StatusBadRequest)
		return
	}
	h.serveRPC(w, r, body)
}

// authorized compares the bearer token in constant time; hashing first hides the
// token's length too.
func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	a, b := sha256.Sum256([]byte(strings.TrimSpace(got))), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// readBody reads at most limit bytes, refusing a larger declared length before
// reading anything.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}

// serveRPC dispatches one JSON-RPC request. The dialect comes first, from the
// A2A-Version header or query parameter, so that every error is shaped for its reader.
func (h *Handler) serveRPC(w http.ResponseWriter, r *http.Request, body []byte) {
	d, ok := parseVersion(requestVersion(r))
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		if !ok {
			d = v10
		}
		writeJSON(w, d.response(nil, nil, errContentType(fmt.Sprintf("Content-Type %q: JSON-RPC requests are application/json", ct), ct)))
		return
	}
	req, notify, rerr := parseRequest(body)
	if notify {
		// A notification: JSON-RPC answers none, and A2A defines no method that acts
		// without answering, so nothing runs.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !ok {
		h.reply(w, v10, streamsInAny(req.method), req.id, nil, errVersion(requestVersion(r)))
		return
	}
	if rerr != nil {
		writeJSON(w, d.response(req.id, nil, rerr))
		return
	}
	m, rerr := lookupMethod(d, req.method)
	if rerr != nil {
		h.reply(w, d, streamsInAny(req.method), req.id, nil, rerr)
		return
	}
	switch m {
	case mSend, mStream:
		h.rpcSend(w, r, d, req, m == mStream)
	case mGet:
		h.rpcGet(w, d, req)
	case mList:
		h.rpcList(w, d, req)
	case mCancel:
		h.rpcCancel(w, d, req)
	case mSubscribe:
		h.rpcSubscribe(w, r, d, req)
	case mPush:
		h.reply(w, d, false, req.id, nil, errPushNotSupported(req.method+": this agent offers no push notifications (its card says capabilities.pushNotifications false); poll the task or stream it"))
	default:
		h.reply(w, d, false, req.id, nil, errNoExtendedCard(req.method+": this agent has no extended card; its public card at .well-known/agent-card.json is all there is"))
	}
}

// isJSONType accepts application/json and any application/*+json, with parameters.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// reply answers with one result or error, as JSON or, for streaming methods, as a
// one-event SSE stream (SDK clients of streaming methods read only SSE).
func (h *Handler) reply(w http.ResponseWriter, d dialect, stream bool, id json.RawMessage, result any, rerr *rpcError) {
	if !stream {
		writeJSON(w, d.response(id, result, rerr))
		return
	}
	s, err := startSSE(w)
	if err != nil {
		writeJSON(w, d.response(id, nil, newRPCError(codeInternal, "Internal error", err.Error(), nil)))
		return
	}
	_ = s.write(0, "", d.response(id, result, rerr))
	_ = s.flush()
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "cannot encode the response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, '\n'))
}

func (h *Handler) rpcSend(w http.ResponseWriter, r *http.Request, d dialect, req rpcRequest, stream bool) {
	in, rerr := d.parseSend(req.params)
	if rerr != nil {
		h.reply(w, d, stream, req.id, nil, rerr)
		return
	}
	in.url = h.endpoint(r, h.config())
	t, sub, rerr := h.send(in, stream)
	if rerr != nil {
		h.reply(w, d, stream, req.id, nil, rerr)
		return
	}
	if stream {
		h.stream(w, r, d, req.id, sub)
		return
	}
	if in.blocking && !waitSettled(r.Context(), t) {
		return // the client went away
	}
	snap, err := t.durableSnapshot()
	if err != nil {
		writeJSON(w, d.response(req.id, nil, errStore(err)))
		return
	}
	writeJSON(w, d.response(req.id, d.sendResult(snap, in.historyLength), nil))
}

func (h *Handler) rpcGet(w http.ResponseWriter, d dialect, req rpcRequest) {
	p, rerr := parseTaskParams(req.params)
	if rerr != nil {
		h.reply(w, d, false, req.id, nil, rerr)
		return
	}
	t := h.lookup(p.ID)
	if t == nil {
		h.reply(w, d, false, req.id, nil, errTaskNotFound(p.ID))
		return
	}
	snap, err := t.durableSnapshot()
	if err != nil {
		writeJSON(w, d.response(req.id, nil, errStore(err)))
		return
	}
	writeJSON(w, d.response(req.id, d.task(snap, p.HistoryLength, true), nil))
}

func (h *Handler) rpcCancel(w http.ResponseWriter, d dialect, req rpcRequest) {
	p, rerr := parseTaskParams(req.params)
	if rerr != nil {
		h.reply(w, d, false, req.id, nil, rerr)
		return
	}
	snap, rerr := h.cancel(p.ID)
	if rerr != nil {
		h.reply(w, d, false, req.id, nil, rerr)
		return
	}
	writeJSON(w, d.response(req.id, d.task(snap, p.HistoryLength, true), nil))
}

// rpcSubscribe serves tasks/resubscribe and SubscribeToTask: the task's current state,
// then its events as they happen — or, for a client reconnecting with Last-Event-ID, the
// events after that one. A finished task answers 0.3 with its final state alone; 1.0
// refuses it with UnsupportedOperationError as a plain JSON-RPC response, not a stream,
// as A2A 1.0 prescribes for a task in a terminal state.
func (h *Handler) rpcSubscribe(w http.ResponseWriter, r *http.Request, d dialect, req rpcRequest) {
	p, rerr := parseTaskParams(req.params)
	if rerr != nil {
		h.reply(w, d, true, req.id, nil, rerr)
		return
	}
	t := h.lookup(p.ID)
	if t == nil {
		h.reply(w, d, true, req.id, nil, errTaskNotFound(p.ID))
		return
	}
	t.mu.Lock()
	if st := t.st.State; d == v10 && terminal(st) {
		t.mu.Unlock()
		h.reply(w, d, false, req.id, nil, errUnsupported(fmt.Sprintf("task %s is already %s and sends no more events; read it with GetTask", t.id, st)))
		return
	}
	var sub *subscription
	if last, ok := lastEventID(r); ok && !(terminal(t.st.State) && last >= t.seq) {
		// A reconnecting client: the events after the last one it saw, from the task's
		// buffer (or a lagged notice and the current state when they are gone).
		sub = t.subscribeLocked(min(last, t.seq) + 1)
	} else {
		// A new subscriber, or one that saw the end of a finished task: the task's state.
		sub = t.subscribeSnapshotLocked()
	}
	t.mu.Unlock()
	h.stream(w, r, d, req.id, sub)
}

// lastEventID reads the SSE Last-Event-ID header a reconnecting client sends: the id of
// the last event it received.
func lastEventID(r *http.Request) (uint64, bool) {
	v := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(v, 10, 64)
	return n, err == nil
}

// waitSettled blocks until t is terminal or waits for input; false if ctx ended first.
func waitSettled(ctx context.Context, t *task) bool {
	for {
		t.mu.Lock()
		st, changed := t.st.State, t.changed
		t.mu.Unlock()
		if settled(st) {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}
