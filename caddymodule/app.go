package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/dustin/go-humanize"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capsulegate/capsulegate/a2a"
	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/internal/digest"
	"github.com/capsulegate/capsulegate/internal/promreg"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/peer"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/taskdb"
	"github.com/capsulegate/capsulegate/taskstore"
)

func init() {
	caddy.RegisterModule(App{})
	httpcaddyfile.RegisterGlobalOption("capsule", parseAppCaddyfile)
}

// App is the Caddy app "capsule": where artifacts come from, where sessions live, and
// the one wazero engine every hosted capsule runs on.
type App struct {
	// Registry is where artifacts come from (default: $CAPSULE_REGISTRY, else the folder
	// <caddy data dir>/capsule/registry, as for the commands: registry.Choose): a folder,
	// oci://host/repo, nexus+https://host, or on loopback oci+http:// and nexus+http://
	// (docs/operators.md "Registries").
	Registry string `json:"registry,omitempty"`
	// RegistryAuth is how the gateway proves itself to a remote registry; absent, a
	// Nexus registry gets $NEXUS_API_KEY and an OCI registry the Docker credential config.
	RegistryAuth *RegistryAuth `json:"registry_auth,omitempty"`
	// Shed refuses new tasks with 503 and Retry-After while too many wait across every
	// capsule, or the heap is over a bound (docs/operators.md "Overload"); nil never.
	Shed *Shed `json:"shed,omitempty"`
	// PeerCredentials are what the gateway presents to its capsules' peers, by URL prefix
	// (docs/operators.md "Peers"); a peer under none gets no credential.
	PeerCredentials []PeerCredential `json:"peer_credentials,omitempty"`
	// RegistryCache is the folder a remote registry's verified archives are kept in, by
	// sha256 (default: <cache_dir>/artifacts); RegistryCacheSize its bound in bytes
	// (default 2 GiB).
	RegistryCache     string `json:"registry_cache,omitempty"`
	RegistryCacheSize int64  `json:"registry_cache_size,omitempty"`
	// RuntimePulls is the trust policy of the capsules' runtime pulls (Murmur's artifact
	// manager, docs/operators.md "Runtime pulls"): the registries they may pull from and
	// the digests pinned for some versions. Absent, no capsule may pull.
	RuntimePulls *RuntimePulls `json:"runtime_pulls,omitempty"`
	// OTel exports the capsules' OpenTelemetry spans (docs/operators.md "Traces"); a
	// capsule whose manifest names observability.otel_endpoint exports there instead.
	// Absent, no span leaves the gateway.
	OTel *OTel `json:"otel,omitempty"`
	// WorkRoot holds the sessions (default: <caddy data dir>/capsule/work).
	WorkRoot string `json:"work_root,omitempty"`
	// CacheDir holds compiled modules (default: <caddy data dir>/capsule/cache).
	CacheDir string `json:"cache_dir,omitempty"`
	// DNSUpstream is the DNS server ("host:port") the shell tools' pinning resolver
	// asks; empty means the host's first nameserver.
	DNSUpstream string `json:"dns_upstream,omitempty"`
	// SandboxHelper is the binary shell and native tool commands start as their sandbox
	// wrapper: an executable capsulegate-sandbox built from the same source as the
	// gateway, checked when the config loads (E-SEC-005). Empty takes the
	// capsulegate-sandbox next to the gateway's executable, else the gateway itself
	// (slower, W-SEC-004; docs/operators.md "The sandbox helper").
	SandboxHelper string `json:"sandbox_helper,omitempty"`
	// StateDir holds the task store, tasks.db: A2A tasks, their event journals and
	// threaded conversations survive restarts there (default: <caddy data dir>/capsule/state).
	StateDir string `json:"state_dir,omitempty"`
	// Store, when set, keeps the tasks in PostgreSQL instead of state_dir's tasks.db: a
	// postgres:// URL (TLS through sslmode), which may hold placeholders such as
	// {env.CAPSULE_STORE} (docs/operators.md "The task store on PostgreSQL").
	Store string `json:"store,omitempty"`
	// StoreKey seals push configs (they hold webhook credentials) in the PostgreSQL store:
	// at least 32 bytes of random text, usually {env.CAPSULE_STORE_KEY}. Required with
	// store and push together.
	StoreKey string `json:"store_key,omitempty"`
	// Instance names this gateway among the gateways sharing store (docs/operators.md
	// "Running several gateways"): unique among the live ones, and named in the message
	// of the tasks a survivor ends when this one stops. Default: the host name and the
	// process id. It may hold placeholders such as {env.HOSTNAME}.
	Instance string `json:"instance,omitempty"`
	// Lease is how long a gateway that stops renewing (killed, cut off) keeps its tasks
	// before a survivor ends them and runs its queued ones (default 10s, 2s to 10m).
	Lease caddy.Duration `json:"lease,omitempty"`
	// TaskVersions says which tasks a gateway runs during a rolling upgrade: "served"
	// (the default) those admitted under the capsule version it serves, and those of a
	// version no live gateway serves; "exact" only its own version's; "any" every task.
	TaskVersions string `json:"task_versions,omitempty"`
	// Retention is how long the task store keeps a finished task after its last update
	// (default 168h, seven days); MaxTasks how many tasks it keeps per capsule at most,
	// the oldest removed first (default 10000). Both must be positive when set.
	Retention *caddy.Duration `json:"retention,omitempty"`
	MaxTasks  *int            `json:"max_tasks,omitempty"`
	// GracePeriod is how long a capsule leaving the config (or Caddy stopping) lets its
	// admitted tasks finish; those left end failed "interrupted" (default 30s).
	GracePeriod caddy.Duration `json:"grace_period,omitempty"`
	// InitSnapshots starts each guest call from the state the session's first call's
	// _initialize left (absent means true); false runs _initialize in every call
	// (docs/guests.md). The Caddyfile's init_snapshots on|off.
	InitSnapshots *bool `json:"init_snapshots,omitempty"`
	// InstanceReuse keeps guest instances warm between calls of the same session, reset
	// to exactly what a fresh instance from the init snapshot is (absent means true,
	// unless init snapshots are off; docs/guests.md). The Caddyfile's instance_reuse on|off.
	InstanceReuse *bool `json:"instance_reuse,omitempty"`
	// Push, when set, lets A2A clients register push-notification webhooks with every
	// hosted capsule, to the URLs its allow rules admit (docs/operators.md "Push
	// notifications"); absent, capsules refuse push configs.
	Push *PushOptions `json:"push,omitempty"`

	engine *runtime.Runtime
	// store is the PostgreSQL task store the app holds from Provision to Cleanup (nil
	// for the bbolt file, which each capsule opens): readiness asks it, and its pool
	// outlives reloads in the stores pool.
	store      taskstore.Store
	metricsReg prometheus.Registerer
	reg        registry.Registry
	pulls      *runtime.PullPolicy // RuntimePulls opened; nil without it
	peers      *peer.Client        // the capsules' A2A client for their peers
	metrics    *a2a.Metrics
	logger     *zap.Logger
	netLog     *zap.Logger
}

