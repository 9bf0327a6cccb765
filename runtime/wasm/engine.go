// Package wasm is the engine capsule guests run on: one wazero runtime per process with
// an on-disk compilation cache, modules compiled (and rewritten for fast starts) once,
// a fresh instance per call (or a warm one reset to be the same: reuse.go) with exactly
// the grants it is given and the host functions installed on it, and every failure
// classified and counted. It knows modules and calls, not capsules' sessions or tasks
// (package runtime), nor the interfaces a host serves guests: those are installed on it
// (WithHost, host.go), as package murmur installs Murmur's.
package wasm

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// pageSize is a wasm memory page.
const pageSize = 64 << 10

// Engine runs guests. One per process: it owns the wazero runtime and its compilation
// cache; Close releases both.
type Engine struct {
	rt      wazero.Runtime
	cache   wazero.CompilationCache
	metrics *Metrics
	// host is what guests import besides WASI, defined on every runtime (WithHost).
	host *hostSet

	mu       sync.Mutex
	closed   bool
	compiled map[[32]byte]*compiled // by sha256 of the wasm bytes
	// components are the components compiled, by sha256 of the component and main
	// instance (comp.go).
	components map[compKey]*compModule
	// snapshots starts instances from init snapshots (snapshot.go).
	snapshots bool
	// reuse keeps instances warm between calls, with the settings their pools share in
	// warm (reuse.go).
	reuse bool
	warm  *warmConfig
	// fallback, created when first needed, runs the modules the interrupt rewrite cannot
	// read, with wazero's close-on-context-done (interrupt.go).
	fallback wazero.Runtime
}

// EngineOption configures NewEngine.
type EngineOption func(*engineConfig)

type engineConfig struct {
	cacheDir    string
	registerer  prometheus.Registerer
	noSnapshots bool
	noReuse     bool
	warmIdle    time.Duration
	host        []HostModule
}

// WithoutInitSnapshots makes every call run the guest's _initialize, instead of starting
// instances from the state a first _initialize left (see snapshot.go).
func WithoutInitSnapshots() EngineOption { return func(c *engineConfig) { c.noSnapshots = true } }

// WithCacheDir keeps compiled machine code in dir, keyed by module content, so a restart
// does not recompile. Without it the cache lives in memory only.
func WithCacheDir(dir string) EngineOption { return func(c *engineConfig) { c.cacheDir = dir } }

// WithMetrics registers the guest metrics (docs/reference/metrics.md "Guest calls") on
// reg when the engine starts; the gateway registers them later, on each config's
// registry, through Metrics().Register.
func WithMetrics(reg prometheus.Registerer) EngineOption {
	return func(c *engineConfig) { c.registerer = reg }
}

// NewEngine starts the runtime: compiler engine, compilation cache, WASI preview1 and the
// host modules of WithHost. Deadlines are enforced by the interrupt checks compile adds (interrupt.go).
func NewEngine(ctx context.Context, opts ...EngineOption) (*Engine, error) {
	var cfg engineConfig
	for _, o := range opts {
		o(&cfg)
	}
	var cache wazero.CompilationCache
	if cfg.cacheDir != "" {
		if err := os.MkdirAll(cfg.cacheDir, 0o700); err != nil {
			return nil, errs.Wrap(err, CodeEngine, "runtime", "cannot create the compilation cache folder "+cfg.cacheDir, "set cache_dir to a writable folder")
		}
		c, err := wazero.NewCompilationCacheWithDir(filepath.Clean(cfg.cacheDir))
		if err != nil {
			return nil, errs.Wrap(err, CodeEngine, "runtime", "cannot open the compilation cache "+cfg.cacheDir, "set cache_dir to a writable folder")
		}
		cache = c
	} else {
		cache = wazero.NewCompilationCache()
	}
	// No close-on-context-done: it costs a call-heavy guest ~16×, and the interrupt
	// checks stop guests instead (docs/rationale.md "Why deadlines are an interrupt flag").
	host := newHostSet(cfg.host)
	rt, err := newRuntime(ctx, wazero.NewRuntimeConfigCompiler().WithCompilationCache(cache), host)
	if err != nil {
		cache.Close(ctx)
		return nil, err
	}
	m, err := NewMetrics(cfg.registerer)
	if err != nil {
		rt.Close(ctx)
		cache.Close(ctx)
		return nil, err
	}
	e := &Engine{rt: rt, cache: cache, metrics: m, host: host, compiled: map[[32]byte]*compiled{}, components: map[compKey]*compModule{}, snapshots: !cfg.noSnapshots}
	if !cfg.noReuse && !cfg.noSnapshots {
		// Warm instances need init snapshots; without the means to reset an instance
		// (another wazero version), every call gets a fresh one.
		if wc, err := newWarmConfig(ctx, rt, cfg.warmIdle, m); err == nil {
			e.reuse, e.warm = true, wc
		}
	}
	return e, nil
}

