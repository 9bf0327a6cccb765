package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Defaults of the task registry and streams.
const (
	replayEvents  = 512              // per-task replay buffer (docs/reference/a2a.md "Streams")
	keepFinished  = 1000             // finished tasks kept per handler, least recently used dropped
	heartbeatTick = 15 * time.Second // SSE keep-alive comment
)

// Handler serves A2A for one capsule. Its zero value is not usable: call NewHandler.
type Handler struct {
	// grpc serves the gRPC binding (grpc.go) to the requests that are gRPC calls.
	grpc *grpc.Server
	// tracer makes the requests' spans (nil: tracing off), read without mu on every
	// request; set from Config.Tracer by NewHandler and Update.
	tracer  atomic.Pointer[trace.Tracer]
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
	// swept is closed when the retention sweeps (retention.go) have stopped; nil
	// without a durable store.
	swept chan struct{}
	sweeps
	// push is the push policy and its client, nil when push is off (push.go).
	push *pusher
	pushWorkers
	// fleet is the handler's part in a fleet of gateways (fleet.go); nil otherwise.
	fleet *fleetRun
	// lim keeps the principals' rate buckets and task counts (edge.go).
	lim limiter
}

// NewHandler validates cfg and returns a Handler serving it.
func NewHandler(cfg Config) (*Handler, error) {
	cfg, err := normalize(cfg)
	if err != nil {
		return nil, err
	}
	spec := specOf(cfg)
	var st store = newMemoryStore(keepFinished)
	fleet := fleetOf(cfg.Store)
	if cfg.Store != nil {
		ds, err := newDurableStore(cfg.Store, cfg.Card.Name, spec, replayEvents, fleet != nil)
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
		push: newPusher(cfg.Push),
	}
	if h.push != nil {
		cfg.Metrics.pushFailuresFrom0(cfg.Card.Name)
	}
	cfg.Metrics.edgeFrom0(cfg)
	h.cardKey, h.cardTime = cardKeyOf(cfg), time.Now()
	h.grpc = newGRPCServer(h)
	h.slotMetricsLocked()
	if fleet != nil {
		// The fleet's tasks are the store's: none is restored here, each runs where it is
		// claimed, and orphans are adopted as their runners' leases run out.
		h.startFleet(fleet)
	} else if ds, ok := st.(*durableStore); ok {
		// Tasks admitted but never started before the restart run now, in admission order.
		h.mu.Lock()
		for _, t := range ds.requeued {
			h.placeLocked(t, time.Now())
		}
		ds.requeued = nil
		h.mu.Unlock()
		if err := h.resumePushes(ds); err != nil {
			// The tasks run already; their stored webhooks wait for the next start.
			cfg.Logger.Error("a2a: push deliveries not resumed", "error", err)
		}
	}
	if cfg.Store != nil {
		h.sweep(time.Now())
		h.swept = make(chan struct{})
		h.startSweeps()
	}
	h.setTracer(cfg.Tracer)
	return h, nil
}

// cardKeyOf sums up the settings the card shows, so Update can tell whether it changed.
func cardKeyOf(cfg Config) string {
	b, _ := json.Marshal([]any{cfg.Card, authConfigured(cfg), cfg.PublicURL, cfg.CardVersion, cfg.Push != nil})
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
		logger: cfg.Logger, digest: cfg.Digest,
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
	h.setTracer(cfg.Tracer)
	if h.push != nil {
		h.push.client.CloseIdleConnections() // deliveries use the new client from now on
	}
	h.push = newPusher(cfg.Push)
	if h.push != nil {
		cfg.Metrics.pushFailuresFrom0(cfg.Card.Name)
	}
	cfg.Metrics.edgeFrom0(cfg)
	if key := cardKeyOf(cfg); key != h.cardKey {
		h.cardKey, h.cardTime = key, time.Now()
	}
	h.updateFleetLocked(cfg)
	h.fillLocked(time.Now()) // a higher concurrency starts waiting tasks now
	return nil
}

// Shutdown stops admitting tasks, waits until the admitted ones (running, waiting for
// input, queued) have ended or ctx ends (the grace period), then ends those left failed
// "interrupted", as a restart would. Streams and task reads keep working while it waits.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	h.closing = true
	// In a fleet, what this replica holds without running it goes back to the store's
	// queue, for the others, rather than waiting out the grace period here.
	h.handBackLocked()
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

// halt ends the handler's background work: the tasks' contexts, the push delivery
// workers and the retention sweeper, waited for so that the caller may close the store.
func (h *Handler) halt() {
	h.mu.Lock()
	if s := h.cfg.Shed; s != nil {
		s.queued.Add(-int64(h.lim.queued)) // what waited here waits no more
		h.lim.queued = 0
	}
	h.mu.Unlock()
	h.stop()
	h.stopFleet()
	h.stopPushes()
	if h.swept != nil {
		h.stopSweeps()
	}
}

// config returns the current configuration.
func (h *Handler) config() Config {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cfg
}

