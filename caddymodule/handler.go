package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"

	"go.opentelemetry.io/otel/trace"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/edgeauth"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/taskstore"
)

func init() {
	caddy.RegisterModule(Handler{})
	registerPathDirective("capsule", parseHandlerCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("capsule", httpcaddyfile.Before, "respond")
}

// Handler is http.handlers.capsule: it hosts one capsule in-process and serves A2A for
// it (docs/reference/a2a.md) under the route it is mounted on.
type Handler struct {
	// Manifest is the capsule's murmur.yaml.
	Manifest string `json:"manifest"`
	// Lock verifies against this lock instead of murmur.lock beside the manifest.
	Lock string `json:"lock,omitempty"`
	// Auth makes clients authenticate; nil means no auth.
	Auth *Auth `json:"auth,omitempty"`
	// MaxBody caps request bodies in bytes (default 1 MiB).
	MaxBody int64 `json:"max_body,omitempty"`
	// QueueDepth overrides lifecycle.queue_depth (tasks waiting within one context).
	QueueDepth int `json:"queue_depth,omitempty"`
	// Concurrency is how many contexts run a task at once (default: one per CPU).
	Concurrency int `json:"concurrency,omitempty"`
	// ContextIdle ends a context's session after it ran no task this long (default 15m).
	ContextIdle caddy.Duration `json:"context_idle,omitempty"`
	// PublicURL is the endpoint URL the card and MURMUR_CAPSULE_URL name, whatever the
	// request says (default: the URL the client used, docs/operators.md "Behind a proxy").
	PublicURL string `json:"public_url,omitempty"`
	// Card "1.0" serves the strict A2A 1.0 card to every client, "0.3" the mixed 0.3 +
	// 1.0 card to clients that do not ask for 1.0 (default: the mixed card to clients
	// asking for 0.3, the strict card to the rest).
	Card string `json:"card,omitempty"`
	// GRPC is the host:port where gRPC clients reach this capsule (a site or listener
	// whose gRPC calls this handler serves, over HTTP/2): the card lists it for the gRPC
	// binding (docs/operators.md "gRPC"). Empty lists none; gRPC calls are answered
	// either way.
	GRPC string `json:"grpc,omitempty"`
	// Limits bound what each principal may ask of the capsule (docs/operators.md
	// "Limits"); nil limits nothing.
	Limits *Limits `json:"limits,omitempty"`
	// Policy decides who may call what on this route, and narrows where their tasks
	// reach (docs/operators.md "Policy"); nil allows every authenticated request.
	Policy *Policy `json:"policy,omitempty"`

	key    string
	entry  *hostedCapsule
	route  *a2a.Route // this route's auth, public URL, card and body limit
	logger *zap.Logger
}

// Auth is how clients of a capsule authenticate (docs/operators.md "Principals"). With
// neither field set, a Caddy authentication handler in front (basic_auth, forward_auth, a
// JWT plugin) may still name the principal through http.auth.user.id.
type Auth struct {
	// BearerEnv names the environment variable of the Caddy process holding a token
	// shared by every client ("Authorization: Bearer <token>"), who are then one
	// principal. The name, not the token, is in the config.
	BearerEnv string `json:"bearer,omitempty"`
	// Tokens are named tokens, each its own principal: a task belongs to the principal
	// that created it, and other principals do not see it.
	Tokens []NamedToken `json:"tokens,omitempty"`
	// JWT takes bearer tokens that are none of the above as JWTs of one issuer.
	JWT *JWTAuth `json:"jwt,omitempty"`
	// MTLS names the principal of a client whose certificate Caddy's TLS verified by
	// that certificate: "cn" (the default when "on"), "uri", "dns" or "email".
	MTLS string `json:"mtls,omitempty"`
}

// NamedToken is one principal's bearer token.
type NamedToken struct {
	// Principal names the client (e.g. a team) the token is for.
	Principal string `json:"principal"`
	// Env names the environment variable holding the token.
	Env string `json:"env"`
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.capsule", New: func() caddy.Module { return new(Handler) }}
}

// capsules keeps hosted capsules across config reloads, by manifest path: a reload that
// leaves a capsule unchanged keeps its session, tasks and staged modules.
var capsules = caddy.NewUsagePool()

// hostedCapsule is one capsule the gateway serves: its A2A handler (which owns the task
// registry and outlives re-stages) and the staged version new tasks run on.
type hostedCapsule struct {
	mu       sync.Mutex
	print    string // fingerprint of what was staged
	cur      *version
	a2a      *a2a.Handler
	storeKey string        // the task store this capsule holds (App.acquireStore)
	grace    time.Duration // how long Destruct lets admitted tasks finish (App.GracePeriod)
	// pins is the task store as the keeper of runtime pins, when it is one: every
	// version the capsule stages keeps its pulls there.
	pins taskstore.Pins
}

// version is one staged version of a capsule: its session, and a hold on the engine it
// runs on, which a reload may replace (cache_dir changed) while tasks still run here.
type version struct {
	hosted    *runtime.Hosted
	engineKey string
	// digest names the capsule version by its files (fingerprint), for a fleet's
	// rolling upgrades (a2a.Config.Digest).
	digest string
	// release lets go of the version's artifacts in the registry's cache and of its
	// tracer provider.
	release func()
	// tracer exports the version's spans (nil: none).
	tracer trace.TracerProvider
}

// close ends the version's session once its running task is done, then lets go of the
// engine and of its artifacts in the registry's cache.
func (v *version) close() error {
	err := v.hosted.Close()
	engines.Delete(v.engineKey)
	if v.release != nil {
		v.release()
	}
	return err
}

// known returns the sha256 of the files staging read and hashed already (the script
// module), for fingerprint.
func (v *version) known() map[string]string {
	if path, sum := v.hosted.Staged().ScriptSum(); path != "" {
		return map[string]string{path: sum}
	}
	return nil
}

func (c *hostedCapsule) current() *version {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur
}

// Destruct lets admitted tasks finish for the grace period, ends those left
// "interrupted", then ends the capsule's sessions and lets go of the task store.
func (c *hostedCapsule) Destruct() error {
	c.mu.Lock()
	grace := c.grace
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := c.a2a.Shutdown(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if cerr := c.cur.close(); err == nil {
		err = cerr
	}
	// The task store closes after the last capsule using it has shut down.
	if _, serr := stores.Delete(c.storeKey); err == nil {
		err = serr
	}
	return err
}

// Provision stages the capsule, or, after a reload, re-stages it only when its files
// changed; tasks in flight finish on the capsule they started on.
func (h *Handler) Provision(ctx caddy.Context) error {
	// Caddy validates after provisioning; a bad value must refuse the config before
	// staging, which may write the capsule's lock.
	if err := h.Validate(); err != nil {
		return err
	}
	p, err := h.prepare(ctx)
	if err != nil {
		return err
	}
	// Two routes may serve one manifest (one hosted capsule, one A2A handler); each
	// judges its requests by its own settings (docs/reference/a2a.md "Routes").
	jwt, cert, pol, err := h.edgeRoute(ctx)
	if err != nil {
		return err
	}
	rt, err := a2a.CheckRoute(a2a.Route{Bearer: p.token, Tokens: p.tokens, PublicURL: h.PublicURL, CardVersion: h.Card, MaxBody: h.MaxBody,
		JWT: jwt, ClientCert: cert, Policy: pol, Limits: h.limits(), GRPC: h.GRPC})
	if err != nil {
		return err
	}
	if p.app.metrics != nil {
		// The route's series from zero, before any refusal.
		p.app.metrics.EdgeFrom0(p.m.Name, pol != nil, rt.Limits)
	}
	h.route = &rt
	// A capsule is kept across a reload on the same task store only: a reload that moves
	// the tasks elsewhere (store, state_dir) hosts it anew on the new store, the old one
	// finishing its admitted tasks on the old.
	h.key = p.path + "\x00" + p.app.storePath()
	v, loaded, err := capsules.LoadOrNew(h.key, func() (caddy.Destructor, error) {
		return h.host(p)
	})
	if err != nil {
		h.key = ""
		return err
	}
	h.entry = v.(*hostedCapsule)
	if !loaded {
		return nil
	}
	return h.restage(p, h.entry)
}

// provision is what one Provision works from: the app, the resolved manifest path, the
// bearer token and the loaded manifest.
type provision struct {
	ctx    caddy.Context
	app    *App
	path   string
	token  string
	tokens []a2a.Token
	m      *manifest.Manifest
}

// prepare resolves the handler's paths, reads its bearer token and loads the manifest,
// everything Provision needs before it stages.
func (h *Handler) prepare(ctx caddy.Context) (*provision, error) {
	v, err := ctx.App("capsule")
	if err != nil {
		return nil, err
	}
	app := v.(*App)
	// Named from the app's logger, "capsule.a2a" (docs/operators.md, "Sessions and
	// logs"), so that a log's include or exclude of "capsule" covers it too.
	h.logger = ctx.Logger(app).Named("a2a")
	path, err := filepath.Abs(h.Manifest)
	if err != nil {
		return nil, errs.Wrap(err, CodeHandlerConfig, "caddy", "cannot resolve "+h.Manifest, "use an absolute path")
	}
	if h.Lock != "" {
		if h.Lock, err = filepath.Abs(h.Lock); err != nil {
			return nil, errs.Wrap(err, CodeHandlerConfig, "caddy", "cannot resolve "+h.Lock, "use an absolute path")
		}
	}
	token, tokens, err := h.bearerTokens()
	if err != nil {
		return nil, err
	}
	m, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	return &provision{ctx: ctx, app: app, path: path, token: token, tokens: tokens, m: m}, nil
}

// bearerTokens reads the tokens the auth subdirective names from the environment: the
// shared one ("" when none) and the named ones. An unset variable refuses the config
// rather than serving unguarded.
func (h *Handler) bearerTokens() (string, []a2a.Token, error) {
	if h.Auth == nil {
		return "", nil, nil
	}
	read := func(env string) (string, error) {
		v := os.Getenv(env)
		if v == "" {
			return "", errs.New(CodeHandlerConfig, "caddy", fmt.Sprintf("auth bearer %s: the environment variable %s is unset or empty", env, env),
				"export the token in "+env+" before starting Caddy, or drop it from the auth subdirective")
		}
		return v, nil
	}
	var shared string
	if env := h.Auth.BearerEnv; env != "" {
		v, err := read(env)
		if err != nil {
			return "", nil, err
		}
		shared = v
	}
	var named []a2a.Token
	for _, t := range h.Auth.Tokens {
		v, err := read(t.Env)
		if err != nil {
			return "", nil, err
		}
		named = append(named, a2a.Token{Name: t.Principal, Secret: v})
	}
	return shared, named, nil
}

// stage stages one version of the capsule on the app's engine, holding the engine for as
// long as the version lives.
func (h *Handler) stage(p *provision) (*version, error) {
	app, m := p.app, p.m
	start := time.Now()
	tracer, tracerKey, err := app.capsuleTracer(m.Observability.OtelEndpoint)
	if err != nil {
		return nil, err
	}
	releaseTracer := func() {
		if tracerKey != "" {
			tracers.Delete(tracerKey)
		}
	}
	engine, err := app.acquireEngine()
	if err != nil {
		releaseTracer()
		return nil, err
	}
	hosted, err := engine.Serve(p.ctx, m, runtime.ServeOptions{Registry: app.reg, Lock: h.Lock, ContextIdle: time.Duration(h.ContextIdle), Pulls: app.pulls,
		Session: runtime.SessionConfig{WorkRoot: app.WorkRoot, DNSUpstream: app.DNSUpstream, SandboxHelper: app.SandboxHelper,
			Stderr: zapLines{app.logger}, NetLogger: slogFrom(app.netLog), Tracer: tracer, Peers: app.peers}})
	if err != nil {
		engines.Delete(app.engineKey())
		releaseTracer()
		return nil, err
	}
	release, err := holdArtifacts(app.reg, hosted.Staged().Artifacts)
	if err != nil {
		hosted.Close()
		engines.Delete(app.engineKey())
		releaseTracer()
		return nil, err
	}
	h.logger.Info("capsule staged", zap.String("capsule", m.Name), zap.String("version", m.Version),
		zap.Duration("took", time.Since(start)))
	for _, w := range hosted.Staged().Warnings {
		h.logger.Warn(w.Error(), zap.String("capsule", m.Name), zap.String("version", m.Version))
	}
	return &version{hosted: hosted, engineKey: app.engineKey(), tracer: tracer,
		release: func() { release(); releaseTracer() }}, nil
}

// host stages a capsule the gateway does not serve yet and builds its A2A handler.
func (h *Handler) host(p *provision) (caddy.Destructor, error) {
	ver, err := h.stage(p)
	if err != nil {
		return nil, err
	}
	// After staging, which writes a missing lock: the next reload must see the same files.
	print, digest, err := fingerprint(p.path, h, p.app, ver.known())
	if err != nil {
		ver.close()
		return nil, err
	}
	ver.digest = digest
	c := &hostedCapsule{print: print, cur: ver, grace: p.app.gracePeriod()}
	db, err := p.app.acquireStore()
	if err != nil {
		ver.close()
		return nil, err
	}
	if pins, ok := db.(taskstore.Pins); ok {
		c.pins = pins
		ver.hosted.SetPins(pins)
	}
	cfg := h.a2aConfig(p.m, c, ver, p, p.app)
	cfg.Store = db
	if c.a2a, err = a2a.NewHandler(cfg); err != nil {
		stores.Delete(p.app.storePath())
		ver.close()
		return nil, err
	}
	c.storeKey = p.app.storePath()
	runTaskFile(p.m, ver, h.logger)
	return c, nil
}

// restage brings a capsule kept across a reload up to date: its handler settings always,
// and a newly staged version in place of the current one when its files changed.
func (h *Handler) restage(p *provision, c *hostedCapsule) error {
	m := p.m
	c.mu.Lock()
	defer c.mu.Unlock()
	c.grace = p.app.gracePeriod()
	print, _, err := fingerprint(p.path, h, p.app, nil)
	if err != nil {
		return err
	}
	if c.print == print {
		// Unchanged files: keep the staged capsule; handler settings may still change.
		return c.a2a.Update(h.a2aConfig(m, c, c.cur, p, p.app))
	}
	ver, err := h.stage(p)
	if err != nil {
		return err
	}
	if c.pins != nil {
		ver.hosted.SetPins(c.pins)
	}
	if print, ver.digest, err = fingerprint(p.path, h, p.app, ver.known()); err != nil {
		ver.close()
		return err
	}
	if err := c.a2a.Update(h.a2aConfig(m, c, ver, p, p.app)); err != nil {
		ver.close()
		return err
	}
	old := c.cur
	old.hosted.Retire() // before anything waiting in the queue can start on it
	c.cur, c.print = ver, print
	runTaskFile(m, ver, h.logger)
	// The old session ends once the task running on it (if any) has finished; tasks
	// admitted to it that had not started by then run on the new version.
	go func() {
		if err := old.close(); err != nil {
			h.logger.Warn("closing the previous version's session", zap.String("capsule", m.Name), zap.Error(err))
		}
	}()
	return nil
}

// envName is what an environment variable's name looks like.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate refuses the settings that cannot work, all at once, reading nothing.
func (h *Handler) Validate() error {
	var list errs.List
	bad := func(code, msg, fix string) { list = append(list, errs.New(code, "caddy", msg, fix)) }
	if h.Manifest == "" {
		bad(CodeHandlerConfig, "the capsule handler names no manifest", "write `capsule <path/to/murmur.yaml>` (JSON: \"manifest\")")
	}
	if a := h.Auth; a != nil {
		if a.BearerEnv == "" && len(a.Tokens) == 0 && a.JWT == nil && a.MTLS == "" {
			bad(CodeHandlerConfig, "auth names no way to authenticate", "write `auth bearer <ENV_NAME>`, a block of `<principal> <ENV_NAME>` lines, `auth jwt { … }` or `auth mtls`")
		}
		if a.MTLS != "" {
			if err := edgeauth.CheckCertField(a.MTLS); err != nil {
				list = append(list, errs.Find(err, edgeauth.CodeConfig))
			}
		}
		envs := []string{}
		if a.BearerEnv != "" {
			envs = append(envs, a.BearerEnv)
		}
		seen := map[string]bool{}
		for _, t := range a.Tokens {
			envs = append(envs, t.Env)
			switch {
			case t.Principal == "":
				bad(CodeHandlerConfig, "auth bearer: a named token has no principal", "write `<principal> <ENV_NAME>`, such as `team-a TEAM_A_TOKEN`")
			case seen[t.Principal]:
				bad(CodeHandlerConfig, fmt.Sprintf("auth bearer: principal %q is named twice", t.Principal), "give every principal one token")
			}
			seen[t.Principal] = true
		}
		for _, env := range envs {
			if !envName.MatchString(env) {
				// The value is not repeated: it may be the token itself, written by mistake.
				bad(CodeHandlerConfig, "auth bearer: a token is not given as an environment variable name",
					"name the variable that holds the token, such as HELLO_TOKEN, never the token itself")
			}
		}
	}
	if h.MaxBody < 0 {
		bad(CodeHandlerConfig, fmt.Sprintf("max_body %d is negative", h.MaxBody), "write a positive size, or leave it out for 1 MiB")
	}
	if h.QueueDepth < 0 {
		bad(CodeHandlerConfig, fmt.Sprintf("queue_depth %d is negative", h.QueueDepth), "write a positive depth, or leave it out for the manifest's")
	}
	if h.Concurrency < 0 {
		bad(CodeHandlerConfig, fmt.Sprintf("concurrency %d is negative", h.Concurrency), "write a positive number of tasks, or leave it out for one per CPU")
	}
	if h.ContextIdle < 0 {
		bad(CodeHandlerConfig, fmt.Sprintf("context_idle %s is negative", time.Duration(h.ContextIdle)), "write a positive duration such as 15m, or leave it out")
	}
	if h.PublicURL != "" {
		if _, err := a2a.CheckPublicURL(h.PublicURL); err != nil {
			list = append(list, err.(*errs.Error))
		}
	}
	if h.GRPC != "" {
		if host, port, err := net.SplitHostPort(h.GRPC); err != nil || host == "" || port == "" || strings.Contains(h.GRPC, "/") {
			bad(CodeHandlerConfig, fmt.Sprintf("grpc %q is not host:port", h.GRPC),
				"write the host and port gRPC clients dial for this capsule, such as agents.example.com:443")
		}
	}
	if h.Card != "" && h.Card != a2a.CardV10 && h.Card != a2a.CardV03 {
		bad(a2a.CodeCard, fmt.Sprintf("card %q is not served", h.Card), "write 1.0 for the strict A2A 1.0 card to every client, 0.3 for the mixed card to clients that do not ask for 1.0, or leave it out")
	}
	if len(list) > 0 {
		return list
	}
	return nil
}

// runTaskFile runs the task.md beside the manifest of a capsule that takes no A2A tasks
// (task_acceptance: none; docs/reference/manifest.md "Lifecycle"), once per staged
// version, in the background. The channel gets its outcome; it is nil when there is
// nothing to run.
func runTaskFile(m *manifest.Manifest, v *version, logger *zap.Logger) <-chan runtime.TaskOutcome {
	if m.Lifecycle.TaskAcceptance != "none" {
		return nil
	}
	task, err := os.ReadFile(filepath.Join(m.Dir, "task.md"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			logger.Warn("cannot read task.md", zap.String("capsule", m.Name), zap.Error(err))
		}
		return nil
	}
	done := make(chan runtime.TaskOutcome, 1)
	go func() {
		out := v.hosted.RunTask(context.Background(), runtime.TaskRequest{Source: "task_md", Text: string(task)})
		logger.Info("task.md finished", zap.String("capsule", m.Name), zap.String("state", out.State), zap.String("task", out.TaskID))
		done <- out
	}()
	return done
}

// a2aConfig describes the capsule to the A2A layer.
func (h *Handler) a2aConfig(m *manifest.Manifest, c *hostedCapsule, v *version, p *provision, app *App) a2a.Config {
	card := a2a.Card{Name: m.Name, Version: m.Version, Description: describe(m), OutputModes: m.A2A.CardOutputModes(),
		Extensions: []a2a.Extension{{URI: runtime.ReceiptURI, Description: receiptNote}}}
	for _, t := range v.hosted.Staged().Tools() {
		card.Skills = append(card.Skills, a2a.Skill{ID: t.Name, Name: t.Name, Description: t.Description, Tags: []string{string(t.Role)}})
	}
	lc := m.Lifecycle
	depth := lc.QueueDepth
	if h.QueueDepth > 0 {
		depth = h.QueueDepth
	}
	return a2a.Config{
		Tracer:      v.tracer,
		AcceptPeers: m.Exports.PeerTasks.Accept,
		Card:        card,
		Executor:    executor{c: c, v: v},
		Lifecycle: a2a.Lifecycle{Acceptance: lc.TaskAcceptance, QueueDepth: depth, Concurrency: h.Concurrency,
			InputTimeout: time.Duration(lc.InputTimeoutSecs) * time.Second, Threaded: lc.Conversation == "threaded"},
		MaxBody:     h.MaxBody,
		Inputs:      inputs(m, v),
		Bearer:      p.token,
		Tokens:      p.tokens,
		Principal:   callerID,
		PublicURL:   h.PublicURL,
		GRPC:        h.GRPC,
		Origin:      clientOrigin,
		CardVersion: h.Card,
		Metrics:     app.metrics,
		Logger:      slogFrom(h.logger),
		Push:        app.pushPolicy(),
		Retention:   app.retention(),
		MaxTasks:    app.maxTasks(),
		Digest:      v.digest,
		Versions:    app.taskVersions(),
		Limits:      h.limits(),
		Shed:        app.shedder(),
	}
}

// callerID is the principal a Caddy authentication handler in front of the capsule
// established for r (basic_auth, forward_auth with copy_headers, a JWT plugin: each sets
// http.auth.user.id), "" when none did.
func callerID(r *http.Request) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	v, _ := repl.Get("http.auth.user.id")
	s, _ := v.(string)
	return s
}

// clientOrigin is the URL the client sent r to: the request as Caddy first received it,
// before a route stripped or rewrote its path, with X-Forwarded-Proto, -Host and -Prefix
// applied only when the peer is one of the server's trusted_proxies.
func clientOrigin(r *http.Request) *url.URL {
	orig := r.URL
	if or, ok := r.Context().Value(caddyhttp.OriginalRequestCtxKey).(http.Request); ok && or.URL != nil {
		orig = or.URL
	}
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return a2a.RequestOrigin(r, orig, trusted)
}

func describe(m *manifest.Manifest) string {
	if m.IsAgent() {
		return fmt.Sprintf("Murmur agent capsule %s %s (model %s), hosted by capsulegate", m.Name, m.Version, m.Inference.Model)
	}
	return fmt.Sprintf("Murmur script capsule %s %s, hosted by capsulegate", m.Name, m.Version)
}

// ServeHTTP answers A2A for the capsule.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	info := new(a2a.RequestInfo)
	h.entry.a2a.ServeHTTP(w, r.WithContext(a2a.WithRequestInfo(a2a.WithRoute(r.Context(), h.route), info)))
	logRequest(r, info)
	return nil
}

