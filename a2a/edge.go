package a2a

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	goruntime "runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// The edge of a capsule (docs/reference/a2a.md "Authentication", "Limits", "Policy" and
// "Overload"): who a caller is beyond bearer tokens (JWTs, client certificates), whether
// a policy lets it make this request, whether its limits let it make one now, and
// whether the gateway has room for more work at all. Each refusal has its own error in
// every binding's shape, a counter, and a decision log line.

// Codes of the edge's refusals: implementation-defined JSON-RPC server errors
// (-32000…-32099), answered with their own HTTP statuses and gRPC codes.
const (
	codeUnauthenticated  = -32031
	codePermissionDenied = -32032
	codeRateLimited      = -32033
	codeTokenBudget      = -32034
	codeOverloaded       = -32035
)

// Limits bound what one principal may ask of the capsule: requests per second, tasks at
// once, and model tokens per window. The zero value limits nothing.
type Limits struct {
	// Rate is requests per second per principal (a token bucket of Burst); 0 is none.
	// Each replica of a fleet counts its own requests.
	Rate  float64
	Burst int // 0: the rate rounded up, at least 1
	// Concurrent is how many of a principal's tasks may be unfinished at once on this
	// replica (queued, running or waiting for input); 0 is none.
	Concurrent int
	// Tokens is the model tokens (input and output, as the providers report them) a
	// principal's tasks may use per Window, counted in the task store, so a fleet's
	// replicas share it; 0 is none.
	Tokens int64
	Window time.Duration // 0: 24 hours
}

// window is l's token window, defaulted.
func (l Limits) window() time.Duration {
	if l.Window <= 0 {
		return 24 * time.Hour
	}
	return l.Window
}

// Shedder refuses new tasks, gateway-wide, while too many wait or memory is short: the
// gateway answers 503 with Retry-After rather than queueing without bound. One Shedder
// is shared by every capsule's Handler, and outlives config reloads (Set changes its
// bounds); its zero value sheds nothing.
type Shedder struct {
	bounds atomic.Pointer[ShedBounds]
	queued atomic.Int64
	memMu  sync.Mutex
	memAt  time.Time
	mem    uint64
}

// ShedBounds are where a Shedder starts refusing.
type ShedBounds struct {
	// MaxQueued is how many admitted tasks may wait for a slot across every capsule
	// sharing the Shedder; 0 is no bound beyond each capsule's own.
	MaxQueued int
	// MaxMemory is the Go heap in use above which new tasks are refused; 0 is none.
	MaxMemory uint64
	// RetryAfter is what a refused client is told to wait (0: 5 s).
	RetryAfter time.Duration
}

// Set changes the bounds, for the tasks admitted from now on.
func (s *Shedder) Set(b ShedBounds) { s.bounds.Store(&b) }

// memoryEvery is how often the shedder reads the heap: reading costs a few µs, and
// memory does not change much faster.
const memoryEvery = 100 * time.Millisecond

// admit reports whether a new task may come in; why names the bound it would cross, and
// wait is what the client is told to wait.
func (s *Shedder) admit() (ok bool, why string, wait time.Duration) {
	if s == nil {
		return true, "", 0
	}
	b := s.bounds.Load()
	if b == nil {
		return true, "", 0
	}
	wait = b.RetryAfter
	if wait <= 0 {
		wait = 5 * time.Second
	}
	if b.MaxQueued > 0 && s.queued.Load() >= int64(b.MaxQueued) {
		return false, "queue", wait
	}
	if b.MaxMemory > 0 && s.heap() > b.MaxMemory {
		return false, "memory", wait
	}
	return true, "", 0
}

// heap is the heap's bytes in use, read at most every memoryEvery.
func (s *Shedder) heap() uint64 {
	s.memMu.Lock()
	defer s.memMu.Unlock()
	if now := time.Now(); now.Sub(s.memAt) >= memoryEvery {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			s.mem = sample[0].Value.Uint64()
		} else {
			var ms goruntime.MemStats
			goruntime.ReadMemStats(&ms)
			s.mem = ms.HeapAlloc
		}
		s.memAt = now
	}
	return s.mem
}

// Queued is how many admitted tasks wait for a slot across the Shedder's capsules.
func (s *Shedder) Queued() int64 { return s.queued.Load() }

// limiter holds a handler's per-principal rate buckets and unfinished task counts, and
// its token ledger when the task store keeps none.
type limiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	open    map[string]int
	ledger  map[ledgerKey]int64
	// queued is what this handler last added to its Shedder's count.
	queued int
}