// RegistryAuth are a remote registry's credentials; each may hold placeholders such as
// {env.NEXUS_API_KEY}, replaced when the config loads.
type RegistryAuth struct {
	// Token is a bearer token: Nexus's API key, or an OCI registry's token.
	Token string `json:"token,omitempty"`
	// Username and Password are an OCI registry's basic credentials.
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// DockerConfig is the Docker credential config an OCI registry's credentials are
	// read from (default: $DOCKER_CONFIG/config.json, else ~/.docker/config.json).
	DockerConfig string `json:"docker_config,omitempty"`
}

// RuntimePulls is the trust policy for runtime pulls.
type RuntimePulls struct {
	// Registries are searched and pulled from in this order: folders or URLs, as the
	// app's registry option takes them, with its registry_auth.
	Registries []string `json:"registries,omitempty"`
	// Pins are digests by "name@version" (64 lowercase hex characters): a pull of such a
	// version is checked against its pin instead of the registry's own statement.
	Pins map[string]string `json:"pins,omitempty"`
}

// PushOptions are the app's push-notification settings.
type PushOptions struct {
	// Allow are the webhook URLs admitted, in the network-rule grammar of
	// capabilities.network.allow (docs/reference/manifest.md "Network rules").
	Allow []string `json:"allow,omitempty"`
}

// pushPolicy is the A2A push policy the app's push option gives every capsule, nil
// without one; Validate has checked the rules.
func (a *App) pushPolicy() *a2a.PushPolicy {
	if a.Push == nil {
		return nil
	}
	rules, err := netpolicy.ParseRules(a.Push.Allow)
	if err != nil {
		return nil
	}
	return &a2a.PushPolicy{Allow: rules}
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "capsule", New: func() caddy.Module { return new(App) }}
}

// engines keeps one engine per cache folder across config reloads: compiled modules
// and their memory images outlive a reload, so an unchanged capsule costs nothing.
var engines = caddy.NewUsagePool()

// taskMetrics are the A2A task collectors, one set for the process so the counters
// survive reloads (each config registers them on its own registry).
var taskMetrics = func() *a2a.Metrics {
	m, err := a2a.NewMetrics(nil)
	if err != nil {
		panic(err) // unregistered collectors cannot fail
	}
	return m
}()

type pooledEngine struct{ *runtime.Runtime }

// Defaults of the task store's retention (App.Retention, App.MaxTasks).
const (
	defaultRetention = 7 * 24 * time.Hour
	defaultMaxTasks  = 10000
)

// retention is how long finished tasks stay in the task store.
func (a *App) retention() time.Duration {
	if a.Retention == nil {
		return defaultRetention
	}
	return time.Duration(*a.Retention)
}