// newRuntime starts a wazero runtime configured by rc, with WASI preview1 and the host
// modules of host.
func newRuntime(ctx context.Context, rc wazero.RuntimeConfig, host *hostSet) (wazero.Runtime, error) {
	rt := wazero.NewRuntimeWithConfig(ctx, rc)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, errs.Wrap(err, CodeEngine, "runtime", "cannot instantiate WASI preview1", "")
	}
	if err := host.define(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, errs.Wrap(err, CodeEngine, "runtime", "cannot define the host interfaces", "")
	}
	return rt, nil
}

// fallbackRuntime returns the runtime for modules the interrupt rewrite cannot read: it
// checks the context at every function entry and loop back-edge itself. It has its own
// in-memory cache, because wazero's cache key does not tell code compiled with those
// checks from code without them.
func (e *Engine) fallbackRuntime(ctx context.Context) (wazero.Runtime, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errors.New("the engine is closed")
	}
	if e.fallback == nil {
		rt, err := newRuntime(ctx, wazero.NewRuntimeConfigCompiler().WithCloseOnContextDone(true), e.host)
		if err != nil {
			return nil, err
		}
		e.fallback = rt
	}
	return e.fallback, nil
}

// Metrics returns the engine's collectors.
func (e *Engine) Metrics() *Metrics { return e.metrics }

// Close releases the runtime, every compiled module and the cache handle.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.rt.Close(ctx)
	if e.fallback != nil {
		err = errors.Join(err, e.fallback.Close(ctx))
	}
	for _, c := range e.compiled {
		c.warm.drain(ctx)
		if c.image != nil {
			c.image.close()
		}
	}
	return errors.Join(err, e.cache.Close(ctx))
}

// Module is a guest compiled once at stage.
type Module struct {
	Capsule  string
	Artifact string
	// Role labels the module's metrics and errors ("tool", "driver", …).
	Role string
	*compiled
	// comp is set for a component: compiled is then its main core module (comp.go).
	comp *compModule
	// lifts maps functions of the component's world to the core export of its main
	// instance each lifts, as its World returned them.
	lifts map[string]string
}

// World checks, at compile, a component's world against what the host serves it, for
// artifact, and picks the core instance its calls are made on: main, and by function of
// its world the core export of main the function lifts (Module.Lift). A refusal is
// returned as is; it should carry an error code.
type World func(plan *component.Plan, artifact string) (main int, lifts map[string]string, err error)

// Plan is a component's instantiation plan, nil for a core module.
func (m *Module) Plan() *component.Plan {
	if m.comp == nil {
		return nil
	}
	return m.comp.plan
}

// Lift is the core export of a component's main instance that function fn of its world
// lifts, as its World named it ("" for none, and for a core module).
func (m *Module) Lift(fn string) string { return m.lifts[fn] }

// ExportedFunctions are the module's exported functions by name (for a component, its
// main core module's).
func (m *Module) ExportedFunctions() map[string]api.FunctionDefinition {
	return m.module.ExportedFunctions()
}

// ImportedFunctions are the module's imported functions (for a component, its main core
// module's).
func (m *Module) ImportedFunctions() []api.FunctionDefinition { return m.module.ImportedFunctions() }

// Instantiations counts the instances of the module created, for tests and benchmarks.
func (m *Module) Instantiations() int64 { return m.instantiations.Load() }