// logRequest puts the principal and the task a capsule request acted for on Caddy's
// access log line of it: the principal as user_id (http.auth.user.id, unless an
// authentication in front set it) and both as capsule_principal and capsule_task.
func logRequest(r *http.Request, info *a2a.RequestInfo) {
	p, ok := info.Principal()
	task := info.TaskID()
	if !ok && task == "" {
		return
	}
	if repl, _ := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer); repl != nil && p != "" {
		if v, _ := repl.Get("http.auth.user.id"); v == nil || v == "" {
			repl.Set("http.auth.user.id", p)
		}
	}
	if extra, _ := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); extra != nil {
		if ok {
			extra.Set(zap.String("capsule_principal", p))
		}
		if task != "" {
			extra.Set(zap.String("capsule_task", task))
		}
	}
}

// Cleanup lets go of the capsule; the last config using it ends it.
func (h *Handler) Cleanup() error {
	if h.key == "" {
		return nil
	}
	_, err := capsules.Delete(h.key)
	return err
}

// fingerprint hashes what staging reads from disk — every file in the capsule's folder
// (manifest, lock, capsule.wasm, skills, prompt files), an explicit lock, and the app's
// registry, work root, DNS upstream and sandbox helper, and the handler's context
// settings — so a reload re-stages exactly the capsules that changed. It returns too the
// capsule version's digest: the files alone, by their paths in the folder and their
// content, the same on every machine serving the same capsule (a2a.Config.Digest). Each
// file counts by the sha256 of its content; known gives that sum for files staging
// already hashed, which are not read again.
func fingerprint(manifestPath string, h *Handler, app *App, known map[string]string) (print, digest string, err error) {
	lock := h.Lock
	sum, files := sha256.New(), sha256.New()
	fmt.Fprintf(sum, "registry=%s\x00work_root=%s\x00dns=%s\x00sandbox_helper=%s\x00engine=%s\x00context_idle=%d\x00",
		app.Registry, app.WorkRoot, app.DNSUpstream, app.SandboxHelper, app.engineKey(), h.ContextIdle)
	// What the capsule's registries and runtime pulls are reached with: a reload that
	// changes them stages the capsule anew.
	pulls, _ := json.Marshal(app.RuntimePulls)
	auth, _ := json.Marshal(app.RegistryAuth)
	otel, _ := json.Marshal(app.OTel)
	fmt.Fprintf(sum, "registry_cache=%s\x00%d\x00runtime_pulls=%s\x00registry_auth=%x\x00otel=%x\x00", app.RegistryCache, app.RegistryCacheSize, pulls,
		sha256.Sum256(auth), sha256.Sum256(otel))
	dir := filepath.Dir(manifestPath)
	add := func(path, name string) error {
		s, ok := known[path]
		if !ok {
			var err error
			if s, err = fileSum(path); err != nil {
				return err
			}
		}
		fmt.Fprintf(sum, "%s\x00%s\x00", path, s)
		fmt.Fprintf(files, "%s\x00%s\x00", name, s)
		return nil
	}
	n := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		if n++; n > 1000 {
			return fmt.Errorf("more than 1000 files")
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		return add(p, filepath.ToSlash(rel))
	})
	if err == nil && lock != "" {
		err = add(lock, "murmur.lock")
	}
	if err != nil {
		return "", "", errs.Wrap(err, CodeHandlerConfig, "caddy", "cannot read the capsule folder of "+manifestPath,
			"keep each capsule in its own folder holding only its files")
	}
	return hex.EncodeToString(sum.Sum(nil)), "sha256:" + hex.EncodeToString(files.Sum(nil)), nil
}

