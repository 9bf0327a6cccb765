// Package a2a serves the A2A (Agent2Agent) protocol for one hosted capsule as a plain
// http.Handler: the agent card, JSON-RPC 2.0 and HTTP+JSON (REST) in the 0.3 and 1.0
// dialects, SSE streams, and the task registry and queue. It knows nothing of Caddy or of how tasks run: an
// Executor does that. docs/reference/a2a.md describes the wire behaviour.
package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/edgepolicy"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Config.CardVersion values: CardV10 serves the card with the A2A 1.0 fields only to
// every client; CardV03 serves the mixed 0.3 + 1.0 card to clients that do not ask for
// 1.0.
const (
	CardV10 = "1.0"
	CardV03 = "0.3"
)

// Acceptance values of Lifecycle.Acceptance, the manifest's task_acceptance
// (docs/reference/manifest.md "Lifecycle").
const (
	AcceptNone   = "none"
	AcceptSingle = "single"
	AcceptQueue  = "queue"
)

// ErrInputTimeout is returned by Job.Input when no answer came within
// Lifecycle.InputTimeout; the task has then already failed with "input-timeout".
var ErrInputTimeout = errors.New("a2a: input-timeout")

// DefaultMaxBody is the request body limit when Config.MaxBody is 0.
const DefaultMaxBody = 1 << 20

// Executor runs the tasks of one capsule (the runtime implements it).
type Executor interface {
	Execute(ctx context.Context, job *Job) Outcome
}

// Job is one task handed to an Executor.
type Job struct {
	TaskID, ContextID string
	// Principal is who the task belongs to ("" is the anonymous principal): contexts are
	// per principal, so an executor keeping state per context keys it by both.
	Principal string
	// Text is the text parts of the user's message, joined with "\n".
	Text string
	// MessageID is the messageId the client gave the message that started the task.
	MessageID string
	// Parts are every part of that message in order when it holds more than text (a file,
	// structured data); nil when Text is all of it.
	Parts []Part
	// URL is the capsule's public A2A endpoint as the client that sent the task reached
	// it (scheme, host and route prefix), for MURMUR_CAPSULE_URL.
	URL string
	// History holds the earlier completed turns of this context, oldest first, when the
	// conversation is threaded; nil when stateless.
	History []Turn
	// Chunk streams answer text the capsule produces as it works to the task's SSE
	// subscribers, as chunks of its "answer" artifact.
	Chunk func(text string)
	// Thinking streams the capsule's reasoning as a working status update, its part
	// marked with metadata {"thinking": true} (docs/reference/a2a.md "Streams").
	Thinking func(text string)
	// Note streams a progress note that is not answer text (a reopened task's next turn)
	// as a working status update.
	Note func(text string)
	// Previous is what the context's task before this one left on the context's folder
	// (Outcome.Mark) and the gateway that ran it, when another gateway of a fleet did;
	// zero otherwise.
	Previous Previous
	// Trace is the span context the task runs under: the traceparent of the message's
	// metadata, else the server span of the request that created it (invalid without
	// tracing).
	Trace trace.SpanContext
	// Peer is where the task comes from when another capsule's runtime sent it (nil for a
	// client's task); Principal is then derived from it (docs/reference/a2a.md "Peer tasks").
	Peer *PeerOrigin
	// Input moves the task to input-required with prompt and blocks until the client
	// answers (a message with this task id, or any message in this context id while the
	// task waits). It returns the answer, or an error when ctx ends or the input timeout
	// passes (ErrInputTimeout; the task has then failed with "input-timeout").
	Input func(ctx context.Context, prompt string) (Answer, error)
	// Budget is the task's share of its principal's token budget (Config.Limits.Tokens):
	// the executor reports each model turn's tokens to it; nil without a budget.
	Budget Budget
	// Egress, when Narrowed, is what the route's policy narrowed the task's network
	// reach to: its connections must pass these rules as well as the capsule's own.
	Egress   netpolicy.Rules
	Narrowed bool
}

// Previous names the mark a context's earlier task left on the context's folder and the
// gateway it ran on.
type Previous struct {
	Mark, Gateway string
}

// Answer is a client's answer to input-required: the message it sent.
type Answer struct {
	// Text is its text parts, joined with "\n".
	Text      string
	MessageID string
	// Parts are every part in order when it holds more than text; nil when Text is all.
	Parts []Part
}