// defaultGracePeriod is App.GracePeriod when unset.
const defaultGracePeriod = 30 * time.Second

// gracePeriod is how long a departing capsule's tasks may still run.
func (a *App) gracePeriod() time.Duration {
	if a.GracePeriod == 0 {
		return defaultGracePeriod
	}
	return time.Duration(a.GracePeriod)
}

// maxTasks is how many tasks per capsule the task store keeps.
func (a *App) maxTasks() int {
	if a.MaxTasks == nil {
		return defaultMaxTasks
	}
	return *a.MaxTasks
}

// initSnapshots reports whether guest calls start from init snapshots (the default).
func (a *App) initSnapshots() bool { return a.InitSnapshots == nil || *a.InitSnapshots }

// instanceReuse reports whether guest instances are kept warm: the default, when init
// snapshots are on (a warm instance is reset to its snapshot).
func (a *App) instanceReuse() bool {
	return a.initSnapshots() && (a.InstanceReuse == nil || *a.InstanceReuse)
}

// engineKey names the engine an app uses in the engines pool: one per cache folder,
// init-snapshot and instance-reuse setting.
func (a *App) engineKey() string {
	switch {
	case !a.initSnapshots():
		return a.CacheDir + "\x00no-init-snapshots"
	case !a.instanceReuse():
		return a.CacheDir + "\x00no-instance-reuse"
	}
	return a.CacheDir
}

// acquireEngine returns the app's engine, starting it if need be; each call holds it
// until a matching engines.Delete(a.engineKey()).
func (a *App) acquireEngine() (*runtime.Runtime, error) {
	cacheDir, snapshots, reuse, logger := a.CacheDir, a.initSnapshots(), a.instanceReuse(), a.logger
	v, _, err := engines.LoadOrNew(a.engineKey(), func() (caddy.Destructor, error) {
		opts := []wasm.EngineOption{wasm.WithCacheDir(cacheDir)}
		if !snapshots {
			opts = append(opts, wasm.WithoutInitSnapshots())
		} else if !reuse {
			opts = append(opts, wasm.WithoutInstanceReuse())
		}
		e, err := runtime.New(context.Background(), opts...)
		if err != nil {
			return nil, err
		}
		// The sums of capsules' script modules, by file identity, beside the compiled
		// modules: a restart stages unchanged capsules without reading their modules.
		if err := os.MkdirAll(cacheDir, 0o700); err == nil {
			err = e.KeepSums(filepath.Join(cacheDir, "filesums"))
		}
		if err != nil {
			logger.Warn("module sums are not kept across restarts", zap.Error(err))
		}
		return pooledEngine{e}, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(pooledEngine).Runtime, nil
}

func (p pooledEngine) Destruct() error { return p.Runtime.Close(context.Background()) }

// Provision fills in the defaults, takes the shared engine and registers the metrics on
// this config's registry.
func (a *App) Provision(ctx caddy.Context) error {
	// Credentials usually come from the environment ({env.…}): replaced before they are
	// checked, so an unset variable is found here rather than sent as an empty value.
	if err := a.replaceRegistryAuth(); err != nil {
		return err
	}
	// Caddy validates after provisioning; a bad value must refuse the config before the
	// engine starts.
	if err := a.Validate(); err != nil {
		return err
	}
	// The module's logger is "capsule": these are "capsule.runtime" and
	// "capsule.netpolicy" (docs/operators.md, "Sessions and logs").
	a.logger = ctx.Logger().Named("runtime")
	a.netLog = ctx.Logger().Named("netpolicy")
	src, err := registry.Choose(a.Registry, os.Getenv, caddy.AppDataDir())
	if err != nil {
		return err
	}
	if src.Remote() {
		a.Registry = src.Spec
	} else {
		a.Registry = src.Dir
	}
	data := filepath.Join(caddy.AppDataDir(), "capsule")
	if a.WorkRoot == "" {
		a.WorkRoot = filepath.Join(data, "work")
	}
	if a.CacheDir == "" {
		a.CacheDir = filepath.Join(data, "cache")
	}
	if a.StateDir == "" {
		a.StateDir = filepath.Join(data, "state")
	}
	if a.RegistryCache == "" {
		a.RegistryCache = filepath.Join(a.CacheDir, "artifacts")
	}
	dirs := []*string{&a.WorkRoot, &a.CacheDir, &a.StateDir, &a.RegistryCache}
	if !src.Remote() {
		dirs = append(dirs, &a.Registry)
	}
	for _, p := range dirs {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return errs.Wrap(err, CodeAppConfig, "caddy", "cannot resolve "+*p, "use an absolute path")
		}
		*p = abs
	}
	// The database address and key usually come from the environment ({env.…}), so
	// that no secret sits in the config file.
	repl := caddy.NewReplacer()
	a.Store, a.StoreKey = repl.ReplaceAll(a.Store, ""), repl.ReplaceAll(a.StoreKey, "")
	a.Instance = repl.ReplaceAll(a.Instance, "")
	if err := a.checkStore(); err != nil {
		return err
	}
	if err := a.checkSandboxHelper(); err != nil {
		return err
	}
	engine, err := a.acquireEngine()
	if err != nil {
		return err
	}
	a.engine = engine
	metrics := ctx.GetMetricsRegistry()
	if err := a.engine.Register(metrics); err != nil {
		return err
	}
	a.metrics = taskMetrics
	if err := taskMetrics.Register(metrics); err != nil {
		return err
	}
	if a.reg, err = a.openRegistry(src); err != nil {
		return err
	}
	if a.pulls, err = a.openPulls(); err != nil {
		return err
	}
	if a.peers, err = a.peerClient(); err != nil {
		return err
	}
	a.metricsReg = metrics
	if a.Store != "" {
		// Opened at the config's load, not by its first capsule: a database that cannot
		// be reached, or a schema this release cannot read, refuses the config.
		if err := a.holdDatabase(); err != nil {
			return err
		}
	}
	return nil
}

// checkStore refuses a store setting that cannot work, once placeholders are replaced:
// an address that is not a postgres:// URL, a key too short, or push configs to keep in
// the database without a key to seal them.
func (a *App) checkStore() error {
	if err := a.checkFleet(); err != nil {
		return err
	}
	if a.Store == "" {
		if a.StoreKey != "" {
			return errs.New(CodeAppConfig, "caddy", "store_key is set without store", "store_key seals push configs in a PostgreSQL store: add store postgres://…, or remove store_key").At("", "store_key")
		}
		return nil
	}
	if !strings.HasPrefix(a.Store, "postgres://") && !strings.HasPrefix(a.Store, "postgresql://") {
		shown := a.Store
		if i := strings.Index(shown, "://"); i >= 0 {
			shown = shown[:i+3] + "…"
		} else {
			shown = clip.String(shown, 16)
		}
		return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("store %q is not a postgres:// URL (after placeholders)", shown),
			"write store postgres://user:password@host:5432/database?sslmode=verify-full, or store {env.CAPSULE_STORE} with the URL in that variable; leave store out to keep tasks in state_dir").At("", "store")
	}
	if a.StoreKey != "" && len(a.StoreKey) < pgstore.MinKeyLen {
		return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("store_key is %d bytes long; it must be at least %d", len(a.StoreKey), pgstore.MinKeyLen),
			"generate one with `openssl rand -base64 32` and pass it as store_key {env.CAPSULE_STORE_KEY}").At("", "store_key")
	}
	if a.Push != nil && a.StoreKey == "" {
		return errs.New(CodeAppConfig, "caddy", "push configs would be kept in the PostgreSQL store without store_key to seal their credentials",
			"add store_key {env.CAPSULE_STORE_KEY} with at least 32 random bytes (openssl rand -base64 32)").At("", "store_key")
	}
	return nil
}