// compiled is a module's machine code and how its instances' memory starts.
type compiled struct {
	module wazero.CompiledModule
	// rt is the runtime that compiled module and instantiates it.
	rt       wazero.Runtime
	minPages uint32
	// movedStart: the module's start function is exported under startExport, to be
	// called after instantiation (addInterrupts).
	movedStart bool
	// image, when set, is the module's initial data, mapped copy-on-write into each
	// instance; the compiled module then has no data segments. data is the same bytes,
	// for an allocator that cannot map (it copies them instead).
	image *memImage
	data  *dataImage
	// snapGlobals counts the mutable globals exportGlobals exported (0: no init
	// snapshots for this module); snaps holds its snapshots.
	snapGlobals int
	snaps       snapshots
	warm        warmPool
	// instantiations counts the instances created, for tests and benchmarks.
	instantiations atomic.Int64
}

// MinMemory is the memory, in bytes, the module needs to start.
func (m *Module) MinMemory() int64 { return int64(m.minPages) * pageSize }

// Compile compiles wasm for the artifact of capsule, labelled role; machine code comes
// from the cache when the same bytes were compiled before. A component's world picks the
// core instance its calls are made on, so world checks it here (a component without a
// world is refused); a core module's world is the host's to check.
func (e *Engine) Compile(ctx context.Context, capsule, artifact, role string, world World, wasm []byte) (*Module, error) {
	if isComponent(wasm) {
		cm, lifts, err := e.compileComponent(ctx, artifact, world, wasm)
		if err != nil {
			if errs.Code(err) != "" {
				return nil, err
			}
			return nil, errs.Wrap(err, CodeCompile, "runtime", fmt.Sprintf("artifact %s: the component does not compile", artifact),
				"rebuild it for wasm32-wasip2 with wit-component (docs/guests.md \"Components\")")
		}
		return &Module{Capsule: capsule, Artifact: artifact, Role: role, compiled: cm.mainC, comp: cm, lifts: lifts}, nil
	}
	c, err := e.compile(ctx, wasm)
	if err != nil {
		return nil, errs.Wrap(err, CodeCompile, "runtime", fmt.Sprintf("artifact %s: the module does not compile", artifact),
			"rebuild it for WASI preview1 (GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared)")
	}
	return &Module{Capsule: capsule, Artifact: artifact, Role: role, compiled: c}, nil
}

// compile returns the compiled form of wasm, compiling it only the first time these bytes
// are seen by this engine: a re-stage (a config reload) of unchanged artifacts skips
// wazero's decoding and validation, which it does even on an on-disk cache hit. Compiled
// modules live as long as the engine.
func (e *Engine) compile(ctx context.Context, wasm []byte) (*compiled, error) {
	key := sha256.Sum256(wasm)
	e.mu.Lock()
	c, ok := e.compiled[key]
	e.mu.Unlock()
	if ok {
		return c, nil
	}
	c, err := e.compileFast(ctx, wasm)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if prev, ok := e.compiled[key]; ok {
		c.module.Close(ctx) // another stage compiled the same bytes meanwhile
		if c.image != nil {
			c.image.close()
		}
		return prev, nil
	}
	e.compiled[key] = c
	return c, nil
}

// compileFast compiles wasm so its instances start fast: its data segments become a
// copy-on-write memory image (stripDataSegments), or else one merged segment
// (mergeDataSegments). Every form gets the interrupt checks (addInterrupts). Should a
// rewritten module not compile, the original is compiled, so an error is the module's own.
func (e *Engine) compileFast(ctx context.Context, wasm []byte) (*compiled, error) {
	if imagesSupported {
		if stripped, data, ok := stripDataSegments(wasm); ok {
			nglobals := 0
			if e.snapshots {
				if exported, n, ok := exportGlobals(stripped); ok {
					stripped, nglobals = exported, n
				}
			}
			if c, err := e.compileInterruptible(ctx, stripped); err == nil {
				cm := c.module
				if !c.movedStart { // a start function's effects are not in a snapshot's state
					c.snapGlobals = nglobals
				}
				fits := len(cm.ImportedMemories()) == 0 && uint64(data.off)+uint64(len(data.block)) <= uint64(c.minPages)*pageSize
				if img, err := newMemImage(data); fits && err == nil {
					c.image, c.data = img, data
					return c, nil
				} else if err == nil {
					img.close()
				}
				cm.Close(ctx)
			}
		}
	}
	if merged, ok := mergeDataSegments(wasm); ok {
		if c, err := e.compileInterruptible(ctx, merged); err == nil {
			return c, nil
		}
	}
	c, err := e.compileInterruptible(ctx, wasm)
	if err == nil {
		return c, nil
	}
	// Either the module is invalid — its own error is returned — or the rewrite could not
	// read it: then it runs on the fallback runtime, which stops guests by itself.
	cm, err := e.rt.CompileModule(ctx, wasm)
	if err != nil {
		return nil, err
	}
	cm.Close(ctx)
	rt, err := e.fallbackRuntime(ctx)
	if err != nil {
		return nil, err
	}
	if cm, err = rt.CompileModule(ctx, wasm); err != nil {
		return nil, err
	}
	return newCompiled(cm, rt), nil
}