type ledgerKey struct {
	key    string
	window int64
}

// bucket is one principal's token bucket.
type bucket struct {
	tokens float64
	at     time.Time
}

// maxBuckets bounds the rate buckets kept: past it, the full ones (principals idle long
// enough to have refilled) are dropped, which forgets nothing a bucket would enforce.
const maxBuckets = 1 << 16

// take spends one request of principal p's bucket, or says how long until one is there.
func (l *limiter) take(p string, lim Limits, now time.Time) (bool, time.Duration) {
	burst := float64(lim.Burst)
	if burst <= 0 {
		burst = math.Max(1, math.Ceil(lim.Rate))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[p]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			l.dropFullLocked(lim, burst, now)
		}
		b = &bucket{tokens: burst, at: now}
		l.buckets[p] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.at).Seconds()*lim.Rate)
	b.at = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / lim.Rate * float64(time.Second))
	return false, wait
}

func (l *limiter) dropFullLocked(lim Limits, burst float64, now time.Time) {
	for p, b := range l.buckets {
		if b.tokens+now.Sub(b.at).Seconds()*lim.Rate >= burst {
			delete(l.buckets, p)
		}
	}
}

// acquire counts one more unfinished task of p, unless p has max already.
func (l *limiter) acquire(p string, max int) (*limitHold, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open == nil {
		l.open = map[string]int{}
	}
	if max <= 0 || l.open[p] >= max {
		return nil, false
	}
	l.open[p]++
	return &limitHold{l: l, p: p}, true
}

// limitHold is one task's place among its principal's unfinished tasks: a task takes it
// when admitted, and it is released when the task ends, or at once when the message
// admitted no task (an answer to one waiting for input, a refusal).
type limitHold struct {
	l     *limiter
	p     string
	taken atomic.Bool
	once  sync.Once
}

// take marks the hold as a task's; nil does nothing.
func (h *limitHold) take() {
	if h != nil {
		h.taken.Store(true)
	}
}

// release gives the place back, once; nil does nothing.
func (h *limitHold) release() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		h.l.mu.Lock()
		defer h.l.mu.Unlock()
		if h.l.open[h.p]--; h.l.open[h.p] <= 0 {
			delete(h.l.open, h.p)
		}
	})
}

// releaseUnlessTaken releases a hold no task took.
func (h *limitHold) releaseUnlessTaken() {
	if h != nil && !h.taken.Load() {
		h.release()
	}
}

// Budget is a task's share of its principal's token budget (Job.Budget): the executor
// reports what each model turn used, and learns whether the budget is spent.
type Budget interface {
	// Spend adds tokens to the principal's count for the current window and returns
	// the count and the budget; an error means the count could not be kept (the task
	// then goes on: a store outage does not fail work already admitted).
	Spend(ctx context.Context, tokens int64) (spent, budget int64, err error)
}

// tokenBudget is one task's Budget: the handler's ledger under the task's principal.
type tokenBudget struct {
	h   *Handler
	key string
	lim Limits
}

func (b *tokenBudget) Spend(ctx context.Context, tokens int64) (int64, int64, error) {
	n, err := b.h.spendTokens(ctx, b.key, b.lim, tokens, time.Now())
	return n, b.lim.Tokens, err
}

// budgetKey names a principal's count of one capsule in the store's ledger: a digest,
// as short as a store's key must be however long both names are.
func budgetKey(capsule, principal string) string {
	sum := sha256.Sum256([]byte(capsule + "\x00" + principal))
	return "tokens:" + hex.EncodeToString(sum[:])
}

// spendTokens adds n to key's count of the window holding now (n 0 reads it), in the
// task store when it keeps budgets (shared by a fleet), else in memory.
func (h *Handler) spendTokens(ctx context.Context, key string, lim Limits, n int64, now time.Time) (int64, error) {
	win := now.UnixNano() / int64(lim.window())
	if b, ok := h.cfg.Store.(taskstore.Budgets); ok && h.cfg.Store != nil {
		return b.SpendTokens(ctx, key, win, n)
	}
	h.lim.mu.Lock()
	defer h.lim.mu.Unlock()
	if h.lim.ledger == nil {
		h.lim.ledger = map[ledgerKey]int64{}
	}
	k := ledgerKey{key, win}
	if n != 0 {
		// Only the current window is kept: a count of an earlier one limits nothing.
		for old := range h.lim.ledger {
			if old.window < win {
				delete(h.lim.ledger, old)
			}
		}
	}
	h.lim.ledger[k] += n
	return h.lim.ledger[k], nil
}