// fileSum is the hex sha256 of the file at path.
func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fh := sha256.New()
	buf := copyBufs.Get().(*[32 << 10]byte)
	defer copyBufs.Put(buf)
	// The reader hides os.File's WriteTo, which would allocate a buffer per file.
	if _, err := io.CopyBuffer(fh, struct{ io.Reader }{f}, buf[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(fh.Sum(nil)), nil
}

// copyBufs are fingerprint's read buffers: staging thousands of capsules would otherwise
// leave one 32 KiB buffer per file read to the garbage collector.
var copyBufs = sync.Pool{New: func() any { return new([32 << 10]byte) }}

// executor runs A2A tasks on the version of a capsule they were admitted to, or, when
// that version was replaced before the task started, on the current one.
type executor struct {
	c *hostedCapsule
	v *version
}

// Execute runs the job as one task of the capsule's session.
func (x executor) Execute(ctx context.Context, job *a2a.Job) a2a.Outcome {
	var history []runtime.Turn
	for _, t := range job.History {
		history = append(history, runtime.Turn{User: t.User, Agent: t.Agent, Thread: runtime.Thread(t.Thread)})
	}
	req := runtime.TaskRequest{TaskID: job.TaskID, ContextID: job.ContextID, Principal: job.Principal, Source: "a2a", Text: job.Text, Trace: job.Trace,
		MessageID: job.MessageID, History: history, CapsuleURL: job.URL, Previous: runtime.Previous(job.Previous),
		Egress: job.Egress, Narrowed: job.Narrowed}
	if job.Budget != nil {
		req.Budget = job.Budget
	}
	if job.Input != nil {
		req.RequestInput = func(ctx context.Context, prompt string) (runtime.Answer, error) {
			a, err := job.Input(ctx, prompt)
			return runtime.Answer{Text: a.Text, MessageID: a.MessageID, Parts: runtimeParts(a.Parts)}, err
		}
	}
	req.Parts = runtimeParts(job.Parts)
	if p := job.Peer; p != nil {
		req.Peer = runtime.PeerOrigin(*p)
	}
	if job.Chunk != nil {
		req.Sink = chunkSink{text: job.Chunk, thinking: job.Thinking, note: job.Note}
	}
	v := x.v
	out, ok := v.hosted.TryRunTask(ctx, req)
	for !ok {
		next := x.c.current()
		if next == v {
			return a2a.Outcome{State: "failed", Text: "error: the capsule was unloaded"}
		}
		v = next
		out, ok = v.hosted.TryRunTask(ctx, req)
	}
	state := "failed"
	if out.State == runtime.StateCompleted {
		state = "completed"
	}
	o := a2a.Outcome{State: state, Text: out.Result, Thread: a2a.Thread(out.Thread), Message: out.Reply == runtime.ReplyMessage, Mark: out.Mark}
	if out.Receipt != nil {
		b, _ := json.Marshal(out.Receipt) // numbers, strings and maps of them: cannot fail
		o.Metadata = map[string]json.RawMessage{runtime.ReceiptURI: b}
	}
	for _, a := range out.Artifacts {
		oa := a2a.Artifact{Name: a.Name, Description: a.Description}
		for _, p := range a.Parts {
			oa.Parts = append(oa.Parts, a2a.Part{Kind: p.Kind, Text: p.Text, Name: p.Name, MediaType: p.MediaType, Bytes: p.Bytes, URL: p.URL, Data: p.Data})
		}
		o.Artifacts = append(o.Artifacts, oa)
	}
	return o
}

// receiptNote is what the card says of the receipt extension.
const receiptNote = "Every finished task carries its receipt in its metadata under this URI: its trace id, wall and guest time, peak guest memory, model tokens per model, tool calls by kind, network bytes and denials, traps."

// runtimeParts are a message's parts as the runtime takes them.
func runtimeParts(parts []a2a.Part) []runtime.Part {
	var out []runtime.Part
	for _, p := range parts {
		out = append(out, runtime.Part{Kind: p.Kind, Text: p.Text, Name: p.Name, MediaType: p.MediaType, Bytes: p.Bytes, URL: p.URL, Data: p.Data})
	}
	return out
}

// inputs is what the capsule reads beyond text (its manifest's a2a section), files by URL
// fetched as its guests may reach them.
func inputs(m *manifest.Manifest, v *version) a2a.Inputs {
	a := m.A2A
	return a2a.Inputs{Modes: a.InputModes, MaxFileBytes: a.MaxFileBytes, MaxMessageBytes: a.MaxMessageBytes,
		Fetch: func(ctx context.Context, url string, limit int64) ([]byte, string, error) {
			data, mt, err := v.hosted.FetchFile(ctx, url, limit)
			if errors.Is(err, runtime.ErrFileTooLarge) {
				err = fmt.Errorf("%w: %v", a2a.ErrFileTooLarge, err)
			}
			return data, mt, err
		}}
}

// chunkSink passes a task's streamed text, its thinking and its notes to its A2A
// subscribers.
type chunkSink struct{ text, thinking, note func(string) }

// Event forwards chunk events; the rest of the stream is for the trace and metrics.
func (f chunkSink) Event(e *runtime.Event) error {
	c, ok := e.Data.(runtime.Chunk)
	switch {
	case !ok:
	case c.Thinking:
		if f.thinking != nil {
			f.thinking(c.Text)
		}
	case c.Note:
		if f.note != nil {
			f.note(c.Text)
		}
	default:
		f.text(c.Text)
	}
	return nil
}

// slogFrom gives the A2A layer, which knows nothing of Caddy, a slog view of our zap
// logger, keeping its name.
func slogFrom(l *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(l.Core(), zapslog.WithName(l.Name())))
}

// zapLines logs each line written to it, so what the runtime announces at launch (the
// sandbox tier, W-SEC warnings) lands in Caddy's log.
type zapLines struct{ l *zap.Logger }

func (z zapLines) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		if strings.Contains(line, "W-SEC-") {
			z.l.Warn(line)
		} else {
			z.l.Info(line)
		}
	}
	return len(p), nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
	_ caddyfile.Unmarshaler       = (*Handler)(nil)
)