// checkFleet refuses the settings of several gateways that cannot work: without store
// (they share its database), a lease out of bounds, an unknown task_versions.
func (a *App) checkFleet() error {
	if a.Store == "" {
		for _, o := range []struct {
			name string
			set  bool
		}{{"instance", a.Instance != ""}, {"lease", a.Lease != 0}, {"task_versions", a.TaskVersions != ""}} {
			if o.set {
				return errs.New(CodeAppConfig, "caddy", o.name+" is set without store", "gateways run as one service on a PostgreSQL store: add store postgres://…, or remove "+o.name).At("", o.name)
			}
		}
		return nil
	}
	if l := time.Duration(a.Lease); l != 0 && (l < pgstore.MinLease || l > pgstore.MaxLease) {
		return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("lease %s is outside %s to %s", l, pgstore.MinLease, pgstore.MaxLease),
			"write a lease between 2s and 10m, or leave it out for 10s").At("", "lease")
	}
	if _, ok := taskVersionsOf[a.TaskVersions]; !ok {
		return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("task_versions %q is not served, exact or any", a.TaskVersions),
			"write task_versions served (the default), exact or any (docs/operators.md \"Rolling upgrades\")").At("", "task_versions")
	}
	if a.Instance != "" {
		if err := taskstore.CheckID("instance", a.Instance); err != nil {
			return errs.Wrap(err, CodeAppConfig, "caddy", fmt.Sprintf("instance %q cannot name a gateway", a.Instance),
				"write a short name of printable characters, such as gw-1, or leave it out for the host name and process id").At("", "instance")
		}
	}
	return nil
}

// taskVersionsOf reads the task_versions option.
var taskVersionsOf = map[string]taskstore.Versions{"": taskstore.VersionsServed, "served": taskstore.VersionsServed,
	"exact": taskstore.VersionsExact, "any": taskstore.VersionsAny}

// taskVersions is the rule the app's capsules claim tasks of other versions by.
func (a *App) taskVersions() taskstore.Versions { return taskVersionsOf[a.TaskVersions] }