// windowLeft is how long until the token window holding now ends.
func windowLeft(lim Limits, now time.Time) time.Duration {
	w := int64(lim.window())
	return time.Duration(w - now.UnixNano()%w)
}

// shedQueued keeps the Shedder's count of waiting tasks in step with this handler's;
// the caller holds h.mu.
func (h *Handler) shedQueuedLocked() {
	s := h.cfg.Shed
	if s == nil {
		return
	}
	if n := h.slots.queued(); n != h.lim.queued {
		s.queued.Add(int64(n - h.lim.queued))
		h.lim.queued = n
	}
}

// methodNames are the A2A 1.0 names of the operations, what a policy sees whatever the
// binding and version.
var methodNames = map[method]string{
	mSend: "SendMessage", mStream: "SendStreamingMessage", mGet: "GetTask", mList: "ListTasks", mCancel: "CancelTask",
	mSubscribe: "SubscribeToTask", mPushSet: "CreateTaskPushNotificationConfig", mPushGet: "GetTaskPushNotificationConfig",
	mPushList: "ListTaskPushNotificationConfigs", mPushDelete: "DeleteTaskPushNotificationConfig", mExtCard: "GetExtendedAgentCard",
}

// requestFacts is what a policy reads of a request's params: the task it names, and the
// message's metadata and skill.
type requestFacts struct {
	ID      string `json:"id"`
	TaskID  string `json:"taskId"`
	Name    string `json:"name"`
	Message *struct {
		TaskID   string         `json:"taskId"`
		Metadata map[string]any `json:"metadata"`
	} `json:"message"`
}

// policyInput is the policy's view of a request.
func (h *Handler) policyInput(a *answer, m method, params json.RawMessage) *edgepolicy.Input {
	if a.policy != nil {
		return a.policy // allow and egress judge one request: its params are read once
	}
	in := &edgepolicy.Input{Principal: a.who.principal, Authenticated: a.who.authenticated, Scheme: a.who.scheme, Claims: a.who.claims,
		Method: methodNames[m], Binding: a.binding(), Version: a.d.String(), Capsule: h.spec.capsule}
	var f requestFacts
	_ = json.Unmarshal(params, &f) // what does not read names nothing; the operation reports it
	switch {
	case f.Message != nil:
		in.TaskID, in.Metadata = f.Message.TaskID, f.Message.Metadata
		if s, ok := in.Metadata["skill"].(string); ok {
			in.Skill = s
		}
	case f.TaskID != "":
		in.TaskID = f.TaskID
	case f.ID != "":
		in.TaskID = f.ID
	case f.Name != "":
		// 1.0 push configs are named tasks/{id}/pushNotificationConfigs/{configId}.
		if id, ok := taskOfName(f.Name); ok {
			in.TaskID = id
		}
	}
	a.policy = in
	return in
}

// taskOfName reads the task id of a resource name tasks/{id}[/…].
func taskOfName(name string) (string, bool) {
	const p = "tasks/"
	if len(name) <= len(p) || name[:len(p)] != p {
		return "", false
	}
	rest := name[len(p):]
	for i := range len(rest) {
		if rest[i] == '/' {
			return rest[:i], true
		}
	}
	return rest, true
}

// binding names the binding an answer goes out on.
func (a *answer) binding() string {
	switch {
	case a.r.Context().Value(grpcRequestKey{}) != nil:
		return "grpc"
	case a.rest:
		return "http+json"
	}
	return "jsonrpc"
}

// guard applies the route's policy and the capsule's rate limit to one operation; false
// when it answered the request with a refusal.
func (h *Handler) guard(a *answer, m method, params json.RawMessage) bool {
	cfg := a.config(h)
	stream := m == mStream || m == mSubscribe
	if cfg.Policy != nil {
		in := h.policyInput(a, m, params)
		ok, err := cfg.Policy.Allow(in)
		if !ok {
			why := "the policy does not allow it"
			if err != nil {
				why = err.Error()
			}
			h.decision(a, "policy", in.Method, in.TaskID, why)
			h.spec.metrics.policyDenied(h.spec.capsule)
			if in.TaskID != "" {
				// A task the caller may not touch is one it cannot know of.
				a.fail(errTaskNotFound(in.TaskID), stream)
				return false
			}
			a.fail(newRPCError(codePermissionDenied, "Permission denied",
				fmt.Sprintf("the capsule's policy does not let principal %q call %s", a.who.principal, in.Method), map[string]any{"method": in.Method}), stream)
			return false
		}
	}
	if cfg.Limits.Rate > 0 {
		if ok, wait := h.lim.take(a.who.principal, cfg.Limits, time.Now()); !ok {
			h.decision(a, "rate", methodNames[m], "", fmt.Sprintf("over %g requests per second", cfg.Limits.Rate))
			h.spec.metrics.limited(h.spec.capsule, "rate")
			a.fail(errLimited(codeRateLimited, "Rate limited",
				fmt.Sprintf("principal %q is over this capsule's limit of %g requests per second; retry after the time Retry-After gives", a.who.principal, cfg.Limits.Rate), wait), stream)
			return false
		}
	}
	return true
}

