package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Peers sends a task's messages to other capsules: the host's A2A client (package
// peer), which follows the peer's card, dials through the sender's network policy and
// presents the operator's credential for the peer. The runtime has checked the message
// against the sender's grants and limits before it calls Send.
type Peers interface {
	Send(ctx context.Context, m PeerMessage) (PeerAnswer, error)
}

// PeerMessage is one message a task sends to a peer (docs/reference/a2a.md "Peer tasks").
type PeerMessage struct {
	// URL is the peer's A2A endpoint; its card is at URL/.well-known/agent-card.json.
	URL string
	// Rules are the sender's capabilities.network.allow: the client reaches the peer's
	// card and endpoint only through them.
	Rules netpolicy.Rules
	// Text is the message; ContextID the peer context to continue ("" starts one);
	// MessageID its A2A message id ("" lets the client choose one).
	Text, ContextID, MessageID string
	// From is who sends: the sending capsule and task, the principal the task runs for,
	// and where it sits in a chain of peer tasks.
	From PeerOrigin
	// Trace is the sending task's span context: the peer's task joins its trace.
	Trace trace.SpanContext
	// Chunk receives the text the peer streams as it works (nil: none).
	Chunk func(text string)
}

// PeerOrigin is where a peer task comes from: the capsule and task that sent it, the
// principal that task runs for, and the chain of tasks that led to it, first first
// (the sender's own task last). A task a client sent has none.
type PeerOrigin struct {
	Capsule, TaskID, Principal string
	Chain                      []string
}

// Depth is how deep in a chain of peer tasks the task the origin starts is: 1 for a task a
// client's task sent, 2 for one that task's peer sent, and so on.
func (o PeerOrigin) Depth() int { return len(o.Chain) }

// PeerAnswer is what a peer answered: its task and how it ended, its text, and the file
// and data parts of its answer.
type PeerAnswer struct {
	TaskID, ContextID, State string
	Text                     string
	Parts                    []Part
}

// Peer refusals, as the sending guest or model reads them (docs/errors.md).
const (
	CodePeerUnknown    = "E-PEER-001" // send_message names no peer of the manifest
	CodePeerNotAllowed = "E-PEER-002" // the peer URL is outside capabilities.network.allow
	CodePeerDepth      = "E-PEER-003" // the chain of peer tasks would pass capabilities.limits.peer_depth
	CodePeerCalls      = "E-PEER-004" // the task already sent capabilities.limits.peer_calls messages
	CodePeerRefused    = "E-PEER-005" // the peer does not accept peer tasks
	CodePeerFailed     = "E-PEER-006" // the peer could not be reached, or answered no task
	CodePeerNone       = "E-PEER-007" // the host has no A2A client for peers (caddy capsule run)
)

// EventPeer is one message a task sent a peer, and its answer.
const EventPeer = "peer_message"

// PeerCall records one peer message (EventPeer): both tasks, so a trace reader follows
// the chain from either end.
type PeerCall struct {
	Peer       string `json:"peer"` // the manifest's name, or the URL a guest gave
	URL        string `json:"url"`
	TaskID     string `json:"task_id"`      // the sending task
	PeerTaskID string `json:"peer_task_id"` // the peer's task ("" when refused before one)
	PeerState  string `json:"peer_state,omitempty"`
	Depth      int    `json:"depth"` // the peer task's depth in its chain
	From       string `json:"from"`  // guest or model
	Status     string `json:"status"`
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// Statuses of a tool call and of a peer message.
const (
	statusPassed = "passed"
	statusError  = "error"
)

// toolSendMessage is the agent loop's tool for peers.
const toolSendMessage = "send_message"

// KindPeer is the send_message tool's kind.
const KindPeer = "peer"

// peerTool is send_message as the model sees it: the manifest's peers by name.
func (s *session) peerTool() agentTool {
	m := s.staged.Manifest
	var names []string
	var b strings.Builder
	b.WriteString("Sends a message to another agent (a peer) and returns its answer. Peers:")
	for _, p := range m.Peers {
		names = append(names, p.Name)
		b.WriteString("\n- " + p.Name)
		if p.Description != "" {
			b.WriteString(": " + p.Description)
		}
	}
	params := map[string]any{"type": "object", "required": []string{"peer", "message"}, "properties": map[string]any{
		"peer":       map[string]any{"type": "string", "enum": names, "description": "the peer's name"},
		"message":    map[string]any{"type": "string", "description": "what to ask the peer"},
		"context_id": map[string]any{"type": "string", "description": "a context id a peer answered earlier, to continue that conversation"},
	}}
	return agentTool{Name: toolSendMessage, Description: b.String(), Parameters: mustJSON(params)}
}

// offersPeers reports whether the agent loop offers send_message: the manifest lists
// peers and the host can reach them.
func (s *session) offersPeers() bool {
	return len(s.staged.Manifest.Peers) > 0 && s.peers != nil
}

// runPeerTool runs send_message for the model: the peer's answer, or the refusal.
func (s *session) runPeerTool(ctx context.Context, t *task, call agentBlock) (string, bool) {
	start := time.Now()
	var in struct {
		Peer, Message string
		ContextID     string `json:"context_id"`
	}
	if len(call.Input) == 0 || json.Unmarshal(call.Input, &in) != nil {
		return s.peerToolDone(t, call, start, PeerCall{From: "model", Status: statusError, Error: "send_message: the input is not a JSON object with peer and message"})
	}
	p := s.staged.Manifest.Peer(in.Peer)
	if p == nil {
		err := errs.New(CodePeerUnknown, "runtime", fmt.Sprintf("send_message: no peer named %q", in.Peer),
			"name one of the peers listed in the tool's description")
		return s.peerToolDone(t, call, start, PeerCall{Peer: in.Peer, From: "model", Status: statusError, Error: err.Error()})
	}
	ans, rec, err := s.sendPeer(ctx, t, p.Name, p.URL, PeerMessage{Text: in.Message, ContextID: in.ContextID}, "model")
	if err != nil {
		return s.peerToolDone(t, call, start, rec)
	}
	text, files := s.relayAnswer(t, p.Name, ans)
	var b strings.Builder
	fmt.Fprintf(&b, "Peer %s answered (its task %s, context %s, %s).", p.Name, ans.TaskID, ans.ContextID, ans.State)
	if text != "" {
		b.WriteString("\n" + text)
	}
	for _, f := range files {
		b.WriteString("\n" + f)
	}
	s.peerToolDone(t, call, start, rec)
	return b.String(), ans.State != StateCompleted
}

// peerToolDone records a send_message call as a tool call of kind peer and returns its
// error text for the model when it failed.
func (s *session) peerToolDone(t *task, call agentBlock, start time.Time, rec PeerCall) (string, bool) {
	status := statusPassed
	if rec.Status != statusPassed {
		status = statusError
	}
	s.toolCalls.Add(1)
	s.stream.Emit(EventToolCall, t.parent(), ToolCall{Turn: t.turnNo(), ToolName: toolSendMessage, Kind: KindPeer, InputBytes: len(call.Input),
		Status: status, DurationMS: time.Since(start).Milliseconds(), CallID: call.ID}, map[string]string{"input": string(call.Input)})
	return rec.Error, true
}

// sendPeer sends one message of task t to the peer at rawURL, after checking it against
// the capsule's grants and limits: the URL within network.allow, the task's calls under
// peer_calls, the chain under peer_depth and without the peer's endpoint in it already.
// Every call, refused or not, is a peer_message event.
func (s *session) sendPeer(ctx context.Context, t *task, name, rawURL string, msg PeerMessage, from string) (PeerAnswer, PeerCall, error) {
	m := s.staged.Manifest
	start := time.Now()
	origin := t.peer
	rec := PeerCall{Peer: name, URL: rawURL, TaskID: t.id, Depth: origin.Depth() + 1, From: from}
	fail := func(err error) (PeerAnswer, PeerCall, error) {
		rec.Status, rec.Error, rec.DurationMS = statusError, err.Error(), time.Since(start).Milliseconds()
		if errs.Code(err) == CodePeerNotAllowed {
			rec.Status = StatusDenied
		}
		s.stream.Emit(EventPeer, t.parent(), rec, nil)
		return PeerAnswer{}, rec, err
	}
	if s.peers == nil {
		return fail(errs.New(CodePeerNone, "runtime", "send_message: this host sends no peer messages (a capsule run on its own has no A2A client)",
			"serve the capsule from the gateway to reach its peers"))
	}
	if err := checkPeerURL(m.Capabilities.NetworkRules, t.narrow, rawURL); err != nil {
		return fail(err)
	}
	if n := t.peerCalls.Add(1); int(n) > m.Capabilities.Limits.PeerCalls {
		return fail(errs.New(CodePeerCalls, "runtime",
			fmt.Sprintf("send_message: this task has sent its %d peer messages (capabilities.limits.peer_calls)", m.Capabilities.Limits.PeerCalls),
			"answer with what the peers said so far, or raise capabilities.limits.peer_calls"))
	}
	if rec.Depth > m.Capabilities.Limits.PeerDepth {
		return fail(errs.New(CodePeerDepth, "runtime",
			fmt.Sprintf("send_message: this task is at depth %d of a chain of peer tasks (%s); a message would start depth %d, over capabilities.limits.peer_depth %d",
				origin.Depth(), strings.Join(origin.Chain, " → "), rec.Depth, m.Capabilities.Limits.PeerDepth),
			"answer the task yourself: the chain is as deep as this capsule allows"))
	}
	sc := s.spans.contextOf(t.evt)
	if !sc.IsValid() {
		sc = t.trace
	}
	msg.URL, msg.Rules, msg.Trace = rawURL, m.Capabilities.NetworkRules, sc
	msg.From = PeerOrigin{Capsule: m.Name, TaskID: t.id, Principal: t.principal, Chain: append(slices.Clone(origin.Chain), t.id)}
	msg.Chunk = func(c string) { s.stream.Emit(EventChunk, t.evt, Chunk{TaskID: t.id, Text: c, Note: true}, nil) }
	ans, err := s.peers.Send(ctx, msg)
	if err != nil {
		return fail(err)
	}
	rec.PeerTaskID, rec.PeerState, rec.Status, rec.DurationMS = ans.TaskID, ans.State, statusPassed, time.Since(start).Milliseconds()
	s.stream.Emit(EventPeer, t.parent(), rec, nil)
	return ans, rec, nil
}

// checkPeerURL refuses a peer URL that is not an http(s) URL or that rules do not grant.
func checkPeerURL(rules netpolicy.Rules, narrow *netpolicy.Rules, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return errs.New(CodePeerNotAllowed, "runtime", fmt.Sprintf("send_message: %q is not an http(s) URL of a peer", raw),
			"give the peer's A2A endpoint, e.g. https://agents.example.com/agents/summarizer/")
	}
	if err := rules.CheckURL(u); err != nil {
		return errs.New(CodePeerNotAllowed, "runtime", fmt.Sprintf("send_message: the peer %s is outside capabilities.network.allow: %v", raw, err),
			fmt.Sprintf("add %s://%s to capabilities.network.allow, or list the peer in peers with a URL it grants", u.Scheme, u.Host))
	}
	if narrow != nil {
		if err := narrow.CheckURL(u); err != nil {
			return errs.New(CodePeerNotAllowed, "runtime", fmt.Sprintf("send_message: the peer %s is outside what the route's policy lets this task's caller reach: %v", raw, err),
				"the capsule may reach it, but not for this caller: ask the operator to widen the route's policy egress")
		}
	}
	return nil
}

// relayAnswer keeps a peer's answer — its text, file and data parts — for the task's
// client (they become artifacts of the task: relayed) and writes its files to the
// workdir's peers/<task>/,
// where the task's tools can read them; it returns the text for the model and a line per
// part kept.
func (s *session) relayAnswer(t *task, peer string, ans PeerAnswer) (string, []string) {
	var lines []string
	if ans.Text != "" {
		// The peer's text too: the client gets the whole answer, whatever the model
		// makes of it.
		t.turnMu.Lock()
		t.relayed = append(t.relayed, Artifact{Name: peer + ": answer", Description: "from peer " + peer + ", task " + ans.TaskID,
			Parts: []Part{{Kind: "text", Text: ans.Text}}})
		t.turnMu.Unlock()
	}
	for i, p := range ans.Parts {
		switch p.Kind {
		case "data":
			lines = append(lines, fmt.Sprintf("[data from %s: %s]", peer, p.Data))
		case "file":
			name := inboxName(p.Name, p.MediaType)
			where := path.Join(peerDir(ans.TaskID), fmt.Sprintf("%d-%s", i, name))
			if p.URL == "" {
				if err := s.writeWork(where, p.Bytes); err != nil {
					lines = append(lines, fmt.Sprintf("[file %s from %s (%s, %d bytes): not saved: %v]", name, peer, p.MediaType, len(p.Bytes), err))
					continue
				}
				lines = append(lines, fmt.Sprintf("[file %s from %s (%s, %d bytes), saved as %s]", name, peer, p.MediaType, len(p.Bytes), where))
			} else {
				lines = append(lines, fmt.Sprintf("[file %s from %s (%s) at %s]", name, peer, p.MediaType, p.URL))
			}
		default:
			continue
		}
		t.turnMu.Lock()
		t.relayed = append(t.relayed, Artifact{Name: peer + ": " + cmp.Or(p.Name, p.Kind), Description: "from peer " + peer + ", task " + ans.TaskID,
			Parts: []Part{p}})
		t.turnMu.Unlock()
	}
	return ans.Text, lines
}

// guestPeers serves murmur:message/send for task t's guests: the same checks and records
// as send_message, the peer named by its URL (the manifest's name when it lists the URL).
// The answer's text is written to peers/<peer task>/answer.txt and its files beside it;
// its files and data are relayed to the task's client.
func (s *session) guestPeers(t *task) murmur.PeerSender {
	return func(ctx context.Context, peerURL string, m abi.PeerMessage) (abi.PeerTaskResult, error) {
		name := peerURL
		for _, p := range s.staged.Manifest.Peers {
			if p.URL == peerURL {
				name = p.Name
			}
		}
		msg := PeerMessage{Text: m.Text, MessageID: m.MessageID}
		if m.ContextID != nil {
			msg.ContextID = *m.ContextID
		}
		ans, _, err := s.sendPeer(ctx, t, name, peerURL, msg, "guest")
		var e *errs.Error
		if errors.As(err, &e) && e.Part != "" {
			// The guest reads the refusal starting with its code.
			return abi.PeerTaskResult{}, errors.New(strings.TrimPrefix(e.Error(), e.Part+": "))
		}
		if err != nil {
			return abi.PeerTaskResult{}, err
		}
		s.relayAnswer(t, name, ans)
		if err := s.writeWork(path.Join(peerDir(ans.TaskID), "answer.txt"), []byte(ans.Text)); err != nil {
			return abi.PeerTaskResult{}, fmt.Errorf("send: the peer answered (task %s, %s), but its answer could not be saved: %w", ans.TaskID, ans.State, err)
		}
		return abi.PeerTaskResult{TaskID: ans.TaskID, ContextID: ans.ContextID, State: ans.State}, nil
	}
}

// peerDir is the workdir folder a peer task's answer is saved in: peers/ and the task's
// id as inbound file names are cleaned (inboxName) — the id is the peer's word, and must
// not lead anywhere else in the workdir.
func peerDir(taskID string) string { return path.Join("peers", inboxName(taskID, "")) }

// writeWork writes data to the workdir's rel (a clean relative path), making its folders.
func (s *session) writeWork(rel string, data []byte) error {
	if err := s.prep.make(); err != nil {
		return err
	}
	root, err := s.work.Root()
	if err != nil {
		return err
	}
	if err := root.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	return guestfs.WriteOwn(root, rel, data)
}