// instance is this gateway's name among those sharing the store: Instance, or the host
// name and the process id.
func (a *App) instance() string {
	if a.Instance != "" {
		return a.Instance
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "gateway"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// checkSandboxHelper makes sandbox_helper absolute and refuses it (E-SEC-005) unless it
// is an executable helper speaking this gateway's protocol: a wrong one is found when the
// config loads, not by the first session with shell tools.
func (a *App) checkSandboxHelper() error {
	if a.SandboxHelper == "" {
		return nil
	}
	abs, err := filepath.Abs(a.SandboxHelper)
	if err != nil {
		return errs.Wrap(err, CodeAppConfig, "caddy", "cannot resolve sandbox_helper "+a.SandboxHelper, "use an absolute path")
	}
	a.SandboxHelper = abs
	if err := shell.CheckHelper(abs); err != nil {
		if e := errs.Find(err, shell.CodeHelper); e != nil {
			return e.At("", "sandbox_helper")
		}
		return err
	}
	return nil
}

// Validate refuses the settings that cannot work, all at once, reading nothing.
func (a *App) Validate() error {
	var list errs.List
	list = append(list, a.validatePeerCredentials()...)
	if a.DNSUpstream != "" {
		// The rule the resolver applies when a session starts, checked at load.
		host, port, err := net.SplitHostPort(a.DNSUpstream)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			list = append(list, errs.New(netpolicy.CodeConfig, "caddy", fmt.Sprintf("dns_upstream %q is not host:port", a.DNSUpstream),
				"write the DNS server as host:port, such as 192.0.2.53:53"))
		}
	}
	if a.Retention != nil && *a.Retention <= 0 {
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("retention %s is not positive", time.Duration(*a.Retention)),
			"write how long finished tasks are kept, such as 168h or 30d, or leave retention out for seven days"))
	}
	if a.GracePeriod < 0 {
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("grace_period %s is negative", time.Duration(a.GracePeriod)),
			"write a positive duration such as 30s, or leave it out for 30s"))
	}
	if a.RegistryCacheSize < 0 || (a.RegistryCacheSize > 0 && a.RegistryCacheSize < 1<<20) {
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("registry_cache_size %d bytes is below 1 MiB", a.RegistryCacheSize),
			"write a size such as 2GiB, or leave registry_cache_size out for 2 GiB"))
	}
	if ra := a.RegistryAuth; ra != nil && (ra.Username == "") != (ra.Password == "") {
		has, lacks := "username", "password"
		if ra.Username == "" {
			has, lacks = "password", "username"
		}
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("registry_auth has a %s and no %s", has, lacks),
			"give both username and password, or use token"))
	}
	if a.OTel != nil {
		list = append(list, a.OTel.validate()...)
	}
	if rp := a.RuntimePulls; rp != nil {
		if len(rp.Registries) == 0 {
			list = append(list, errs.New(CodeAppConfig, "caddy", "runtime_pulls names no registry",
				"add registry <folder|url> lines naming where capsules may pull from, or remove runtime_pulls"))
		}
		for _, r := range rp.Registries {
			if _, err := registry.ParseSource(r); err != nil {
				list = append(list, asErrs(err)...)
			}
		}
		for k, v := range rp.Pins {
			name, version, ok := strings.Cut(k, "@")
			if !ok || !manifest.ValidName(name) || manifest.CheckVersion(version) != "" {
				list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("runtime_pulls pin %q is not name@version", k),
					"write pin <name>@<version> <sha256>, such as pin wordcount@1.1.0 sha256:3f0c…"))
			}
			if !digest.Valid(strings.TrimPrefix(v, "sha256:")) {
				list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("runtime_pulls pin %s: %q is not a sha256 in 64 lowercase hex characters", k, v),
					"copy the digest from the registry or `sha256sum` of the archive"))
			}
		}
	}
	if a.MaxTasks != nil && *a.MaxTasks <= 0 {
		list = append(list, errs.New(CodeAppConfig, "caddy", fmt.Sprintf("max_tasks %d is not positive", *a.MaxTasks),
			"write how many tasks each capsule keeps, such as 10000, or leave max_tasks out for 10000"))
	}
	if a.Push != nil {
		if len(a.Push.Allow) == 0 {
			list = append(list, errs.New(CodeAppConfig, "caddy", "push allows no webhook URL",
				`add allow rules naming where notifications may go, such as allow https://hooks.example.com, or remove push`))
		}
		if _, err := netpolicy.ParseRules(a.Push.Allow); err != nil {
			for _, e := range err.(errs.List) {
				e.Path = "push.allow" + e.Path
				list = append(list, e)
			}
		}
	}
	if a.InstanceReuse != nil && *a.InstanceReuse && !a.initSnapshots() {
		list = append(list, errs.New(CodeAppConfig, "caddy", "instance_reuse on needs init_snapshots on: instances are reset to their init snapshot",
			"drop one of the two options"))
	}
	if len(list) > 0 {
		return list
	}
	return nil
}