// admitEdge checks a new task against the gateway's load and the principal's task and
// token limits before it exists; hold (nil when nothing is counted) is its place among
// the principal's unfinished tasks.
func (h *Handler) admitEdge(a *answer, stream bool) (hold *limitHold, ok bool) {
	cfg := a.config(h)
	if ok, why, wait := cfg.Shed.admit(); !ok {
		h.spec.metrics.shed(h.spec.capsule, why)
		h.decision(a, "overload", "SendMessage", "", "gateway "+why+" bound reached")
		rerr := errLimited(codeOverloaded, "Overloaded",
			fmt.Sprintf("the gateway is at its %s bound and takes no new tasks now; retry after the time Retry-After gives", why), wait)
		rerr.status = http.StatusServiceUnavailable
		a.fail(rerr, stream)
		return nil, false
	}
	lim := cfg.Limits
	if lim.Tokens > 0 {
		now := time.Now()
		spent, err := h.spendTokens(a.r.Context(), budgetKey(h.spec.capsule, a.who.principal), lim, 0, now)
		if err == nil && spent >= lim.Tokens {
			h.decision(a, "tokens", "SendMessage", "", fmt.Sprintf("%d of %d tokens spent", spent, lim.Tokens))
			h.spec.metrics.limited(h.spec.capsule, "tokens")
			a.fail(errLimited(codeTokenBudget, "Token budget spent",
				fmt.Sprintf("principal %q has used %d of its %d model tokens of this window on this capsule; the window ends in %s", a.who.principal, spent, lim.Tokens, windowLeft(lim, now).Round(time.Second)),
				windowLeft(lim, now)), stream)
			return nil, false
		}
	}
	if lim.Concurrent > 0 {
		// In a fleet the store counts the principal's unfinished tasks on every replica;
		// this replica's holds count those it admitted that the store may not hold yet.
		max := lim.Concurrent
		if oc, ok := h.cfg.Store.(taskstore.OpenCounter); ok && h.fleet != nil {
			if n, err := oc.OpenTasks(a.r.Context(), h.spec.capsule, a.who.principal); err == nil {
				max -= n
			}
		}
		hold, ok := h.lim.acquire(a.who.principal, max)
		if !ok {
			h.decision(a, "concurrency", "SendMessage", "", fmt.Sprintf("%d tasks unfinished", lim.Concurrent))
			h.spec.metrics.limited(h.spec.capsule, "concurrency")
			a.fail(errLimited(codeRateLimited, "Rate limited",
				fmt.Sprintf("principal %q has %d unfinished tasks on this capsule, its limit; wait for one to finish", a.who.principal, lim.Concurrent), time.Second), stream)
			return nil, false
		}
		return hold, true
	}
	return nil, true
}

// egressFor is what the route's policy narrows a new task's network reach to (nil: not
// narrowed); false when it answered the request with a refusal.
func (h *Handler) egressFor(a *answer, params json.RawMessage, stream bool) (*[]string, bool) {
	cfg := a.config(h)
	if !cfg.Policy.HasEgress() {
		return nil, true
	}
	m := mSend
	if stream {
		m = mStream
	}
	in := h.policyInput(a, m, params)
	rules, narrowed, err := cfg.Policy.Egress(in)
	if err != nil {
		// Never wider on error: the task is refused.
		h.decision(a, "policy", in.Method, "", err.Error())
		h.spec.metrics.policyDenied(h.spec.capsule)
		a.fail(newRPCError(codePermissionDenied, "Permission denied",
			fmt.Sprintf("the capsule's policy could not say where principal %q's task may reach: %v", a.who.principal, err), nil), stream)
		return nil, false
	}
	if !narrowed {
		return nil, true
	}
	list := make([]string, 0, len(rules))
	for _, r := range rules {
		list = append(list, r.String())
	}
	return &list, true
}

