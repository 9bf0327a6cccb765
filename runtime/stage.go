package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/samefile"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
)

// Staged is a capsule ready to launch: its manifest, its verified artifacts and its
// compiled modules. Staging writes nothing but a missing lock.
type Staged struct {
	Manifest  *manifest.Manifest
	Artifacts []registry.Resolved
	// Script is a script capsule's own module (nil for an agent capsule).
	Script *wasm.Module
	// Modules are the compiled wasm tools and drivers, by artifact name.
	Modules map[string]*wasm.Module
	// Hooks are the compiled hook modules, by artifact name: apart from Modules, so a
	// model can never call a hook as a tool.
	Hooks map[string]*wasm.Module
	// Warnings name what the manifest asks for that this release does not do (W-RUN-…):
	// keys it accepts without acting on them; and what its on-stage hooks did that was
	// not honoured (W-RUN-009…012). Staging still succeeds.
	Warnings []*errs.Error
	// ShellTools are the shell binaries on-stage hooks described (write-manifests), by
	// binary: what the model is offered for them instead of the default description.
	ShellTools map[string]ShellTool
	// Process is what a process capsule's driver said it drives (describe(), checked
	// against the manifest at stage); nil for other capsules.
	Process *abi.Description

	scriptPath, scriptSum string // where the script module was read from, and its sha256
	// artifacts is the capsule's artifact manager (murmur:artifact-manager/manage): no
	// trusted registry and pins in memory until Serve or RunOnce gives it its own.
	artifacts *artifactManager
}

// ScriptSum returns the file a script capsule's module was read from and the hex sha256
// of the bytes staged ("", "" for an agent capsule), so a caller fingerprinting the
// capsule's folder need not read and hash the module again.
func (s *Staged) ScriptSum() (path, sum string) { return s.scriptPath, s.scriptSum }

// StageOptions configure Stage.
type StageOptions struct {
	Registry registry.Registry
	Platform string // default: the host's
	Progress func(registry.Progress)
	// Lock is a lock file to verify against instead of murmur.lock beside the manifest;
	// it must exist (a gateway never writes a lock it was pointed at).
	Lock string
}