// Artifact is one output of a task beyond its text answer.
type Artifact struct {
	Name, Description string
	Parts             []Part
}

// Turn is one completed exchange of a threaded conversation.
type Turn struct {
	User, Agent string
	Thread
}

// Thread is what an executor keeps of a completed task for the next task of its threaded
// context, beyond its text; the handler stores it without reading it.
type Thread struct {
	// Messages is the task's whole conversation in the executor's format (the runtime:
	// the driver protocol's messages, tool calls and results included); nil when there is
	// none, or when it exceeds MaxThreadMessages and only the text is kept.
	Messages json.RawMessage
	// Continuation is the executor's handle on the conversation as it stands after the
	// task (the runtime: the driver's continuation_id); "" for none.
	Continuation string
	// ContinuationBy names who issued Continuation, so another issuer is not handed it.
	ContinuationBy string
	// Compacted says Messages is the whole conversation so far as a compaction left it
	// (the runtime: a summary, the messages kept, what followed), so the next task starts
	// from this turn's messages rather than every turn's.
	Compacted bool
}

// MaxThreadMessages bounds a turn's Thread.Messages: a larger one is not kept, and the
// turn keeps its text alone, so a context's history stays bounded.
const MaxThreadMessages = 256 << 10

// Outcome is how Execute ended.
type Outcome struct {
	// State is "completed" or "failed"; anything else counts as failed. The handler
	// itself decides "canceled" when it canceled ctx, and then ignores the outcome.
	State string
	// Text is the answer (the task's artifact) or the error message (its status message).
	Text string
	// Artifacts are the task's outputs beyond Text, in order: files, data, more text.
	Artifacts []Artifact
	// Message answers the client of a completed task with a Message (Text's part, then
	// every artifact's parts) instead of the Task, where A2A allows it: a blocking
	// message/send or SendMessage. Streams and other reads still see the task.
	Message bool
	// Thread is kept with the turn of a completed task in a threaded context.
	Thread Thread
	// Mark is what the task left on its context's folder ("" for nothing), kept with the
	// task so that the context's next task on another gateway can look for it.
	Mark string
	// Metadata are members of the finished task's metadata, each under the URI of an
	// extension the card declares (Card.Extensions): a client that does not know one
	// skips it. Kept with the task; the final status update carries them too.
	Metadata map[string]json.RawMessage
}

// Card is what the agent card says about the capsule.
type Card struct {
	Name, Description, Version string
	Skills                     []Skill
	// OutputModes are the media types of what the capsule answers beyond text/plain, the
	// card's defaultOutputModes after text/plain.
	OutputModes []string
	// Extensions are the optional extensions the card declares beside the principals
	// statement: those whose URIs key Outcome.Metadata.
	Extensions []Extension
}

// Extension is an A2A extension the agent card declares (capabilities.extensions).
type Extension struct {
	URI, Description string
}

// Skill is one skill listed on the agent card.
type Skill struct {
	ID, Name, Description string
	Tags                  []string
}

// Lifecycle is how the capsule admits tasks (docs/reference/a2a.md "Sending").
type Lifecycle struct {
	// Acceptance is "none", "single" (the default when empty) or "queue".
	Acceptance string
	// QueueDepth is how many tasks of one context may wait beyond its running one under
	// "queue" (0 means 1).
	QueueDepth int
	// InputTimeout bounds the wait for an answer to input-required; 0 waits forever.
	InputTimeout time.Duration
	// Threaded keeps completed turns per context id and hands them to Job.History.
	Threaded bool
	// Concurrency is how many tasks, each of its own context, run side by side; 0 means
	// GOMAXPROCS. Acceptance and QueueDepth apply within one context.
	Concurrency int
}

