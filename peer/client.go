// Package peer is the A2A client capsules delegate through (runtime.Peers): it reads the
// peer's agent card, picks a binding the card lists (JSON-RPC or HTTP+JSON, A2A 1.0 or
// 0.3) with the official A2A Go SDK, reaches the peer only through the sending capsule's
// network policy — or, for a peer this process serves, through the gateway's own HTTP
// server without a socket — and marks the message as a peer's with the operator's
// credential for that peer (docs/reference/a2a.md "Peer tasks").
package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	capsulea2a "github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime"
)

// Credential is what the gateway presents to the peers under one URL prefix: a header and
// its value (Authorization: Bearer …). It comes from the operator's config, never from a
// guest.
type Credential struct {
	Prefix        string
	Header, Value string
}

// Client sends peer messages. The zero value reaches every peer over the network with no
// credential.
type Client struct {
	// Credentials are matched against the peer URL, the longest prefix first.
	Credentials []Credential
	// Local returns the handler serving u when this process serves it (the gateway's own
	// HTTP server), or nil to reach u over the network.
	Local func(u *url.URL) http.Handler
	// Timeout bounds one message from card to answer (0: 10 minutes).
	Timeout time.Duration

	// transports are the connection pools of the network policies messages went out
	// under, by the policy's rules: a capsule's messages reuse connections (and their TLS
	// sessions) instead of dialling anew each time, and never share a pool with another
	// policy's. cards are the peers' cards, read once a minute at most.
	mu         sync.Mutex
	transports map[string]*http.Transport
	cards      map[string]cachedCard
}

// cachedCard is a peer's card and when it was read.
type cachedCard struct {
	card *a2a.AgentCard
	at   time.Time
}

// Bounds of the client's caches: a card is read again after cardTTL; beyond maxPools
// network policies, the pools are closed and the map started afresh.
const (
	cardTTL  = time.Minute
	maxPools = 64
)

// transport is the pool of the policy rules.
func (c *Client) transport(rules netpolicy.Rules) *http.Transport {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = r.String()
	}
	key := strings.Join(parts, " ")
	c.mu.Lock()
	defer c.mu.Unlock()
	if tr, ok := c.transports[key]; ok {
		return tr
	}
	if c.transports == nil || len(c.transports) >= maxPools {
		for _, tr := range c.transports {
			tr.CloseIdleConnections()
		}
		c.transports = map[string]*http.Transport{}
	}
	tr := netpolicy.NewTransport(&netpolicy.Dialer{Rules: rules})
	c.transports[key] = tr
	return tr
}

// CloseIdle closes the idle connections of every pool: the app's config is going away. A
// message still in flight, or one sent after, works on: a pool dials again when needed.
func (c *Client) CloseIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, tr := range c.transports {
		tr.CloseIdleConnections()
	}
}

// cachedCardOf is u's card read less than cardTTL ago, or nil.
func (c *Client) cachedCardOf(u string) *a2a.AgentCard {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.cards[u]; ok && time.Since(cc.at) < cardTTL {
		return cc.card
	}
	return nil
}

// keepCard remembers u's card; forget drops it (a message that failed may have met a
// peer whose card changed).
func (c *Client) keepCard(u string, card *a2a.AgentCard) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cards == nil || len(c.cards) >= maxPools {
		c.cards = map[string]cachedCard{}
	}
	c.cards[u] = cachedCard{card: card, at: time.Now()}
}

func (c *Client) forget(u string) {
	c.mu.Lock()
	delete(c.cards, u)
	c.mu.Unlock()
}

// maxCard bounds a peer's agent card.
const maxCard = 1 << 20