// rewriteInterrupts is addInterrupts; a test replaces it to reach the fallback runtime.
var rewriteInterrupts = addInterrupts

// compileInterruptible compiles wasm with the interrupt checks added.
func (e *Engine) compileInterruptible(ctx context.Context, wasm []byte) (*compiled, error) {
	checked, movedStart, err := rewriteInterrupts(wasm)
	if err != nil {
		return nil, fmt.Errorf("add interrupt checks: %w", err)
	}
	cm, err := e.rt.CompileModule(ctx, checked)
	if err != nil {
		return nil, err
	}
	c := newCompiled(cm, e.rt)
	c.movedStart = movedStart
	return c, nil
}

// allocator returns the memory allocator an instance of c must be created with: it caps
// memory at limit and lays down the module's initial data when the module has an image
// (instantiating without it would start the guest with its data missing).
func (c *compiled) allocator(limit uint64) *limitedAllocator {
	return &limitedAllocator{limit: limit, image: c.image, data: c.data}
}

func newCompiled(cm wazero.CompiledModule, rt wazero.Runtime) *compiled {
	c := &compiled{module: cm, rt: rt}
	for _, mem := range cm.ExportedMemories() {
		c.minPages = max(c.minPages, mem.Min())
	}
	for _, mem := range cm.ImportedMemories() {
		c.minPages = max(c.minPages, mem.Min())
	}
	return c
}

// Grants are what one call may use, built from the manifest only (the host adds its
// outgoing HTTP).
type Grants struct {
	// FS is the guest's root directory "/" (nil: no filesystem at all).
	FS experimentalsys.FS
	// Env is the guest's environment, in order, as KEY=VALUE.
	Env []string
	// PerSession names the variables of Env whose values differ per session: init
	// snapshots are shared across their values (sessionenv.go).
	PerSession []string
	// Stdout and Stderr receive the guest's output (nil: discarded).
	Stdout, Stderr io.Writer
	// MemoryBytes caps the guest's linear memory.
	MemoryBytes int64
	// Deadline is the wall-clock limit of the call.
	Deadline time.Duration
	// HTTP and HTTPCheck serve a component's wasi:http/outgoing-handler and check a URL
	// before it is sent (nil: every request is denied); core modules do not use them.
	HTTP      wasip2.HTTPSender
	HTTPCheck func(url string) error
	// Snapshot says when calls may start from an init snapshot (the manifest's
	// artifacts[].init_snapshot).
	Snapshot SnapshotPolicy
	// Meter, when set, adds up the call's time, memory and failure (a task's receipt).
	Meter *Meter
}

// Instance is a guest instantiated for one call.
type Instance struct {
	api.Module
	mod *Module
	fns *funcCache // a warm-capable instance's exported functions (funccache.go)
}