// Config configures a Handler.
type Config struct {
	// Tracer makes the OpenTelemetry spans of A2A requests (nil: none); a task's Job
	// carries the span context it runs under (Job.Trace).
	Tracer trace.TracerProvider
	// GRPC is the gRPC target (host:port) the card lists for the gRPC binding, where the
	// host program serves the handler's gRPC calls over HTTP/2 (docs/reference/a2a.md
	// "gRPC"); "" lists none. The handler answers gRPC calls either way.
	GRPC string
	// AcceptPeers lets other capsules' runtimes send the capsule tasks (the manifest's
	// exports.peer_tasks.accept); a peer message is refused with 403 otherwise.
	AcceptPeers bool
	Card        Card
	Executor    Executor
	Lifecycle   Lifecycle
	// MaxBody caps request bodies; larger ones are answered 413 before parsing
	// (0 = DefaultMaxBody). A capsule taking files (Inputs) takes bodies larger by the
	// base64 size of Inputs.MaxMessageBytes.
	MaxBody int64
	// Bearer is a token shared by all clients, who are then one principal, the anonymous
	// one; "" = none. With Bearer or Tokens set every request but the card's must carry
	// one of them; the card stays public and declares the scheme.
	Bearer string
	// Tokens are named bearer tokens, each its own principal (docs/reference/a2a.md
	// "Principals").
	Tokens []Token
	// Principal, when set and no token is configured, returns the principal an
	// authentication in front of the handler established for r (Caddy's
	// http.auth.user.id), "" when none: the caller is then anonymous.
	Principal func(r *http.Request) string
	// JWT, when set, takes bearer tokens that are none of Bearer and Tokens as JWTs,
	// verified against their issuer's keys; the principal is the claim it names
	// (docs/reference/a2a.md "Authentication").
	JWT *edgeauth.JWT
	// ClientCert, when set, names the principal of a request whose TLS connection
	// carries a verified client certificate by that certificate: "cn", "uri", "dns" or
	// "email" says which of its names (edgeauth.ClientCert).
	ClientCert string
	// Policy decides which requests a principal may make (edgepolicy; nil allows all),
	// and may narrow the egress of its tasks (Job.Egress).
	Policy *edgepolicy.Policy
	// Limits bound each principal's requests, unfinished tasks and model tokens.
	Limits Limits
	// Shed, shared by every capsule of a gateway, refuses new tasks while too many wait
	// or memory is short (nil: never).
	Shed *Shedder
	// Push, when set, allows push notifications and says where they may go
	// (docs/reference/a2a.md "Push notifications"); nil refuses push configs.
	Push *PushPolicy
	// PublicURL, when set, is the endpoint URL the card and Job.URL name whatever the
	// request says: for layouts the request cannot reveal.
	PublicURL string
	// Origin returns the URL the client sent r to (scheme, host, path as the client wrote
	// them, before proxies and route rewrites); nil, or a nil result, means
	// RequestOrigin(r, nil, false): the request as the handler sees it, forwarded headers
	// ignored.
	Origin func(r *http.Request) *url.URL
	// CardVersion "1.0" serves the strict 1.0 card to every client; "0.3" serves it to
	// clients asking for 1.0 (A2A-Version) and the mixed 0.3 + 1.0 card to the rest; ""
	// serves the mixed card to clients asking for 0.3 and the strict card to the rest.
	CardVersion string
	Metrics     *Metrics
	Logger      *slog.Logger
	// Inputs is what the capsule reads beyond text: files and data parts, their media types
	// and limits (docs/reference/a2a.md "Parts"). The zero value reads text only.
	Inputs Inputs
	// Store, when set, keeps the capsule's tasks, their event journals and threaded turns
	// durably, under the capsule key Card.Name (docs/reference/a2a.md "Durable tasks");
	// nil keeps them in memory only. NewHandler reads it; Update ignores it. The caller
	// opens and closes it (after Shutdown).
	Store taskstore.Store
	// Retention and MaxTasks bound what Store keeps of the capsule (used only with a
	// Store): finished tasks last updated longer than Retention ago are removed, and then
	// the oldest beyond MaxTasks, with their journals and the turns of conversations no
	// task left belongs to; a task not finished yet is never removed. 0 is no bound. A
	// sweep runs at NewHandler and then every Retention/24 (at most an hour) until
	// Shutdown; Update changes the bounds of the next sweeps.
	Retention time.Duration
	MaxTasks  int
	// Digest names the capsule version (a digest of its files), recorded with each task
	// it admits; with a taskstore.Fleet as Store, a replica claims the tasks admitted
	// under its own digest, and others as Versions says (docs/reference/a2a.md "Several
	// gateways").
	Digest   string
	Versions taskstore.Versions
}