// ServeHTTP serves the card at <prefix>/.well-known/agent-card.json (and agent.json),
// the HTTP+JSON routes (docs/reference/a2a.md "HTTP+JSON (REST)") and JSON-RPC on POST
// to any other path under the prefix.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isGRPC(r) {
		h.serveGRPC(w, r)
		return
	}
	if _, ok := cardPrefix(r.URL.EscapedPath()); ok {
		h.serveCard(w, r)
		return
	}
	if taskID, blob, ok := matchFile(r.URL.EscapedPath()); ok {
		h.serveFile(w, r, taskID, blob)
		return
	}
	// A peer message to a capsule that does not take them: one refusal for every
	// operation of both HTTP bindings (gRPC answers its own way, grpc.go).
	if _, peer := peerOf(r); peer && !h.acceptsPeers(r) {
		refusePeer(w)
		return
	}
	if rt, ok := matchREST(r.URL.EscapedPath()); ok {
		h.serveREST(w, r, rt)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "this is an A2A JSON-RPC endpoint: POST a JSON-RPC 2.0 request; the agent card is at .well-known/agent-card.json", http.StatusMethodNotAllowed)
		return
	}
	cfg, who, ok := h.authenticate(w, r, "this agent needs a bearer token (Authorization: Bearer <token>), see the agent card's securitySchemes", true)
	if !ok {
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
	h.serveRPC(w, r, who, body)
}

// authenticate identifies r's caller under r's route configuration, or answers 401 with
// a Bearer challenge (RFC 6750) and why: in JSON-RPC's shape when rpc is set, as plain
// text otherwise.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, why string, rpc bool) (Config, caller, bool) {
	cfg, _ := h.configFor(r)
	who, f := identify(r, cfg)
	if f != nil {
		h.refusedAuth(r, f)
		w.Header().Set("WWW-Authenticate", f.challenge())
		if rpc {
			d, ok := parseVersion(requestVersion(r))
			if !ok {
				d = v10
			}
			writeJSON(w, http.StatusUnauthorized, d.response(nullID, nil, f.rpc(why)))
			return cfg, who, false
		}
		msg := "unauthorized: " + why
		if !f.missing {
			msg = "unauthorized: " + f.desc + " (" + why + ")"
		}
		http.Error(w, msg, http.StatusUnauthorized)
		return cfg, who, false
	}
	who, _ = asPeer(r, who)
	return cfg, who, true
}

// refusedAuth counts and logs a refused credential.
func (h *Handler) refusedAuth(r *http.Request, f *authRefusal) {
	code := f.code
	if code == "" {
		code = "bearer"
	}
	h.spec.metrics.authRefused(h.spec.capsule, code)
	h.spec.logger.Info("a2a request refused", "decision", "deny", "kind", "auth", "capsule", h.spec.capsule,
		"code", code, "reason", f.desc, "path", r.URL.Path)
}

// acceptsPeers reports whether r's route takes peer tasks (Config.AcceptPeers).
func (h *Handler) acceptsPeers(r *http.Request) bool {
	cfg, _ := h.configFor(r)
	return cfg.AcceptPeers
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
func (h *Handler) serveRPC(w http.ResponseWriter, r *http.Request, who caller, body []byte) {
	d, ok := parseVersion(requestVersion(r))
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		if !ok {
			d = v10
		}
		writeJSON(w, http.StatusOK, d.response(nil, nil, errContentType(fmt.Sprintf("Content-Type %q: JSON-RPC requests are application/json", ct), ct)))
		return
	}
	req, notify, rerr := parseRequest(body)
	if notify {
		// A notification: JSON-RPC answers none, and A2A defines no method that acts
		// without answering, so nothing runs.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	a := &answer{w: w, r: r, d: d, who: who, id: req.id}
	if !ok {
		a.d = v10
		a.fail(errVersion(requestVersion(r)), streamsInAny(req.method))
		return
	}
	if rerr != nil {
		a.fail(rerr, false)
		return
	}
	m, rerr := lookupMethod(d, req.method)
	if rerr != nil {
		a.fail(rerr, streamsInAny(req.method))
		return
	}
	h.do(a, m, req.method, req.params)
}

// isJSONType accepts application/json and any application/*+json, with parameters.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// writeJSON answers with v as JSON and status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "cannot encode the response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
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
// A fleet's task another replica runs is brought up to the store on its signals, and
// read again every mirrorRecheck should one have been missed (a read that failed). In a
// fleet a task whose store went away waits for it to start; its client is not kept
// waiting: away is the store's error (the task runs once the database is back).
func (h *Handler) waitSettled(ctx context.Context, t *task) (bool, error) {
	t.watch()
	defer t.unwatch()
	var recheck <-chan time.Time
	if h.fleet != nil {
		tick := time.NewTicker(mirrorRecheck)
		defer tick.Stop()
		recheck = tick.C
	}
	for {
		t.mu.Lock()
		st, changed := t.st.State, t.changed
		t.mu.Unlock()
		if settled(st) {
			return true, nil
		}
		if h.fleet != nil {
			if err := h.storeReady(); err != nil {
				return true, err
			}
		}
		select {
		case <-changed:
		case <-recheck:
			h.fresh(t)
		case <-ctx.Done():
			return false, nil
		}
	}
}

// mirrorRecheck is how often a waiter reads a task another replica runs again, in case
// its signal's read failed: signals, not this, bring the news.
const mirrorRecheck = time.Second