// Start does nothing: capsules start when their handlers are provisioned.
func (a *App) Start() error { return nil }

// Stop does nothing: each handler lets its capsule go in its Cleanup.
func (a *App) Stop() error { return nil }

// Cleanup releases the store and the shared engine, if Provision got as far as taking them.
func (a *App) Cleanup() error {
	var err error
	if a.peers != nil {
		a.peers.CloseIdle()
	}
	if a.store != nil {
		a.store = nil
		_, err = stores.Delete(a.storePath())
	}
	if a.engine == nil {
		return err
	}
	a.engine = nil
	if _, eerr := engines.Delete(a.engineKey()); err == nil {
		err = eerr
	}
	return err
}

// parseAppCaddyfile builds the app from the global option; see UnmarshalCaddyfile.
func parseAppCaddyfile(d *caddyfile.Dispenser, _ any) (any, error) {
	a := new(App)
	if err := a.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "capsule", Value: caddyconfig.JSON(a, nil)}, nil
}

// UnmarshalCaddyfile reads the global option
//
//	capsule {
//	    registry  <dir>|oci://host/repo|nexus+https://host
//	    registry_auth {
//	        token <t> | username <u> password <p> | docker_config <file>
//	    }
//	    registry_cache <dir>
//	    registry_cache_size <size>
//	    work_root <dir>
//	    cache_dir <dir>
//	    dns_upstream <host:port>
//	    sandbox_helper <path>
//	    state_dir <dir>
//	    store postgres://…
//	    store_key <key>
//	    instance <name>
//	    lease <duration>
//	    task_versions served|exact|any
//	    retention <duration>
//	    max_tasks <n>
//	    init_snapshots on|off
//	    instance_reuse on|off
//	    push {
//	        allow <rule>...
//	    }
//	}
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "push" {
			if err := a.unmarshalPush(d); err != nil {
				return err
			}
			continue
		}
		if opt == "registry_auth" {
			if err := a.unmarshalRegistryAuth(d); err != nil {
				return err
			}
			continue
		}
		if opt == "peer_credential" {
			if err := a.unmarshalPeerCredential(d); err != nil {
				return err
			}
			continue
		}
		if opt == "runtime_pulls" {
			if err := a.unmarshalRuntimePulls(d); err != nil {
				return err
			}
			continue
		}
		if opt == "otel" {
			if err := a.unmarshalOTel(d); err != nil {
				return err
			}
			continue
		}
		if opt == "shed" {
			if err := a.unmarshalShed(d); err != nil {
				return err
			}
			continue
		}
		if !d.NextArg() {
			if opt == "init_snapshots" || opt == "instance_reuse" {
				return d.Errf("%s takes on or off", opt)
			}
			return d.ArgErr()
		}
		switch opt {
		case "registry":
			a.Registry = d.Val()
		case "registry_cache":
			a.RegistryCache = d.Val()
		case "registry_cache_size":
			n, err := humanize.ParseBytes(d.Val())
			if err != nil || n > math.MaxInt64 || n < 1<<20 {
				return d.Errf("registry_cache_size %q: want a size of at least 1MiB, such as 2GiB or 500MB", d.Val())
			}
			a.RegistryCacheSize = int64(n)
		case "work_root":
			a.WorkRoot = d.Val()
		case "cache_dir":
			a.CacheDir = d.Val()
		case "dns_upstream":
			a.DNSUpstream = d.Val()
		case "sandbox_helper":
			a.SandboxHelper = d.Val()
		case "state_dir":
			a.StateDir = d.Val()
		case "store":
			a.Store = d.Val()
		case "store_key":
			a.StoreKey = d.Val()
		case "instance":
			a.Instance = d.Val()
		case "task_versions":
			a.TaskVersions = d.Val()
		case "lease":
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("lease %q: want a duration such as 10s", d.Val())
			}
			a.Lease = caddy.Duration(dur)
		case "retention":
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("retention %q: want a duration, such as 168h or 30d", d.Val())
			}
			a.Retention = new(caddy.Duration(dur))
		case "grace_period":
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("grace_period %q: want a duration such as 30s", d.Val())
			}
			a.GracePeriod = caddy.Duration(dur)
		case "max_tasks":
			n, err := strconv.Atoi(d.Val())
			if err != nil {
				return d.Errf("max_tasks %q: want an integer", d.Val())
			}
			a.MaxTasks = &n
		case "init_snapshots", "instance_reuse":
			if d.Val() != "on" && d.Val() != "off" {
				return d.Errf("%s takes on or off", opt)
			}
			on := d.Val() == "on"
			if opt == "init_snapshots" {
				a.InitSnapshots = &on
			} else {
				a.InstanceReuse = &on
			}
		default:
			return d.Errf("unknown capsule option %q (known: registry, registry_auth, peer_credential, registry_cache, registry_cache_size, runtime_pulls, otel, shed, work_root, cache_dir, state_dir, store, store_key, instance, lease, task_versions, retention, max_tasks, grace_period, dns_upstream, sandbox_helper, init_snapshots, instance_reuse, push)", opt)
		}
		if err := lineDone(d, opt); err != nil {
			return err
		}
	}
	return nil
}