// Call runs fn under the deadline on a fresh instance of mod with grants — or on a warm
// one reset to be indistinguishable from it — then closes the instance or resets it.
// Any failure is classified (deadline, memory_limit, trap, exit, abi), counted, and
// returned as a *GuestError.
func (e *Engine) Call(ctx context.Context, mod *Module, g Grants, fn func(ctx context.Context, inst *Instance) error) (err error) {
	start := time.Now()
	limit, err := memoryLimit(mod, g)
	if err != nil {
		return err
	}
	if g.Deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.Deadline)
		defer cancel()
	}
	p := e.plan(ctx, mod, g, limit)
	if g.Meter != nil {
		inner := fn
		fn = func(ctx context.Context, inst *Instance) error {
			err := inner(ctx, inst)
			if mem := inst.Memory(); mem != nil {
				g.Meter.memory(uint64(mem.Size()))
			}
			return err
		}
	}
	var interrupted bool
	defer func() {
		if err == nil && interrupted {
			// The context ended before the guest returned — say, in a host call that
			// ignored it — and the guest got to the end before its next check.
			err = context.Cause(ctx)
		}
		reason := ""
		if err != nil {
			reason = classify(ctx, err, p.alloc)
			err = &GuestError{Capsule: mod.Capsule, Artifact: mod.Artifact, Role: mod.Role, Reason: reason, Err: wrapInterrupted(err, interrupted),
				Deadline: g.Deadline, MemoryBytes: limit}
		}
		d := time.Since(start)
		e.metrics.observe(mod, reason, d)
		g.Meter.call(d, reason)
	}()
	if mod.comp != nil {
		// A component gets a fresh instance graph per call: no snapshots, no warm instances.
		return e.callComponent(ctx, mod, g, p, fn, &interrupted)
	}
	if p.warm != nil {
		if !p.snap.enter(p.warm.m, p.vals) {
			p.warm.m.Close(context.WithoutCancel(ctx))
			return errors.New("cannot give the instance its session's environment and fresh random state")
		}
		ctx := experimental.WithMemoryAllocator(ctx, p.alloc)
		disarm := p.warm.intr.arm(ctx)
		err := fn(ctx, &Instance{Module: p.warm.m, mod: mod, fns: &p.warm.fns})
		interrupted = disarm()
		e.release(ctx, mod, p.warmK, p.warm, p.snap, err, interrupted)
		return err
	}
	return e.callFresh(ctx, mod, g, p, fn, &interrupted)
}

// memoryLimit returns the byte cap of mod's linear memory under g, refusing a module whose
// declared minimum is already over it (it could never start).
func memoryLimit(mod *Module, g Grants) (uint64, error) {
	limitPages := capPages(g)
	if mod.minPages > limitPages {
		return 0, errs.New(CodeMemoryFloor, "runtime",
			fmt.Sprintf("artifact %s needs %d bytes of memory to start, over limits.memory_bytes %d", mod.Artifact, uint64(mod.minPages)*pageSize, g.MemoryBytes),
			"raise capabilities.limits.memory_bytes")
	}
	return uint64(limitPages) * pageSize, nil
}

// capPages is g's memory cap in wasm pages: MemoryBytes, or the whole 32-bit space.
func capPages(g Grants) uint32 {
	if g.MemoryBytes <= 0 {
		return 65536
	}
	return uint32(min(g.MemoryBytes/pageSize, 65536))
}

// callPlan is how one call gets its instance: the allocator it runs with, the snapshot it
// starts from and the warm instance it reuses, if any.
type callPlan struct {
	limit   uint64
	alloc   *limitedAllocator
	snapKey [32]byte
	snap    *snapshot
	capture bool // the call runs _initialize and takes the snapshot for snapKey
	policy  SnapshotPolicy
	calls   *callCtx
	reusing bool
	warmK   [32]byte
	warm    *warmInstance
	vals    map[string]string // the call's per-session values (sessionenv.go)
}

// plan picks the snapshot and the warm instance a call under ctx and g can start from, so
// that a repeated call skips _initialize (and instantiation too, when reuse is on).
func (e *Engine) plan(ctx context.Context, mod *Module, g Grants, limit uint64) *callPlan {
	p := &callPlan{limit: limit, alloc: mod.allocator(limit), calls: &callCtx{}, policy: g.Snapshot}
	if mod.snapGlobals > 0 && mod.comp == nil && g.Snapshot != SnapshotNever {
		p.vals = perSession(g)
		p.snapKey = snapshotKey(startupGrants(g), limit)
		var tried bool
		p.snap, tried = mod.snaps.get(p.snapKey)
		p.capture = !tried
		if p.snap != nil {
			p.alloc.image, p.alloc.data, p.alloc.snapshot = p.snap.image, nil, true // start from the state _initialize left
		}
	}
	p.calls.set(ctx)
	p.reusing = e.reuse && p.snap != nil
	if p.reusing {
		// Any instance started from the same snapshot serves: it gets this call's
		// system context (filesystem, environment, output) now.
		p.warmK = p.snapKey
		if p.warm = mod.warm.get(p.warmK); p.warm != nil {
			if e.warm.freshSys(ctx, p.warm, moduleConfig(g, p.limit, p.warm.calls)) != nil {
				p.warm.m.Close(context.WithoutCancel(ctx))
				p.warm = nil
				return p
			}
			p.alloc = p.warm.alloc
			p.alloc.clearRefused()
			p.warm.calls.set(ctx)
		}
	}
	return p
}