// Stage resolves and verifies every artifact (writing murmur.lock when there is none,
// verifying against it when there is), then — only once every check passed — compiles
// the wasm modules and checks each against its world and the memory limit, and then
// calls the on-stage hooks. What the manifest asks for that this release does not do,
// and what the hooks did that is not honoured, is in the result's Warnings.
func (r *Runtime) Stage(ctx context.Context, m *manifest.Manifest, opts StageOptions) (*Staged, error) {
	start := time.Now()
	res, err := resolveArtifacts(ctx, m, opts)
	if err != nil {
		return nil, err
	}
	s := &Staged{Manifest: m, Artifacts: res.Artifacts, Modules: map[string]*wasm.Module{}, Hooks: map[string]*wasm.Module{},
		Warnings: append(stageWarnings(m), res.Warnings...)}
	s.artifacts = newArtifactManager(r, s, nil, nil)
	var scriptRead func() ([]byte, error)
	if !m.IsAgent() {
		if s.scriptPath, err = scriptModulePath(m); err != nil {
			return nil, err
		}
		if s.scriptSum, scriptRead, err = r.scriptModule(s.scriptPath, m.Capabilities.Limits.MemoryBytes); err != nil {
			return nil, err
		}
	}
	var problems errs.List
	add := func(err error) { problems = append(problems, asProblems(err)...) }
	jobs := compileJobs(m, res, s.scriptSum, scriptRead)
	r.compileAll(ctx, m, jobs)
	for _, j := range jobs {
		switch {
		case j.err != nil:
			add(j.err)
		case j.role == murmur.RoleCapsule:
			s.Script = j.mod
		case j.role == manifest.RoleHook:
			s.Hooks[j.name] = j.mod
		default:
			s.Modules[j.name] = j.mod
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	if m.IsProcess() {
		d, err := r.checkProcessDriver(ctx, m, s.Modules[m.Inference.Driver.Artifact])
		if err != nil {
			return nil, err
		}
		s.Process = &d
	}
	// Only once everything compiled: on-stage is called on a capsule that will stage.
	var warns []*errs.Error
	s.ShellTools, warns = runStageHooks(ctx, m.Capabilities.Shell.Allow, r.stageHooks(s))
	s.Warnings = append(s.Warnings, warns...)
	r.metrics.Stage.WithLabelValues(m.Name).Observe(time.Since(start).Seconds())
	return s, nil
}

// resolveArtifacts verifies m's artifacts against its lock when there is one (or one was
// named), and otherwise resolves them and writes the lock.
func resolveArtifacts(ctx context.Context, m *manifest.Manifest, opts StageOptions) (*registry.Resolution, error) {
	ropts := registry.Options{Registry: opts.Registry, Platform: opts.Platform, Progress: opts.Progress, LockPath: opts.Lock}
	if _, statErr := os.Stat(registry.LockPath(m.File)); statErr == nil || opts.Lock != "" {
		return registry.VerifyLock(ctx, m, ropts)
	}
	res, _, err := registry.InstallLock(ctx, m, ropts)
	return res, err
}

// compileJob is one module to compile while staging, and what compiling it gave.
type compileJob struct {
	name  string
	role  manifest.Role
	world string
	// key identifies the module's bytes (moduleKey); read gives them, called only when
	// no module was remembered under key.
	key  string
	read func() ([]byte, error)
	err  error
	mod  *wasm.Module
	// binding is a hook's binding, checked against its exports (murmur.CheckHook).
	binding string
}

// moduleKey names a module's bytes without reading them: the sha256 of the archive and
// the payload's path in it, or the sha256 of a script capsule's own module; the world and
// memory limit are in it too, as a remembered module has passed their checks.
func moduleKey(source, world string, limit int64) string {
	return fmt.Sprintf("%s\x00%s\x00%d", source, world, limit)
}

// compileJobs lists the modules a capsule runs in the engine, in manifest order: its
// wasm tools, drivers and hooks, then a script capsule's own module (scriptWasm, when
// not nil).
func compileJobs(m *manifest.Manifest, res *registry.Resolution, scriptSum string, scriptRead func() ([]byte, error)) []*compileJob {
	var jobs []*compileJob
	limit := m.Capabilities.Limits.MemoryBytes
	for _, a := range res.Artifacts {
		if a.Archive == nil || (a.Role != manifest.RoleTool && a.Role != manifest.RoleDriver && a.Role != manifest.RoleHook) {
			continue // skills are text
		}
		p := a.Archive.Payload()
		if p.Kind != registry.PayloadWasm && a.Role == manifest.RoleHook {
			jobs = append(jobs, &compileJob{name: a.Name, role: a.Role, err: errs.New(murmur.CodeHookExport, "runtime",
				fmt.Sprintf("hook artifact %s is not a wasm module: hooks run in the engine only", a.Name), "build the hook as a WASI preview1 module (wit/guest/hook)")})
			continue
		}
		if p.Kind != registry.PayloadWasm {
			continue // native tools run as sandboxed shellTools, not here
		}
		arc := a.Archive
		world := string(a.Role)
		if m.IsProcess() && a.Name == m.Inference.Driver.Artifact {
			world = murmur.ProcessWorld
		}
		j := &compileJob{name: a.Name, role: a.Role, world: world,
			key:  moduleKey("archive:"+a.SHA256+"\x00"+p.Path, world, limit),
			read: func() ([]byte, error) { return arc.ReadFile(p.Path) }}
		if a.Role == manifest.RoleHook {
			j.binding = arc.Manifest().Binding
		}
		jobs = append(jobs, j)
	}
	if scriptRead != nil {
		jobs = append(jobs, &compileJob{name: m.Name, role: murmur.RoleCapsule, world: murmur.ScriptWorld,
			key: moduleKey("script:"+scriptSum, murmur.ScriptWorld, limit), read: scriptRead})
	}
	return jobs
}

// compileAll compiles the jobs that have code, setting each one's module or error.
//
// Compile the modules side by side: on a warm cache each still costs wazero a full
// decode and validation, so a capsule with several artifacts stages in about the time
// of its largest one when there are cores for it. Results are gathered in manifest
// order so errors read the same every time.
func (r *Runtime) compileAll(ctx context.Context, m *manifest.Manifest, jobs []*compileJob) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		sema = make(chan struct{}, goruntime.GOMAXPROCS(0))
	)
	for _, j := range jobs {
		if j.err != nil {
			continue // refused before compiling
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sema <- struct{}{}
			defer func() { <-sema }()
			var perr errs.List
			mod := r.compileOnce(ctx, m, j, func(err error) { perr = append(perr, asProblems(err)...) })
			if mod != nil && j.role == manifest.RoleHook {
				// After the memo: the binding is the artifact's, not its bytes'.
				if err := murmur.CheckHook(mod, j.binding); err != nil {
					perr, mod = append(perr, asProblems(err)...), nil
				}
			}
			mu.Lock()
			j.mod = mod
			if len(perr) > 0 {
				j.err = perr
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// compileOnce is compile for a job, or a copy of the module an earlier stage compiled
// and checked from the same bytes, named for m.
func (r *Runtime) compileOnce(ctx context.Context, m *manifest.Manifest, j *compileJob, add func(error)) *wasm.Module {
	if v, ok := r.modules.Load(j.key); ok {
		mod := *v.(*wasm.Module)
		mod.Capsule, mod.Artifact, mod.Role = m.Name, j.name, string(j.role)
		return &mod
	}
	code, err := j.read()
	if err != nil {
		add(err)
		return nil
	}
	mod := r.compile(ctx, m, j.name, j.role, j.world, code, add)
	if mod != nil {
		r.modules.Store(j.key, mod)
	}
	return mod
}

// compile compiles one module of m and checks it against its world and m's memory limit,
// passing each refusal to add (and returning nil) rather than stopping at the first.
func (r *Runtime) compile(ctx context.Context, m *manifest.Manifest, name string, role manifest.Role, world string, code []byte, add func(error)) *wasm.Module {
	limit := m.Capabilities.Limits.MemoryBytes
	mod, err := murmur.CompileWorld(ctx, r.engine, m.Name, name, role, world, code)
	if err != nil {
		add(err)
		return nil
	}
	if err := murmur.CheckWorld(mod, world); err != nil {
		add(err)
		return nil
	}
	if need := mod.MinMemory(); need > limit {
		add(errs.New(wasm.CodeMemoryFloor, "runtime", fmt.Sprintf("artifact %s needs %d bytes of memory to start, over limits.memory_bytes %d", name, need, limit),
			"raise capabilities.limits.memory_bytes"))
		return nil
	}
	return mod
}

// Tool is a tool or skill artifact of a staged capsule, as the model, the card and
// MURMUR.md list it.
type Tool struct {
	Name        string
	Role        manifest.Role // tool or skill
	Description string        // from the artifact's own manifest; "" when it has none
	// InputSchema is a tool's input_schema as JSON; nil when it declares none.
	InputSchema json.RawMessage
}

// Tools lists the capsule's tool and skill artifacts in manifest order: the one listing
// the model's tools, the agent card's skills and MURMUR.md are made from.
func (s *Staged) Tools() []Tool {
	var tools []Tool
	for _, a := range s.Artifacts {
		if a.Role != manifest.RoleTool && a.Role != manifest.RoleSkill {
			continue
		}
		t := Tool{Name: a.Name, Role: a.Role}
		if a.Archive != nil {
			am := a.Archive.Manifest()
			t.Description = am.Description
			if a.Role == manifest.RoleTool && am.InputSchema != nil {
				t.InputSchema = mustJSON(am.InputSchema)
			}
		}
		tools = append(tools, t)
	}
	return tools
}

// modules returns every compiled module of the capsule: its tools, drivers and hooks,
// and a script capsule's own.
func (s *Staged) modules() []*wasm.Module {
	mods := make([]*wasm.Module, 0, len(s.Modules)+len(s.Hooks)+1)
	for _, m := range s.Modules {
		mods = append(mods, m)
	}
	for _, m := range s.Hooks {
		mods = append(mods, m)
	}
	if s.Script != nil {
		mods = append(mods, s.Script)
	}
	return mods
}

// scriptModulePath finds a script capsule's module: capsule.wasm beside the manifest,
// else exactly one *.wasm there (docs/reference/guest-abi.md "Script capsules").
func scriptModulePath(m *manifest.Manifest) (string, error) {
	p := filepath.Join(m.Dir, "capsule.wasm")
	if _, err := os.Stat(p); err != nil {
		matches, _ := filepath.Glob(filepath.Join(m.Dir, "*.wasm"))
		switch len(matches) {
		case 0:
			return "", errs.New(CodeScriptModule, "runtime",
				fmt.Sprintf("capsule %s has no inference block and no capsule.wasm beside %s", m.Name, m.File),
				"add an inference block (agent capsule) or build the script capsule's module as capsule.wasm next to the manifest")
		case 1:
			p = matches[0]
		default:
			names := make([]string, len(matches))
			for i, x := range matches {
				names[i] = filepath.Base(x)
			}
			return "", errs.New(CodeScriptModule, "runtime",
				fmt.Sprintf("capsule %s has several modules beside its manifest (%s) and none named capsule.wasm", m.Name, strings.Join(names, ", ")),
				"name the capsule's module capsule.wasm")
		}
	}
	return p, nil
}

// scriptModule returns the sha256 of the script module at path and how to read its
// bytes, reading them now only when need be: a file unchanged since it was hashed
// (r.sums) whose module is compiled already is not read at all; one holding the bytes
// of a module staged before (r.scripts) is compared with them, not hashed.
func (r *Runtime) scriptModule(path string, limit int64) (string, func() ([]byte, error), error) {
	if sum, ok := r.sums.Lookup(path); ok {
		if _, ok := r.modules.Load(moduleKey("script:"+sum, murmur.ScriptWorld, limit)); ok {
			// Not called while the module stays remembered (always, today); should it
			// be, the bytes must still be the ones the sum names.
			return sum, func() ([]byte, error) {
				data, err := readScriptModule(path)
				if err == nil && fmt.Sprintf("%x", sha256.Sum256(data)) != sum {
					err = errs.New(CodeScriptModule, "runtime", path+" changed while the capsule was staged", "stage it again")
				}
				return data, err
			}, nil
		}
	}
	since := time.Now()
	sum, data, ok := r.scripts.match(path)
	if !ok {
		var err error
		if data, err = readScriptModule(path); err != nil {
			return "", nil, err
		}
		h := sha256.Sum256(data)
		sum = hex.EncodeToString(h[:])
		r.scripts.add(sum, data)
	}
	r.sums.Record(path, sum, since)
	return sum, func() ([]byte, error) { return data, nil }, nil
}

// readScriptModule reads the script module at p.
func readScriptModule(p string) ([]byte, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, errs.Wrap(err, CodeScriptModule, "runtime", "cannot read "+p, "check its permissions")
	}
	return data, nil
}

// scriptMemo remembers the last few script modules staged, their bytes and sha256, so
// staging another capsule whose module holds the same bytes (copies of one capsule under
// other names) compares them instead of hashing them.
type scriptMemo struct {
	mu    sync.Mutex
	items []scriptBytes // most recent first
}

type scriptBytes struct {
	sum  string
	data []byte
}

// Bounds of scriptMemo: its bytes stay in memory for as long as the runtime lives.
const (
	memoScripts     = 4
	memoScriptBytes = 64 << 20
)

// match returns the sum and bytes of a remembered module the file at path holds.
func (m *scriptMemo) match(path string) (string, []byte, bool) {
	m.mu.Lock()
	items := slices.Clone(m.items)
	m.mu.Unlock()
	for _, it := range items {
		if same, err := samefile.Holds(path, it.data); err == nil && same {
			return it.sum, it.data, true
		}
	}
	return "", nil, false
}

// add remembers a module's bytes, forgetting the oldest beyond the bounds.
func (m *scriptMemo) add(sum string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.items = slices.DeleteFunc(m.items, func(it scriptBytes) bool { return it.sum == sum })
	m.items = slices.Insert(m.items, 0, scriptBytes{sum: sum, data: data})
	total := 0
	for i, it := range m.items {
		if total += len(it.data); i >= memoScripts || total > memoScriptBytes {
			m.items = m.items[:i]
			break
		}
	}
}

// asProblems turns a staging error into the list of refusals it holds.
func asProblems(err error) errs.List {
	var l errs.List
	if errors.As(err, &l) {
		return l
	}
	if err != nil {
		return errs.List{errs.Wrap(err, wasm.CodeCompile, "runtime", "staging failed", "")}
	}
	return nil
}