// budgetFor is the Budget of a task of principal p admitted under cfg, nil with no
// token limit.
func (h *Handler) budgetFor(cfg Config, p string) Budget {
	if cfg.Limits.Tokens <= 0 {
		return nil
	}
	return &tokenBudget{h: h, key: budgetKey(h.spec.capsule, p), lim: cfg.Limits}
}

// errLimited is a refusal the client may retry after wait.
func errLimited(code int, name, detail string, wait time.Duration) *rpcError {
	secs := max(1, int64(math.Ceil(wait.Seconds())))
	e := newRPCError(code, name, detail, map[string]any{"retryAfterSeconds": strconv.FormatInt(secs, 10)})
	e.retryAfter = secs
	return e
}

// decision logs one refusal: who, what, which bound, why.
func (h *Handler) decision(a *answer, kind, method, taskID, why string) {
	h.spec.logger.Info("a2a request refused", "decision", "deny", "kind", kind, "capsule", h.spec.capsule,
		"principal", a.who.principal, "method", method, "binding", a.binding(), "task", taskID, "reason", why)
}

// authRefusal is why a request's credentials were refused: code is the E-AUTH code, desc
// RFC 6750's error_description; missing says no credentials came at all.
type authRefusal struct {
	code, desc string
	missing    bool
}

// challenge is the WWW-Authenticate value of a refusal (RFC 6750 §3).
func (f *authRefusal) challenge() string {
	if f.missing {
		return `Bearer realm="capsule"`
	}
	return `Bearer realm="capsule", error="invalid_token", error_description="` + f.desc + `"`
}

// rpc is the refusal as an A2A error.
func (f *authRefusal) rpc(why string) *rpcError {
	meta := map[string]any{}
	if f.code != "" {
		meta["authCode"] = f.code
	}
	detail := why
	if !f.missing {
		detail = f.desc + " (" + why + ")"
	}
	return newRPCError(codeUnauthenticated, "Unauthenticated", detail, meta)
}

// identifyEdge names the caller by a client certificate or a JWT, when the route takes
// them; handled is false when neither applies to r.
func identifyEdge(r *http.Request, cfg Config, token string, hasToken bool) (c caller, f *authRefusal, handled bool) {
	if cfg.ClientCert != "" && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
		id, err := edgeauth.ClientCert(r.TLS, cfg.ClientCert)
		if err != nil {
			return caller{}, &authRefusal{code: edgeauth.CodeNoClientCert, desc: edgeauth.Description(err)}, true
		}
		return caller{principal: principalName(id.Principal), authenticated: true, scheme: "mtls", claims: id.Claims}, nil, true
	}
	if cfg.JWT != nil && hasToken {
		id, err := cfg.JWT.Verify(r.Context(), token)
		if err != nil {
			return caller{}, &authRefusal{code: errs.Code(err), desc: edgeauth.Description(err)}, true
		}
		return caller{principal: principalName(id.Principal), authenticated: true, scheme: "jwt", claims: id.Claims}, nil, true
	}
	return caller{}, nil, false
}

// RequestInfo is what the handler tells its host of one request once served, for an
// access log: the principal it acted for and the task it created or named.
type RequestInfo struct {
	mu              sync.Mutex
	principal, task string
	set             bool
}

type infoKey struct{}

// WithRequestInfo returns ctx carrying info, which the handler fills as it serves.
func WithRequestInfo(ctx context.Context, info *RequestInfo) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// Principal is the principal the request acted for, and whether one was established
// (anonymous callers have "" and true when authenticated by a shared token).
func (i *RequestInfo) Principal() (string, bool) {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.principal, i.set
}

// TaskID is the task the request created or named ("" for none).
func (i *RequestInfo) TaskID() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.task
}

// noteCaller records r's caller in its RequestInfo, if it has one.
func noteCaller(r *http.Request, who caller) {
	if i, ok := r.Context().Value(infoKey{}).(*RequestInfo); ok {
		i.mu.Lock()
		i.principal, i.set = who.principal, true
		i.mu.Unlock()
	}
}

// noteTask records the task r created or named in its RequestInfo, if it has one.
func noteTask(r *http.Request, id string) {
	if i, ok := r.Context().Value(infoKey{}).(*RequestInfo); ok && id != "" {
		i.mu.Lock()
		i.task = id
		i.mu.Unlock()
	}
}