// replaceRegistryAuth replaces the placeholders of registry_auth, refusing a value that
// was written but is empty once replaced (an unset {env.…}), which would otherwise fall
// back to other credentials, or to none, without a word.
func (a *App) replaceRegistryAuth() error {
	ra := a.RegistryAuth
	if ra == nil {
		return nil
	}
	repl := caddy.NewReplacer()
	for _, f := range []struct {
		name string
		v    *string
	}{{"token", &ra.Token}, {"username", &ra.Username}, {"password", &ra.Password}, {"docker_config", &ra.DockerConfig}} {
		if *f.v == "" {
			continue
		}
		raw := *f.v
		if *f.v = repl.ReplaceAll(raw, ""); *f.v == "" {
			return errs.New(CodeAppConfig, "caddy", fmt.Sprintf("registry_auth %s %q is empty once placeholders are replaced", f.name, raw),
				"set the environment variable it names, or remove the line")
		}
	}
	return nil
}

// unmarshalOTel reads the otel block: endpoint, header (name and value) and sampling.
func (a *App) unmarshalOTel(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.Errf("otel takes a block: otel { endpoint <url>; header <name> <value>; sampling <0..1> }")
	}
	o := &OTel{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		switch sub {
		case "endpoint":
			if !d.NextArg() {
				return d.ArgErr()
			}
			o.Endpoint = d.Val()
		case "header":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("header takes a name and a value")
			}
			if o.Headers == nil {
				o.Headers = map[string]string{}
			}
			o.Headers[args[0]] = args[1]
			continue
		case "sampling":
			if !d.NextArg() {
				return d.ArgErr()
			}
			f, err := strconv.ParseFloat(d.Val(), 64)
			if err != nil {
				return d.Errf("sampling %q: want a number from 0 to 1", d.Val())
			}
			o.Sampling = &f
		default:
			return d.Errf("unknown otel subdirective %q (known: endpoint, header, sampling)", sub)
		}
		if err := lineDone(d, sub); err != nil {
			return err
		}
	}
	a.OTel = o
	return nil
}

// unmarshalRuntimePulls reads the runtime_pulls block: registry lines (one or more
// registries each) and pin lines (name@version and a sha256).
func (a *App) unmarshalRuntimePulls(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.Errf("runtime_pulls takes a block: runtime_pulls { registry <folder|url>...; pin <name>@<version> <sha256> }")
	}
	rp := &RuntimePulls{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch sub := d.Val(); sub {
		case "registry":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.Errf("registry takes one or more folders or URLs")
			}
			rp.Registries = append(rp.Registries, args...)
		case "pin":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("pin takes <name>@<version> <sha256>")
			}
			if rp.Pins == nil {
				rp.Pins = map[string]string{}
			}
			if _, dup := rp.Pins[args[0]]; dup {
				return d.Errf("runtime_pulls: %s is pinned twice", args[0])
			}
			rp.Pins[args[0]] = strings.TrimPrefix(args[1], "sha256:")
		default:
			return d.Errf("unknown runtime_pulls subdirective %q (known: registry, pin)", sub)
		}
	}
	a.RuntimePulls = rp
	return nil
}

// unmarshalRegistryAuth reads the registry_auth block: token, username, password and
// docker_config lines, one argument each.
func (a *App) unmarshalRegistryAuth(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.Errf("registry_auth takes a block: registry_auth { token <t> | username <u> password <p> | docker_config <file> }")
	}
	ra := &RegistryAuth{}
	if err := stringBlock(d, "registry_auth", []string{"token", "username", "password", "docker_config"},
		[]*string{&ra.Token, &ra.Username, &ra.Password, &ra.DockerConfig}); err != nil {
		return err
	}
	a.RegistryAuth = ra
	return nil
}

// unmarshalPush reads the push block: allow lines, each with one or more rules, which
// add up.
func (a *App) unmarshalPush(d *caddyfile.Dispenser) error {
	if d.NextArg() {
		return d.Errf("push takes a block: push { allow <rule>... }")
	}
	if a.Push == nil {
		a.Push = &PushOptions{}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if d.Val() != "allow" {
			return d.Errf("unknown push option %q (known: allow)", d.Val())
		}
		rules := d.RemainingArgs()
		if len(rules) == 0 {
			return d.Errf("allow takes one or more rules, such as https://hooks.example.com")
		}
		a.Push.Allow = append(a.Push.Allow, rules...)
	}
	if len(a.Push.Allow) == 0 {
		return d.Errf("push allows no webhook URL: add allow <rule>... inside its block")
	}
	return nil
}