// callFresh instantiates a new instance for the call planned in p, starts it, runs fn on
// it, and then keeps it warm or closes it; interrupted reports whether its interrupt flag
// was set.
func (e *Engine) callFresh(ctx context.Context, mod *Module, g Grants, p *callPlan, fn func(ctx context.Context, inst *Instance) error, interrupted *bool) (err error) {
	cfg := moduleConfig(g, p.limit, p.calls)
	ctx, m, err := e.instantiate(ctx, mod, cfg, p)
	if err != nil {
		return err
	}
	// Armed before any guest code runs (_initialize, a moved start function).
	intr := newInterrupter(m)
	p.calls.intr.Store(intr)
	disarm := intr.arm(ctx)
	inst := &Instance{Module: m, mod: mod}
	var w *warmInstance
	// Only instances of the main runtime are kept: the fallback runtime's have no
	// interrupt flag, and their reset would build a system context on another runtime.
	if p.reusing && p.snap != nil && intr != nil {
		if w = newWarm(m, p.alloc, p.calls); w != nil {
			w.intr = intr
		}
	}
	if w != nil {
		// Kept warm after the call if it ends cleanly; closed otherwise.
		inst.fns = &w.fns
		defer func() {
			*interrupted = disarm()
			e.release(ctx, mod, p.warmK, w, p.snap, err, *interrupted)
		}()
	} else {
		defer func() {
			*interrupted = disarm()
			m.Close(context.WithoutCancel(ctx))
		}()
	}
	if err := p.start(ctx, mod, m); err != nil {
		return err
	}
	return fn(ctx, inst)
}

// moduleConfig is the wazero configuration granting g to one instance under the memory
// cap limit; calls carries the context of the call the instance serves, for the guest's
// sleep.
func moduleConfig(g Grants, limit uint64, calls *callCtx) wazero.ModuleConfig {
	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions(). // _initialize is called below, under the same deadline
		WithSysWalltime().WithSysNanotime().
		WithNanosleep(func(ns int64) {
			if !sleepCtx(calls.get(), time.Duration(ns)) {
				calls.interrupt() // before the guest runs on: the check after the import sees it
			}
		}).
		WithRandSource(randReader{&calls.drawn})
	if g.FS != nil {
		cfg = cfg.WithFSConfig(wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(g.FS, "/"))
	}
	for _, kv := range goGCEnv(g.Env, limit) {
		k, v := splitEnv(kv)
		cfg = cfg.WithEnv(k, v)
	}
	if g.Stdout != nil {
		cfg = cfg.WithStdout(g.Stdout)
	}
	if g.Stderr != nil {
		cfg = cfg.WithStderr(g.Stderr)
	}
	return cfg
}

// instantiate creates the instance planned in p, returning it with the context that carries
// its allocator; when p's snapshot cannot be mapped it falls back to an ordinary start and
// updates p to match.
func (e *Engine) instantiate(ctx context.Context, mod *Module, cfg wazero.ModuleConfig, p *callPlan) (context.Context, api.Module, error) {
	baseCtx := ctx // the call's context, before the allocator is attached
	ctx = experimental.WithMemoryAllocator(baseCtx, p.alloc)
	mod.instantiations.Add(1)
	m, err := mod.rt.InstantiateModule(ctx, mod.module, cfg)
	if err == nil && p.snap != nil && p.alloc.unmapped {
		// The snapshot could not be mapped (no address space left for the mapping):
		// start this instance the ordinary way instead.
		m.Close(context.WithoutCancel(ctx))
		p.snap, p.alloc = nil, mod.allocator(p.limit)
		ctx = experimental.WithMemoryAllocator(baseCtx, p.alloc)
		m, err = mod.rt.InstantiateModule(ctx, mod.module, cfg)
	}
	return ctx, m, err
}