// Send sends m and returns the peer's answer: its task's final state, text, and file and
// data parts. A refusal is an *errs.Error with one of runtime's E-PEER codes.
func (c *Client) Send(ctx context.Context, m runtime.PeerMessage) (runtime.PeerAnswer, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u, err := url.Parse(m.URL)
	if err != nil {
		return runtime.PeerAnswer{}, failed(m.URL, err)
	}
	tr := &marking{c: c, m: m}
	if h := c.local(u); h != nil {
		tr.next = &inProcess{h: h, rules: m.Rules}
	} else {
		tr.next = c.transport(m.Rules)
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	card := c.cachedCardOf(m.URL)
	if card == nil {
		if card, err = c.card(ctx, hc, m.URL); err != nil {
			return runtime.PeerAnswer{}, tr.explain(m.URL, err)
		}
		c.keepCard(m.URL, card)
	}
	ans, err := c.send(ctx, hc, tr, card, m)
	if err != nil {
		c.forget(m.URL)
	}
	return ans, err
}

// send sends m to the peer of card over hc.
func (c *Client) send(ctx context.Context, hc *http.Client, tr *marking, card *a2a.AgentCard, m runtime.PeerMessage) (runtime.PeerAnswer, error) {
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}))
	if err != nil {
		return runtime.PeerAnswer{}, failed(m.URL, fmt.Errorf("no binding of its card is one this client speaks: %w", err))
	}
	defer client.Destroy()

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(m.Text))
	if m.MessageID != "" {
		msg.ID = m.MessageID
	}
	if m.ContextID != "" {
		msg.ContextID = m.ContextID
	}
	req := &a2a.SendMessageRequest{Message: msg}
	var taskID, contextID string
	var answer *a2a.Message
	if card.Capabilities.Streaming {
		// Streamed: the peer's text reaches the sender's subscribers as it comes.
		for ev, err := range client.SendStreamingMessage(ctx, req) {
			if err != nil {
				return runtime.PeerAnswer{}, tr.explain(m.URL, err)
			}
			switch e := ev.(type) {
			case *a2a.Task:
				taskID, contextID = string(e.ID), e.ContextID
			case *a2a.TaskStatusUpdateEvent:
				taskID, contextID = string(e.TaskID), e.ContextID
			case *a2a.TaskArtifactUpdateEvent:
				taskID, contextID = string(e.TaskID), e.ContextID
				if m.Chunk != nil {
					for _, p := range e.Artifact.Parts {
						if t := p.Text(); t != "" {
							m.Chunk(t)
						}
					}
				}
			case *a2a.Message:
				answer = e
			}
		}
	} else {
		res, err := client.SendMessage(ctx, req)
		if err != nil {
			return runtime.PeerAnswer{}, tr.explain(m.URL, err)
		}
		switch r := res.(type) {
		case *a2a.Task:
			taskID, contextID = string(r.ID), r.ContextID
		case *a2a.Message:
			answer = r
		}
	}
	if answer != nil {
		return answerOf(string(answer.TaskID), answer.ContextID, "completed", answer.Parts), nil
	}
	if taskID == "" {
		return runtime.PeerAnswer{}, failed(m.URL, errors.New("it answered neither a task nor a message"))
	}
	task, err := client.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(taskID)})
	if err != nil {
		return runtime.PeerAnswer{}, tr.explain(m.URL, err)
	}
	var parts a2a.ContentParts
	for _, a := range task.Artifacts {
		parts = append(parts, a.Parts...)
	}
	state := strings.ToLower(strings.TrimPrefix(string(task.Status.State), "TASK_STATE_"))
	if task.Status.State != a2a.TaskStateCompleted {
		if task.Status.Message != nil {
			parts = append(parts, task.Status.Message.Parts...)
		}
	}
	if contextID == "" {
		contextID = task.ContextID
	}
	return answerOf(taskID, contextID, state, parts), nil
}

// answerOf turns an answer's parts into the runtime's: its text parts joined, its file
// and data parts kept.
func answerOf(taskID, contextID, state string, parts a2a.ContentParts) runtime.PeerAnswer {
	ans := runtime.PeerAnswer{TaskID: taskID, ContextID: contextID, State: state}
	var text []string
	for _, p := range parts {
		switch {
		case p.Text() != "":
			text = append(text, p.Text())
		case p.Raw() != nil:
			ans.Parts = append(ans.Parts, runtime.Part{Kind: "file", Name: p.Filename, MediaType: p.MediaType, Bytes: p.Raw()})
		case p.URL() != "":
			ans.Parts = append(ans.Parts, runtime.Part{Kind: "file", Name: p.Filename, MediaType: p.MediaType, URL: string(p.URL())})
		case p.Data() != nil:
			b, _ := json.Marshal(p.Data())
			ans.Parts = append(ans.Parts, runtime.Part{Kind: "data", MediaType: "application/json", Data: b})
		}
	}
	ans.Text = strings.Join(text, "\n")
	return ans
}