// stringBlock reads a block of subdirectives that each take one argument into the
// matching field of dsts (names[i] fills dsts[i]); an unknown one, or one given twice,
// is refused naming the block.
func stringBlock(d *caddyfile.Dispenser, block string, names []string, dsts []*string) error {
	seen := map[string]bool{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		i := slices.Index(names, sub)
		if i < 0 {
			return d.Errf("unknown %s subdirective %q (known: %s)", block, sub, strings.Join(names, ", "))
		}
		if seen[sub] {
			return d.Errf("%s: %s is given twice", block, sub)
		}
		seen[sub] = true
		if !d.NextArg() {
			return d.ArgErr()
		}
		*dsts[i] = d.Val()
		if err := lineDone(d, sub); err != nil {
			return err
		}
	}
	return nil
}

// lineDone refuses anything after the arguments of subdirective sub: another argument,
// or a block.
func lineDone(d *caddyfile.Dispenser, sub string) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(d.Nesting()) {
		return d.Errf("%s takes no block", sub)
	}
	return nil
}

// Interface guards
var (
	_ caddy.App             = (*App)(nil)
	_ caddy.Provisioner     = (*App)(nil)
	_ caddy.Validator       = (*App)(nil)
	_ caddy.CleanerUpper    = (*App)(nil)
	_ caddyfile.Unmarshaler = (*App)(nil)
)

// stores keeps one task store per place (a state folder's file, or a database address)
// across config reloads: the capsules that use it hold it, so it closes after the last of
// them has shut down, and a PostgreSQL store's connection pool outlives every reload.
var stores = caddy.NewUsagePool()

// pooledStore is a task store in the stores pool, closed by its last holder.
type pooledStore struct{ closingStore }

// closingStore is a task store that closes: both stores the gateway opens.
type closingStore interface {
	taskstore.Store
	Close() error
}

func (p pooledStore) Destruct() error { return p.Close() }

// storePath names the task store in the stores pool: its file, or its database address
// (a reload that changes only store_key keeps the store and its connections, with the
// new key).
func (a *App) storePath() string {
	if a.Store != "" {
		return "postgres\x00" + a.Store
	}
	return filepath.Join(a.StateDir, "tasks.db")
}

// acquireStore opens the task store, or takes one more hold on it; each call holds it
// until a matching stores.Delete(a.storePath()).
func (a *App) acquireStore() (taskstore.Store, error) {
	v, _, err := stores.LoadOrNew(a.storePath(), a.openStore)
	if err != nil {
		return nil, err
	}
	return v.(pooledStore).closingStore, nil
}

// openStore opens the store the settings name: the PostgreSQL database, or the bbolt
// file in state_dir.
func (a *App) openStore() (caddy.Destructor, error) {
	if a.Store != "" {
		// A gateway restarted under its name waits out its predecessor's lease first.
		ctx, cancel := context.WithTimeout(context.Background(), storeOpenWait+max(time.Duration(a.Lease), pgstore.DefaultLease))
		defer cancel()
		db, err := pgstore.Open(ctx, a.Store, pgstore.Options{PushKey: a.StoreKey, Instance: a.instance(), Lease: time.Duration(a.Lease)})
		if err != nil {
			return nil, err
		}
		a.logger.Info("task store on PostgreSQL", zap.String("database", db.Where()), zap.Int("schema", pgstore.SchemaVersion),
			zap.String("instance", db.Instance()), zap.Duration("lease", db.Lease()))
		return pooledStore{db}, nil
	}
	path := a.storePath()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, errs.Wrap(err, CodeAppConfig, "caddy", "cannot create the state folder "+filepath.Dir(path), "set state_dir to a writable folder")
	}
	db, err := taskdb.Open(path, taskdb.Options{})
	if err != nil {
		return nil, err
	}
	return pooledStore{db}, nil
}

// holdDatabase takes the app's own hold on the PostgreSQL store, from Provision to
// Cleanup: the store opens with the config, not with its first capsule, and a store kept
// from the previous config takes this config's store_key and joins its metrics registry.
func (a *App) holdDatabase() error {
	db, err := a.acquireStore()
	if err != nil {
		return err
	}
	pg := db.(*pgstore.Store)
	err = pg.SetPushKey(a.StoreKey)
	if err == nil {
		_, err = promreg.Adopt(a.metricsReg, pg.Collector())
	}
	if err != nil {
		stores.Delete(a.storePath())
		return err
	}
	a.store = db
	return nil
}

// storeOpenWait bounds opening the PostgreSQL store at a config load: connecting,
// migrating, taking the gateway's lock.
const storeOpenWait = 30 * time.Second

// asErrs is err as a list of coded errors.
func asErrs(err error) errs.List {
	var list errs.List
	if errors.As(err, &list) {
		return list
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return errs.List{e}
	}
	return errs.List{errs.Wrap(err, CodeAppConfig, "caddy", "an invalid value", "see the cause")}
}
