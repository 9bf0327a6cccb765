package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/taskstore"
)

// PushPolicy is where a capsule's push notifications may go and how their delivery is
// retried (docs/reference/a2a.md "Push notifications").
type PushPolicy struct {
	// Allow is the operator's push.allow rules: a webhook URL must match one, and a name
	// resolving to a private, loopback or metadata address is refused unless the rule
	// names that address (netpolicy's address rule).
	Allow netpolicy.Rules
	// Resolver looks up webhook hosts; nil is the system's.
	Resolver netpolicy.Resolver
	// Backoff is the first wait before a failed delivery is retried (default 1 s),
	// doubling up to MaxBackoff (default 5 min); after Attempts tries (default 8) the
	// event is dropped and counted.
	Backoff, MaxBackoff time.Duration
	Attempts            int
	// Timeout bounds one POST to a webhook (default 10 s).
	Timeout time.Duration
}

// Defaults of PushPolicy and the bound on configs per task.
const (
	defaultPushBackoff    = time.Second
	defaultPushMaxBackoff = 5 * time.Minute
	defaultPushAttempts   = 8
	defaultPushTimeout    = 10 * time.Second
	maxPushConfigs        = 10              // per task (docs/reference/a2a.md "Push notifications")
	pushResolveTimeout    = 5 * time.Second // the set-time lookup of a webhook's name
)

// withDefaults fills in the zero fields of p.
func (p PushPolicy) withDefaults() PushPolicy {
	if p.Backoff <= 0 {
		p.Backoff = defaultPushBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = defaultPushMaxBackoff
	}
	if p.MaxBackoff < p.Backoff {
		p.MaxBackoff = p.Backoff
	}
	if p.Attempts <= 0 {
		p.Attempts = defaultPushAttempts
	}
	if p.Timeout <= 0 {
		p.Timeout = defaultPushTimeout
	}
	return p
}

// pusher is a handler's push policy and the HTTP client that delivers under it.
type pusher struct {
	policy PushPolicy
	client *http.Client
}