// card reads the peer's agent card: A2A 1.0's, or 0.3's read into 1.0's shape.
func (c *Client) card(ctx context.Context, hc *http.Client, endpoint string) (*a2a.AgentCard, error) {
	u, err := url.JoinPath(endpoint, "/.well-known/agent-card.json")
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxCard+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, &statusError{code: resp.StatusCode, body: body}
	}
	if len(body) > maxCard {
		return nil, fmt.Errorf("its agent card is over %d bytes", maxCard)
	}
	body = withoutSecurityRequirements(body)
	var card a2a.AgentCard
	if err := json.Unmarshal(body, &card); err == nil && len(card.SupportedInterfaces) > 0 {
		return &card, nil
	}
	old, err := a2av0.NewAgentCardParser()(body)
	if err != nil || len(old.SupportedInterfaces) == 0 {
		return nil, fmt.Errorf("its agent card lists no interface (%v)", err)
	}
	return old, nil
}

// withoutSecurityRequirements drops the card's securityRequirements: A2A 1.0 writes each
// scheme's scopes as a StringList ({"list": […]}), which a2a-go v2.4 reads as a bare list
// and refuses. The client needs none of it: what it presents is the operator's
// credential for the peer.
func withoutSecurityRequirements(card []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(card, &m) != nil {
		return card
	}
	if _, ok := m["securityRequirements"]; !ok {
		return card
	}
	delete(m, "securityRequirements")
	out, err := json.Marshal(m)
	if err != nil {
		return card
	}
	return out
}

// local is the handler serving u in this process, if any.
func (c *Client) local(u *url.URL) http.Handler {
	if c.Local == nil || u.Scheme != "http" {
		return nil
	}
	return c.Local(u)
}

// credential is the header the operator gave for peer URL u: the longest matching prefix.
func (c *Client) credential(u string) (Credential, bool) {
	var best Credential
	found := false
	for _, cr := range c.Credentials {
		if strings.HasPrefix(u, cr.Prefix) && (!found || len(cr.Prefix) > len(best.Prefix)) {
			best, found = cr, true
		}
	}
	return best, found
}

// statusError is an answer that was not 200, with its body for the refusal check.
type statusError struct {
	code int
	body []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("HTTP %d: %.200s", e.code, bytes.TrimSpace(e.body))
}

// marking puts the peer headers, the operator's credential and the trace context on every
// request of one message, and remembers whether the peer refused peer tasks.
type marking struct {
	c    *Client
	m    runtime.PeerMessage
	next http.RoundTripper

	mu      sync.Mutex
	refused bool
}

func (t *marking) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	h := req.Header
	h.Set(capsulea2a.HeaderTaskOrigin, "peer")
	h.Set(capsulea2a.HeaderTaskTrust, "trusted")
	h.Set(capsulea2a.HeaderPeerCapsule, t.m.From.Capsule)
	h.Set(capsulea2a.HeaderPeerPrincipal, url.QueryEscape(t.m.From.Principal))
	h.Set(capsulea2a.HeaderPeerChain, strings.Join(t.m.From.Chain, ","))
	if cr, ok := t.c.credential(t.m.URL); ok {
		h.Set(cr.Header, cr.Value)
	}
	if t.m.Trace.IsValid() {
		propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(req.Context(), t.m.Trace), propagation.HeaderCarrier(h))
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	// A 403 may be the consent refusal: read it (it is short) and hand it on unchanged.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if capsulea2a.PeerRefused(resp.StatusCode, body) {
		t.mu.Lock()
		t.refused = true
		t.mu.Unlock()
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

// explain turns a failure of the message to url into the sender's refusal.
func (t *marking) explain(u string, err error) error {
	t.mu.Lock()
	refused := t.refused
	t.mu.Unlock()
	if refused {
		return errs.New(runtime.CodePeerRefused, "peer", fmt.Sprintf("send_message: the peer %s does not accept tasks from other capsules", u),
			"ask its operator to set exports.peer_tasks.accept: true in its manifest, or answer without it")
	}
	return failed(u, err)
}

func failed(u string, err error) error {
	return errs.Wrap(err, runtime.CodePeerFailed, "peer", fmt.Sprintf("send_message: the peer %s could not be reached or did not answer", u),
		"check the peer's URL and that it is serving; the error says what failed")
}