// start brings a new instance m to the state a call expects: restored from p's snapshot, or
// by running _initialize (and capturing a snapshot of the result for the next call).
func (p *callPlan) start(ctx context.Context, mod *Module, m api.Module) error {
	if p.snap != nil {
		if err := p.snap.restore(m); err != nil {
			return err
		}
		if !p.snap.enter(m, p.vals) {
			return errors.New("cannot give the instance its session's environment and fresh random state")
		}
		return nil
	}
	if mod.movedStart {
		if _, err := m.ExportedFunction(startExport).Call(ctx); err != nil {
			return fmt.Errorf("start function: %w", err)
		}
	}
	f := m.ExportedFunction("_initialize")
	if f == nil {
		return nil
	}
	if _, err := f.Call(ctx); err != nil {
		return err
	}
	if p.capture {
		// A failed capture only means the next call runs _initialize again.
		if s, err := mod.capture(m, p.calls.drawn.Load()); err == nil {
			if s.frozen && p.policy != SnapshotAlways {
				s.image.close()
				s = &snapshot{} // refused: later calls run _initialize (entropy.go)
			} else {
				s.sites = findSites(m, p.vals)
			}
			mod.snaps.put(p.snapKey, s)
		}
	}
	return nil
}

// release returns a warm-capable instance to its pool after a call that succeeded, reset
// to what a fresh instance from the snapshot is, or closes it. An interrupted instance is
// closed even when its call ended cleanly (the context ended just as it returned): its
// flag is set.
func (e *Engine) release(ctx context.Context, mod *Module, key [32]byte, w *warmInstance, snap *snapshot, err error, interrupted bool) {
	ctx = context.WithoutCancel(ctx)
	if err != nil || interrupted || !e.warm.reset(ctx, w, snap) {
		w.m.Close(ctx)
		return
	}
	mod.warm.put(ctx, e.warm, key, w)
}

// sleepCtx serves a guest's sleep; it ends early, reporting false, when the call's
// deadline passes, so a sleeping guest cannot hold its call past the deadline (the
// default nanosleep ignores the context).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func splitEnv(kv string) (string, string) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:]
		}
	}
	return kv, ""
}

// limitedAllocator backs one instance's linear memory and refuses growth past the
// manifest's limit, remembering that it did so the failure is classified memory_limit.
// It gives per-capsule limits within one shared runtime (wazero's WithMemoryLimitPages
// is runtime-wide).
type limitedAllocator struct {
	limit uint64
	image *memImage  // mapped at the bottom of memory, when the module has one
	data  *dataImage // the same bytes, copied in when mapping is not possible
	// snapshot marks an image that is an init snapshot: it can only be mapped, so when
	// mapping fails unmapped is set and the caller starts the instance without it.
	snapshot, unmapped bool
	mapped             *mmapMemory // the memory, when it is one mapping (reusable)
	mu                 sync.Mutex
	refused            bool
}

func (a *limitedAllocator) Allocate(capacity, maxBytes uint64) experimental.LinearMemory {
	if m, ok := newMmapMemory(a); ok {
		a.mapped = m.(*mmapMemory)
		return m
	}
	if a.snapshot {
		a.unmapped = true
	}
	return &limitedMemory{a: a, data: a.data}
}

func (a *limitedAllocator) refuse() {
	a.mu.Lock()
	a.refused = true
	a.mu.Unlock()
}

// clearRefused forgets a refusal, for a warm instance starting its next call.
func (a *limitedAllocator) clearRefused() {
	a.mu.Lock()
	a.refused = false
	a.mu.Unlock()
}

func (a *limitedAllocator) wasRefused() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refused
}

type limitedMemory struct {
	a    *limitedAllocator
	buf  []byte
	data *dataImage // copied in at the first allocation, for modules without data segments
}

func (m *limitedMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit {
		m.a.refuse()
		return nil
	}
	if size <= uint64(cap(m.buf)) {
		m.buf = m.buf[:size]
		return m.buf
	}
	// Grow geometrically, capped at the limit, so repeated small grows stay cheap.
	newCap := max(size, min(uint64(cap(m.buf))*2, m.a.limit))
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	if d := m.data; d != nil {
		m.data = nil
		if uint64(d.off)+uint64(len(d.block)) > size {
			return nil // cannot happen: compile checked the image fits the initial memory
		}
		copy(nb[d.off:], d.block)
	}
	m.buf = nb
	return nb
}

func (m *limitedMemory) Free() { m.buf = nil }