// newPusher builds the delivery client: every connection is dialed through a
// netpolicy.Dialer over the same rules as the set-time check, so a name re-pointed at a
// private address after the check (DNS rebinding) is refused when it connects; no proxy
// from the environment; redirects are never followed (a 3xx is a failed delivery).
func newPusher(p *PushPolicy) *pusher {
	if p == nil {
		return nil
	}
	pol := p.withDefaults()
	tr := netpolicy.NewTransport(&netpolicy.Dialer{Rules: pol.Allow, Resolver: pol.Resolver})
	return &pusher{policy: pol, client: &http.Client{
		Transport:     tr,
		Timeout:       pol.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// pushConfig is one webhook of a task, dialect-neutral, as the store keeps it.
type pushConfig struct {
	ID          string   `json:"id"`
	URL         string   `json:"url"`
	Token       string   `json:"token,omitempty"`
	Schemes     []string `json:"schemes,omitempty"` // 0.3 schemes; 1.0's one scheme
	Credentials string   `json:"credentials,omitempty"`
	// Dialect is the A2A version the config was set in: its notifications are shaped
	// for it ("0.3" or "1.0").
	Dialect string `json:"dialect"`
}

func (c *pushConfig) dialect() dialect {
	if c.Dialect == v10.String() {
		return v10
	}
	return v03
}

// pushState is a config as a task holds it (under the task's lock), with its delivery.
type pushState struct {
	cfg       pushConfig
	delivered uint64        // seq of the newest event delivered (or given up on)
	gone      chan struct{} // closed when the config is deleted or replaced
	running   bool          // a delivery worker serves it
}

// pushRow is a config as the task store keeps it.
type pushRow = taskstore.Push

// Wire shapes of the configs.

type wireAuth03 struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials,omitempty"`
}

type wirePush03 struct {
	ID             string      `json:"id,omitempty"`
	URL            string      `json:"url"`
	Token          string      `json:"token,omitempty"`
	Authentication *wireAuth03 `json:"authentication,omitempty"`
}

type wireTaskPush03 struct {
	TaskID                 string     `json:"taskId"`
	PushNotificationConfig wirePush03 `json:"pushNotificationConfig"`
}

type wireAuth10 struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

type wirePush10 struct {
	ID             string      `json:"id,omitempty"`
	TaskID         string      `json:"taskId,omitempty"`
	URL            string      `json:"url"`
	Token          string      `json:"token,omitempty"`
	Authentication *wireAuth10 `json:"authentication,omitempty"`
	Tenant         string      `json:"tenant,omitempty"`
}

// render shapes c for dialect d (0.3 TaskPushNotificationConfig, 1.0 the flat one).
func (c *pushConfig) render(d dialect, taskID string) any {
	if d == v10 {
		w := wirePush10{ID: c.ID, TaskID: taskID, URL: c.URL, Token: c.Token}
		if len(c.Schemes) > 0 || c.Credentials != "" {
			w.Authentication = &wireAuth10{Scheme: firstNonEmpty(append(c.Schemes, "")...), Credentials: c.Credentials}
		}
		return w
	}
	w := wireTaskPush03{TaskID: taskID, PushNotificationConfig: wirePush03{ID: c.ID, URL: c.URL, Token: c.Token}}
	if len(c.Schemes) > 0 || c.Credentials != "" {
		w.PushNotificationConfig.Authentication = &wireAuth03{Schemes: c.Schemes, Credentials: c.Credentials}
	}
	return w
}

// parsePushConfig reads a config object of dialect d: 0.3 PushNotificationConfig, 1.0
// TaskPushNotificationConfig (flat); where names the field for errors.
func parsePushConfig(d dialect, raw json.RawMessage, where string) (pushConfig, string, *rpcError) {
	c := pushConfig{Dialect: d.String()}
	taskID := ""
	if d == v10 {
		var w wirePush10
		if err := strictUnmarshal(raw, &w); err != nil {
			return c, "", errInvalidParams(where + ": " + err.Error())
		}
		c.ID, c.URL, c.Token, taskID = w.ID, w.URL, w.Token, w.TaskID
		if a := w.Authentication; a != nil {
			if a.Scheme == "" {
				return c, "", errInvalidParams(where + ".authentication.scheme is required, such as \"Bearer\"")
			}
			c.Schemes, c.Credentials = []string{a.Scheme}, a.Credentials
		}
	} else {
		var w wirePush03
		if err := strictUnmarshal(raw, &w); err != nil {
			return c, "", errInvalidParams(where + ": " + err.Error())
		}
		c.ID, c.URL, c.Token = w.ID, w.URL, w.Token
		if a := w.Authentication; a != nil {
			c.Schemes, c.Credentials = a.Schemes, a.Credentials
		}
	}
	if c.URL == "" {
		return c, "", errInvalidParams(where + ".url is required: the webhook the notifications are POSTed to")
	}
	if !validID(c.ID) || strings.ContainsAny(c.Token+c.Credentials+strings.Join(c.Schemes, ""), "\r\n") {
		return c, "", errInvalidParams(fmt.Sprintf("%s: id, token and authentication must be at most %d printable characters", where, maxIDLen))
	}
	return c, taskID, nil
}

// checkURL is the set-time check of a webhook URL (docs/reference/a2a.md "Push
// notifications"): absolute http or https without userinfo, allowed by a push.allow
// rule by name and by every address it is or resolves to. Delivery checks again when it
// connects.
func (p *pusher) checkURL(ctx context.Context, raw string) *rpcError {
	bad := func(why, fix string) *rpcError {
		return errInvalidParams(fmt.Sprintf("push notification URL %q %s; %s", raw, why, fix))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return bad("is not an absolute http or https URL", "send the full webhook URL, such as https://hooks.example.com/a2a")
	}
	if u.User != nil {
		return bad("holds a user name or password", "pass credentials in the config's token or authentication instead")
	}
	host := u.Hostname()
	port := 0
	if s := u.Port(); s != "" {
		if port, err = strconv.Atoi(s); err != nil {
			return bad("has a port that is not a number", "write a port in 1–65535")
		}
	}
	origin := u.Scheme + "://" + strings.ToLower(u.Host)
	refused := func(err error) *rpcError {
		var e *errs.Error
		if !errors.As(err, &e) {
			return bad("cannot be checked: "+err.Error(), "send a URL whose host is a valid name or address")
		}
		switch e.Code {
		case netpolicy.CodeNotAllowed:
			return bad("matches no push.allow rule of this gateway", fmt.Sprintf("if notifications should go there, add %q to push.allow (the capsule app's push option)", origin))
		case netpolicy.CodeRestricted:
			return bad(strings.TrimPrefix(e.Msg, "network policy: "), "the operator allows the address itself in push.allow "+
				"(such as \"http://127.0.0.1:8080\") and the webhook URL names that address, or a localhost rule for loopback")
		}
		return bad(strings.TrimPrefix(e.Msg, "network policy: "), e.Fix)
	}
	if _, err := p.policy.Allow.Check(u.Scheme, host, port, nil); err != nil {
		return refused(err)
	}
	name, ip, _ := netpolicy.CanonicalHost(host)
	if ip.IsValid() {
		return nil // Check judged the literal address itself
	}
	res := p.policy.Resolver
	if res == nil {
		res = net.DefaultResolver
	}
	lctx, cancel := context.WithTimeout(ctx, pushResolveTimeout)
	defer cancel()
	found, err := res.LookupNetIP(lctx, "ip", name)
	if err != nil || len(found) == 0 {
		return nil // not resolvable now: judged by name, and again at each connect
	}
	addrs := make([]netip.Addr, 0, len(found))
	for _, a := range found {
		addrs = append(addrs, a.Unmap())
	}
	if _, err := p.policy.Allow.Check(u.Scheme, host, port, addrs); err != nil {
		return refused(err)
	}
	return nil
}

// pushParams are the params of the config methods in either dialect: 0.3 get, list and
// delete name the task by id and the config by pushNotificationConfigId; 0.3 set sends
// {taskId, pushNotificationConfig}; 1.0 sends {taskId, id} or the flat config.
type pushParams struct {
	ID                       string          `json:"id"`
	TaskID                   string          `json:"taskId"`
	PushNotificationConfigID string          `json:"pushNotificationConfigId"`
	PushNotificationConfig   json.RawMessage `json:"pushNotificationConfig"`
	PageSize                 int             `json:"pageSize"`
	PageToken                string          `json:"pageToken"`
}

// doPush serves the push-notification config methods (docs/reference/a2a.md "Push
// notifications"): only the task's owner sees and changes its configs.
func (h *Handler) doPush(a *answer, m method, name string, params json.RawMessage) {
	p := h.pusherNow()
	if p == nil {
		a.fail(errPushNotSupported(name+": this agent offers no push notifications (its card says capabilities.pushNotifications false); poll the task or stream it"), false)
		return
	}
	var in pushParams
	if err := strictUnmarshal(params, &in); err != nil {
		a.fail(errInvalidParams(err.Error()), false)
		return
	}
	// Which task and which config: 0.3 names the task "id" (taskId in set), 1.0 "taskId"
	// and the config "id".
	taskID, cfgID := in.TaskID, in.PushNotificationConfigID
	if a.d == v03 && m != mPushSet {
		taskID = in.ID
	} else if a.d == v10 {
		cfgID = in.ID
	}
	if taskID == "" {
		a.fail(errInvalidParams(map[dialect]string{v03: "params.id (the task's id) is required", v10: "params.taskId is required"}[a.d]), false)
		return
	}
	t := h.lookup(taskID, a.who)
	if t == nil {
		a.fail(errTaskNotFound(taskID), false)
		return
	}
	h.loadPushes(t)
	switch m {
	case mPushSet:
		raw, where := params, "params"
		if a.d == v03 {
			raw, where = in.PushNotificationConfig, "params.pushNotificationConfig"
		}
		c, _, rerr := parsePushConfig(a.d, raw, where)
		if rerr != nil {
			a.fail(rerr, false)
			return
		}
		if rerr := p.checkURL(a.r.Context(), c.URL); rerr != nil {
			a.fail(rerr, false)
			return
		}
		if rerr := h.setPush(t, &c, false); rerr != nil {
			a.fail(rerr, false)
			return
		}
		a.ok(c.render(a.d, t.id))
	case mPushGet:
		t.mu.Lock()
		ps := findPush(t, cfgID)
		if ps == nil && cfgID == "" && a.d == v03 && len(t.pushes) > 0 {
			ps = t.pushes[0] // 0.3 get without a config id: the task's first
		}
		var c pushConfig
		if ps != nil {
			c = ps.cfg
		}
		t.mu.Unlock()
		if ps == nil {
			a.fail(errPushConfigNotFound(t.id, cfgID), false)
			return
		}
		a.ok(c.render(a.d, t.id))
	case mPushList:
		t.mu.Lock()
		out := make([]any, 0, len(t.pushes))
		for _, ps := range t.pushes {
			out = append(out, ps.cfg.render(a.d, t.id))
		}
		t.mu.Unlock()
		if a.d == v10 {
			a.ok(map[string]any{"configs": out, "nextPageToken": ""}) // at most maxPushConfigs: one page
			return
		}
		a.ok(out)
	case mPushDelete:
		if cfgID == "" {
			a.fail(errInvalidParams(map[dialect]string{v03: "params.pushNotificationConfigId is required", v10: "params.id is required"}[a.d]), false)
			return
		}
		if err := h.deletePush(t, cfgID); err != nil {
			a.fail(errStore(err), false)
			return
		}
		if a.d == v10 {
			a.ok(struct{}{})
			return
		}
		a.ok(nil)
	}
}

func errPushConfigNotFound(taskID, id string) *rpcError {
	return newRPCError(codeTaskNotFound, "Task not found", fmt.Sprintf("task %s has no push notification config %q", taskID, id), map[string]any{"taskId": taskID, "id": id})
}

// pusherNow is the push policy in force, nil when push is off.
func (h *Handler) pusherNow() *pusher {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.push
}

// findPush returns t's config with id (t.mu held).
func findPush(t *task, id string) *pushState {
	for _, ps := range t.pushes {
		if ps.cfg.ID == id {
			return ps
		}
	}
	return nil
}

// loadPushes reads t's configs from the store the first time they are needed: a task
// restored from a durable store comes back without them.
func (h *Handler) loadPushes(t *task) {
	t.mu.Lock()
	defer t.mu.Unlock()
	h.loadPushesLocked(t)
}

func (h *Handler) loadPushesLocked(t *task) {
	if t.pushesLoaded || t.store == nil {
		t.pushesLoaded = true
		return
	}
	t.pushesLoaded = true
	t.pushes = append(t.pushes, pushStates(t.store.pushes(t))...)
}

// pushStates reads stored push configs into delivery states; a row that does not decode
// as its config is skipped.
func pushStates(rows []pushRow) []*pushState {
	var out []*pushState
	for _, r := range rows {
		var c pushConfig
		if json.Unmarshal(r.Data, &c) != nil || c.ID != r.ID {
			continue
		}
		out = append(out, &pushState{cfg: c, delivered: r.Delivered, gone: make(chan struct{})})
	}
	return out
}

// setPush files c on t, replacing a config of the same id, and starts its delivery;
// it returns once the config is durable.
func (h *Handler) setPush(t *task, c *pushConfig, fromStart bool) *rpcError {
	t.mu.Lock()
	w, rerr := h.attachPushLocked(t, c, fromStart)
	t.mu.Unlock()
	if rerr != nil {
		return rerr
	}
	if err := w.wait(); err != nil {
		return errStore(err)
	}
	h.signalPush(t)
	return nil
}

// attachPushLocked files c on t (t.mu held) and starts its delivery, returning the
// store's write of it. A config set with the task (inline in the send that created it,
// fromStart) gets every event of the task; one set later, the events after it.
func (h *Handler) attachPushLocked(t *task, c *pushConfig, fromStart bool) (*durable, *rpcError) {
	if c.ID == "" {
		c.ID = ids.New("push_")
	}
	h.loadPushesLocked(t)
	old := findPush(t, c.ID)
	if old == nil && len(t.pushes) >= maxPushConfigs {
		return nil, errInvalidParams(fmt.Sprintf("task %s already has %d push notification configs, the most it may have; delete one first, or set one with the id of an existing config to replace it", t.id, maxPushConfigs))
	}
	ps := &pushState{cfg: *c, gone: make(chan struct{})}
	if !fromStart {
		ps.delivered = t.seq
	}
	if old != nil {
		close(old.gone)
		for i := range t.pushes {
			if t.pushes[i] == old {
				t.pushes[i] = ps
			}
		}
	} else {
		t.pushes = append(t.pushes, ps)
	}
	var w *durable
	if t.store != nil {
		w = t.store.putPush(t, ps)
	}
	h.startPushLocked(t, ps)
	return w, nil
}

// deletePush removes t's config id; deleting one that is not there succeeds (A2A 1.0
// makes delete idempotent).
func (h *Handler) deletePush(t *task, id string) error {
	t.mu.Lock()
	var w *durable
	if ps := findPush(t, id); ps != nil {
		close(ps.gone)
		for i := range t.pushes {
			if t.pushes[i] == ps {
				t.pushes = append(t.pushes[:i], t.pushes[i+1:]...)
				break
			}
		}
		if t.store != nil {
			w = t.store.dropPush(t, id)
		}
	}
	t.mu.Unlock()
	if err := w.wait(); err != nil {
		return err
	}
	h.signalPush(t)
	return nil
}

// startPushLocked starts ps's delivery worker unless its task has nothing left to send:
// it is finished and every event up to its last was delivered (t.mu held).
func (h *Handler) startPushLocked(t *task, ps *pushState) {
	if t.mirror {
		return // delivered by the replica running the task
	}
	if ps.running || (terminal(t.st.State) && ps.delivered >= t.seq) {
		return
	}
	h.pushMu.Lock()
	defer h.pushMu.Unlock()
	if h.pushStopped {
		return
	}
	ps.running = true
	sub := t.subscribeLocked(ps.delivered + 1)
	start := t.snapshotLocked()
	h.pushers.Add(1)
	go func() {
		defer h.pushers.Done()
		h.deliver(t, ps, sub, start)
	}()
}

// deliver is one config's delivery worker: a subscriber of the task's stream like an SSE
// response, it POSTs each event, once durable, to the webhook, in order, retrying with
// backoff; an event still failing after the policy's attempts is dropped and counted. It
// follows the task past input-required and stops at a terminal state, when the config is
// deleted, or when the handler halts. Lagged notices are not sent; the resync after one
// is.
func (h *Handler) deliver(t *task, ps *pushState, sub *subscription, view *snapshot) {
	defer sub.close()
	ctx, cancel := context.WithCancel(h.base)
	defer cancel()
	go func() {
		select {
		case <-ps.gone:
			cancel()
		case <-ctx.Done():
		}
	}()
	var lastWrite *durable
	defer func() { _ = lastWrite.wait() }() // Shutdown returns once the cursor is stored
	for {
		evs, changed := sub.pull()
		for _, e := range evs {
			if e.kind == evLagged {
				continue
			}
			if err := e.durable.wait(); err != nil {
				// Never sent: the event is not stored. Delivery resumes from the cursor on
				// the next start.
				t.spec.logger.Error("a2a push delivery stopped: the task store failed", "task", t.id, "config", ps.cfg.ID, "error", err)
				return
			}
			if ctx.Err() != nil {
				return
			}
			view = applyEvent(view, e)
			if !h.post(ctx, t, ps, e, view) && ctx.Err() != nil {
				return // stopped mid-delivery: the event is sent again on the next start
			}
			ends := endsPush(e)
			t.mu.Lock()
			ps.delivered = e.seq
			if t.store != nil && findPush(t, ps.cfg.ID) == ps {
				cursor := e.seq
				if ends {
					cursor = deliveredAll // a start need not look at this config again
				}
				lastWrite = t.store.pushDelivered(t, ps.cfg.ID, cursor)
			}
			t.mu.Unlock()
			if ends {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// endsPush reports whether e leaves the task terminal: delivery follows a task past
// input-required, unlike a stream.
func endsPush(e event) bool {
	switch e.kind {
	case evStatus:
		return terminal(e.status.State)
	case evTask:
		return terminal(e.task.Status.State)
	}
	return false
}

// applyEvent returns the task as it stands after e, for 0.3 notifications, which carry
// the whole task.
func applyEvent(v *snapshot, e event) *snapshot {
	switch e.kind {
	case evTask:
		return e.task
	case evStatus:
		c := *v
		c.Status = e.status
		return &c
	case evArtifact:
		c := *v
		c.Artifacts = append([]artifact(nil), v.Artifacts...)
		for i := range c.Artifacts {
			if c.Artifacts[i].ID == e.art.ID {
				if e.append {
					c.Artifacts[i].Text += e.art.Text
				} else {
					c.Artifacts[i] = e.art
				}
				return &c
			}
		}
		c.Artifacts = append(c.Artifacts, e.art)
		return &c
	}
	return v
}

// post delivers e to ps's webhook, retrying with exponential backoff; false when it
// gave up (counted in capsule_push_failures_total) or ctx ended.
func (h *Handler) post(ctx context.Context, t *task, ps *pushState, e event, view *snapshot) bool {
	d := ps.cfg.dialect()
	// A webhook reads large files at the endpoint the task was created through.
	links := newLinker(firstNonEmpty(h.config().PublicURL, t.url), time.Now())
	var body any
	if d == v10 {
		body = d.event(links.event(e, t.id), t.id, t.contextID) // a StreamResponse
	} else {
		body = d.task(links.snapshot(view), nil, true) // 0.3 sends the whole task
	}
	b, err := json.Marshal(body)
	if err != nil {
		return false
	}
	p := h.pusherNow()
	if p == nil {
		return false
	}
	wait := p.policy.Backoff
	var last error
	for try := 1; ; try++ {
		if last = h.postOnce(trace.ContextWithRemoteSpanContext(ctx, t.trace), p, ps, b); last == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if try >= p.policy.Attempts {
			break
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false
		}
		wait = min(2*wait, p.policy.MaxBackoff)
	}
	t.spec.metrics.pushFailed(t.spec.capsule)
	t.spec.logger.Warn("a2a push notification dropped", "task", t.id, "config", ps.cfg.ID, "event", e.seq, "attempts", p.policy.Attempts, "error", last)
	return false
}

// postOnce makes one POST; only a 2xx answer is an acknowledgement.
func (h *Handler) postOnce(ctx context.Context, p *pusher, ps *pushState, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ps.cfg.URL, strings.NewReader(string(body)))
	if err != nil {
		return fmt.Errorf("a2a: push request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The task's trace context, so a webhook's own spans join the task's trace.
	traceContext.Inject(ctx, propagation.HeaderCarrier(req.Header))
	if ps.cfg.Token != "" {
		req.Header.Set("X-A2A-Notification-Token", ps.cfg.Token)
	}
	if ps.cfg.dialect() == v10 && len(ps.cfg.Schemes) > 0 {
		req.Header.Set("Authorization", strings.TrimSpace(ps.cfg.Schemes[0]+" "+ps.cfg.Credentials))
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("a2a: push to %s: %w", ps.cfg.URL, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("a2a: push to %s: HTTP %d", ps.cfg.URL, resp.StatusCode)
	}
	return nil
}

// deliveredAll is the stored cursor of a config whose task ended and whose last event was
// delivered (or given up on): nothing is left to send, whatever the task's last seq.
const deliveredAll = ^uint64(0)

// resumePushes gives back their workers to the stored configs with events left to
// deliver (NewHandler, durable store): delivery resumes after each one's cursor. Configs
// whose delivery ended are skipped without reading their tasks, so a start costs nothing
// for the finished tasks a store retains.
func (h *Handler) resumePushes(ds *durableStore) error {
	taskIDs := map[string]bool{}
	if err := ds.allPushes(func(r pushRow) bool {
		if r.Delivered != deliveredAll {
			taskIDs[r.TaskID] = true
		}
		return true
	}); err != nil {
		return err
	}
	for id := range taskIDs {
		h.mu.Lock()
		t := h.store.get(id)
		h.mu.Unlock()
		if t == nil {
			continue
		}
		t.mu.Lock()
		h.loadPushesLocked(t)
		for _, ps := range t.pushes {
			h.startPushLocked(t, ps)
		}
		t.mu.Unlock()
	}
	return nil
}

// stopPushes ends the delivery workers and waits for them (and their cursors' writes),
// so that the caller may close the store.
func (h *Handler) stopPushes() {
	h.pushMu.Lock()
	h.pushStopped = true
	h.pushMu.Unlock()
	h.pushers.Wait()
}

// pushWorkers is the bookkeeping of a handler's delivery workers: pushMu guards
// pushStopped, so that no worker starts once stopPushes waits for them.
type pushWorkers struct {
	pushMu      sync.Mutex
	pushStopped bool
	pushers     sync.WaitGroup
}