// normalize validates cfg and fills in its defaults.
func normalize(cfg Config) (Config, error) {
	var list errs.List
	bad := func(code, msg, fix string) { list = append(list, errs.New(code, "a2a", msg, fix)) }
	if cfg.Executor == nil {
		bad(CodeNoExecutor, "no executor configured", "pass the runtime's executor in Config.Executor")
	}
	if cfg.Card.Name == "" {
		bad(CodeCard, "the agent card has no name", "set Card.Name to the capsule's name")
	}
	for i, s := range cfg.Card.Skills {
		if s.ID == "" || s.Name == "" {
			bad(CodeCard, fmt.Sprintf("card skill %d has no id or no name", i), "give every skill an id and a name")
		}
	}
	switch cfg.Lifecycle.Acceptance {
	case "":
		cfg.Lifecycle.Acceptance = AcceptSingle
	case AcceptNone, AcceptSingle, AcceptQueue:
	default:
		bad(CodeAcceptance, fmt.Sprintf("task acceptance %q is not none, single or queue", cfg.Lifecycle.Acceptance), "use none, single or queue")
	}
	if cfg.Lifecycle.QueueDepth < 0 {
		bad(CodeRange, fmt.Sprintf("queue depth %d is negative", cfg.Lifecycle.QueueDepth), "write a positive queue depth")
	} else if cfg.Lifecycle.QueueDepth == 0 {
		cfg.Lifecycle.QueueDepth = 1
	}
	if cfg.Lifecycle.Concurrency < 0 {
		bad(CodeRange, fmt.Sprintf("concurrency %d is negative", cfg.Lifecycle.Concurrency), "write a positive number of tasks, or 0 for one per CPU")
	} else if cfg.Lifecycle.Concurrency == 0 {
		cfg.Lifecycle.Concurrency = runtime.GOMAXPROCS(0)
	}
	if cfg.Lifecycle.InputTimeout < 0 {
		bad(CodeRange, fmt.Sprintf("input timeout %s is negative", cfg.Lifecycle.InputTimeout), "write a positive timeout, or 0 to wait forever")
	}
	if cfg.Retention < 0 {
		bad(CodeRange, fmt.Sprintf("retention %s is negative", cfg.Retention), "write a positive duration, or 0 to keep tasks forever")
	}
	if cfg.MaxTasks < 0 {
		bad(CodeRange, fmt.Sprintf("max tasks %d is negative", cfg.MaxTasks), "write a positive number of tasks, or 0 for no limit")
	}
	if l := cfg.Limits; l.Rate < 0 || l.Burst < 0 || l.Concurrent < 0 || l.Tokens < 0 || l.Window < 0 {
		bad(CodeRange, fmt.Sprintf("a limit is negative (rate %g, burst %d, concurrent %d, tokens %d, window %s)", l.Rate, l.Burst, l.Concurrent, l.Tokens, l.Window),
			"write positive limits, or 0 for none")
	}
	if cfg.ClientCert != "" {
		if err := edgeauth.CheckCertField(cfg.ClientCert); err != nil {
			list = append(list, errs.Find(err, edgeauth.CodeConfig))
		}
	}
	if cfg.MaxBody < 0 {
		bad(CodeRange, fmt.Sprintf("max body %d is negative", cfg.MaxBody), "write a positive size, or 0 for 1 MiB")
	} else if cfg.MaxBody == 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if strings.ContainsFunc(cfg.Bearer, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		bad(CodeBearerToken, "the bearer token holds whitespace or control characters", "use a token of visible characters only")
	}
	list = append(list, checkTokens(cfg)...)
	if cfg.PublicURL != "" {
		u, err := CheckPublicURL(cfg.PublicURL)
		if err != nil {
			list = append(list, err.(*errs.Error))
		}
		cfg.PublicURL = u
	}
	switch cfg.CardVersion {
	case "", CardV10, CardV03:
	default:
		bad(CodeCard, fmt.Sprintf("card version %q is not served", cfg.CardVersion), `use "1.0" for the strict 1.0 card to every client, "0.3" for the mixed card to clients that do not ask for 1.0, or leave it empty`)
	}
	var inBad []string
	cfg.Inputs, inBad = cfg.Inputs.normalize()
	for _, b := range inBad {
		bad(CodeInputs, b, "fix the capsule's a2a section (docs/reference/manifest.md \"A2A\")")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if len(list) > 0 {
		return cfg, list
	}
	return cfg, nil
}

// CheckPublicURL validates a public endpoint URL (Config.PublicURL) and returns it
// normalised: an empty path becomes "/".
func CheckPublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return s, errs.New(CodePublicURL, "a2a", fmt.Sprintf("public URL %q is not an absolute http or https URL without query, fragment or user", s),
			"write the URL clients post to, such as https://agents.example.com/hello/")
	}
	if u.Path == "" {
		s += "/"
	}
	return s, nil
}
