package runtime

import (
	"maps"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// ReceiptURI names the A2A extension under which a finished task's metadata carries its
// receipt (docs/reference/receipts.md); the agent card declares it.
const ReceiptURI = "https://github.com/capsulegate/capsulegate/blob/main/docs/reference/receipts.md"

// EventReceipt is a task's receipt, sent right after each of its task_end events: what
// the task cost and touched from its start (docs/reference/receipts.md).
const EventReceipt = "task_receipt"

// Receipt is what one task cost and touched, from its task_start to its task_end
// (across the runs of a reopened task). Each figure is defined in
// docs/reference/receipts.md; the JSON names are the A2A extension's.
type Receipt struct {
	// TraceID is the W3C trace id the task's spans belong to ("" when the task ran
	// untraced and no client sent a traceparent).
	TraceID string `json:"traceId,omitempty"`
	// WallSeconds is the time from task_start to task_end.
	WallSeconds float64 `json:"wallSeconds"`
	// GuestSeconds is the time inside the session's guest calls while the task ran.
	GuestSeconds float64 `json:"guestSeconds"`
	// PeakGuestMemoryBytes is the largest linear memory any of those calls reached.
	PeakGuestMemoryBytes uint64 `json:"peakGuestMemoryBytes"`
	// Tokens are the model tokens the task's turns and compactions used, per model.
	Tokens []ModelTokens `json:"tokens"`
	// ToolCalls counts the task's tool calls by kind (wasm, shell, native, skill,
	// artifact_manager, peer, unknown); a kind with none is left out.
	ToolCalls map[string]int `json:"toolCalls"`
	// NetworkBytesSent and NetworkBytesReceived are what the session's policy dialers
	// (guests' HTTP, the driver's provider calls) and its policy proxy (shell tools,
	// harnesses) exchanged with the hosts they reached while the task ran.
	NetworkBytesSent     int64 `json:"networkBytesSent"`
	NetworkBytesReceived int64 `json:"networkBytesReceived"`
	// NetworkDenials counts the connections the network policy refused the task.
	NetworkDenials int `json:"networkDenials"`
	// Traps counts the task's guest calls that failed, by reason.
	Traps map[string]int `json:"traps"`
}

// ModelTokens is one model's tokens in a receipt.
type ModelTokens struct {
	Model  string `json:"model"`
	Input  int    `json:"input"`
	Output int    `json:"output"`
}

// usageMark is where a task's meters stood when it started: its receipt's measured
// figures are what they counted since.
type usageMark struct {
	start          time.Time
	sent, received int64
}

// markUsage starts metering a task: the session's guest meter counts afresh, and its
// traffic is read from here on. Tasks of a session run one at a time.
func (s *session) markUsage() usageMark {
	s.meter.Take()
	return usageMark{start: time.Now(), sent: s.traffic.Sent(), received: s.traffic.Received()}
}

// measured is the part of a task's receipt the meters give, so far; the receipt sink adds
// what the task's events tell.
func (s *session) measured(t *task, now time.Time, traceID string) *Receipt {
	t.usage = mergeUsage(t.usage, s.meter.Take())
	return &Receipt{TraceID: traceID, WallSeconds: now.Sub(t.mark.start).Seconds(), GuestSeconds: t.usage.Guest.Seconds(),
		PeakGuestMemoryBytes: t.usage.PeakMemory, Traps: t.usage.Traps,
		NetworkBytesSent: s.traffic.Sent() - t.mark.sent, NetworkBytesReceived: s.traffic.Received() - t.mark.received}
}

// mergeUsage adds b to a: the meter is taken at each run's end of a reopened task.
func mergeUsage(a, b wasm.Usage) wasm.Usage {
	a.Guest += b.Guest
	a.PeakMemory = max(a.PeakMemory, b.PeakMemory)
	for r, n := range b.Traps {
		if a.Traps == nil {
			a.Traps = map[string]int{}
		}
		a.Traps[r] += n
	}
	return a
}

// receiptSink completes each task's receipt from the session's events: tokens from its
// inference and compaction events, tool calls from its tool_call events and the model's
// artifact_manager events, denials from its network_denied events. At task_end it fills the receipt the event carries and sends it
// on as a task_receipt event, which the metrics sink and the trace record.
type receiptSink struct {
	model string // the capsule's inference.model: what its turns' tokens are counted under
	// cur is the running task's tally; tasks of a session run one at a time.
	cur *tally
}

// tally is what a task's events told so far.
type tally struct {
	in, out  int
	tools    map[string]int
	denials  int
	reported bool
}

func newReceiptSink(s *Staged) *receiptSink {
	r := &receiptSink{model: "unknown"}
	if inf := s.Manifest.Inference; inf != nil && inf.Model != "" {
		r.model = inf.Model
	}
	return r
}

func (r *receiptSink) Event(e *Event) error {
	switch d := e.Data.(type) {
	case TaskStart:
		r.cur = &tally{tools: map[string]int{}}
	case Inference:
		if r.cur != nil {
			r.cur.in, r.cur.out = r.cur.in+d.InputTokens, r.cur.out+d.OutputTokens
			r.cur.reported = true
		}
	case Compaction:
		if r.cur != nil && d.Summariser == SummariserDriver {
			r.cur.in, r.cur.out = r.cur.in+d.SummaryInput, r.cur.out+d.SummaryOutput
			r.cur.reported = true
		}
	case ToolCall:
		if r.cur != nil {
			r.cur.tools[d.Kind]++
		}
	case ArtifactCall:
		// A call the model asked for is one of its tool calls (a guest's is not), made
		// through the artifact manager's tools: no tool_call event records it.
		if r.cur != nil && d.From == "model" {
			r.cur.tools[KindManager]++
		}
	case NetworkDenied:
		if r.cur != nil {
			r.cur.denials++
		}
	case TaskEnd:
		if d.receipt == nil || r.cur == nil {
			return nil
		}
		rc := d.receipt
		rc.Tokens = []ModelTokens{}
		if r.cur.reported {
			rc.Tokens = append(rc.Tokens, ModelTokens{Model: r.model, Input: r.cur.in, Output: r.cur.out})
		}
		rc.ToolCalls, rc.NetworkDenials = maps.Clone(r.cur.tools), r.cur.denials
		if rc.Traps == nil {
			rc.Traps = map[string]int{}
		}
		e.Then(EventReceipt, *rc, nil)
	}
	return nil
}

// traceID is the trace task t's spans belong to: its invoke_agent span's, else the
// client's traceparent's, else "".
func (s *session) traceID(t *task, req TaskRequest) string {
	if sc := s.spans.contextOf(t.evt); sc.IsValid() {
		return sc.TraceID().String()
	}
	if req.Trace.IsValid() {
		return req.Trace.TraceID().String()
	}
	return ""
}
