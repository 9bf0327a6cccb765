package runtime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/taskstore"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// PullPolicy is the operator's trust policy for runtime pulls (docs/operators.md
// "Runtime pulls"): the registries a capsule's artifact manager may search and pull
// from, first first, and the digests it pins for some versions.
type PullPolicy struct {
	Sources []PullSource
	// Pins are the digests pinned by name@version: a pull of one is checked against its
	// pin rather than against the registry's own statement.
	Pins map[string]string
	// Cache keeps what is pulled, by sha256, before its pin is written; nil keeps it in
	// memory only (a replica then fetches it again).
	Cache *registry.Cache
}

// PullSource is one registry of the trust policy.
type PullSource struct {
	Spec     string // as the operator wrote it, for messages and pins
	Registry registry.Registry
}

// Refusal prefixes a capsule's artifact manager answers with, as upstream Murmur words them:
// a value the guest branches on, never a trap.
const (
	notGranted   = "not-granted:"
	notRemovable = "not-removable:"
)

// untrusted is a pull of what no trusted registry holds: a refusal, since the
// registries that may hold it are ones the operator does not trust.
type untrusted struct{ error }

func (u untrusted) Unwrap() error { return u.error }

// artifactManager is one staged capsule's Murmur artifact manager: the operator's
// artifacts, read only, and what the capsule pulled at run time, whose pins live in the
// task store so that every replica and every later session sees them. Pulled tools are
// compiled once per process and shared by the capsule's sessions.
type artifactManager struct {
	rt     *Runtime
	staged *Staged
	policy *PullPolicy

	mu    sync.Mutex
	pins  taskstore.Pins
	tools map[string]*pulledTool // by sha256
	held  map[string]func()      // cache holds, by sha256
}

// pulledTool is a runtime-pulled tool ready to call.
type pulledTool struct {
	pin taskstore.RuntimePin
	arc *registry.Archive
	mod *wasm.Module
}

func newArtifactManager(r *Runtime, s *Staged, policy *PullPolicy, pins taskstore.Pins) *artifactManager {
	if pins == nil {
		pins = &taskstore.MemPins{}
	}
	return &artifactManager{rt: r, staged: s, policy: policy, pins: pins, tools: map[string]*pulledTool{}, held: map[string]func(){}}
}

// setPins makes the manager keep its pins in p (the gateway's task store) from now on.
func (m *artifactManager) setPins(p taskstore.Pins) {
	if m == nil || p == nil {
		return
	}
	m.mu.Lock()
	m.pins = p
	m.mu.Unlock()
}

func (m *artifactManager) store() taskstore.Pins {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pins
}

func (m *artifactManager) capsule() string { return m.staged.Manifest.Name }

func (m *artifactManager) install() manifest.Install {
	return m.staged.Manifest.Capabilities.Install
}

func (m *artifactManager) granted() bool {
	if m == nil {
		return false // a Staged made without Stage has no manager
	}
	in := m.install()
	return len(in.Tool) > 0 || len(in.Skill) > 0
}

func refusedf(prefix, format string, args ...any) error {
	return errors.New(prefix + " " + fmt.Sprintf(format, args...))
}

// operatorArtifact returns the manifest's artifact named name, or nil.
func (m *artifactManager) operatorArtifact(name string) *manifest.ArtifactRef {
	return m.staged.Manifest.Artifact(name)
}

// pull fetches name@version from the trust policy's registries, checks it, keeps its
// bytes, pins it in the store and compiles it; on any refusal nothing is written.
func (m *artifactManager) pull(ctx context.Context, name, version, by string) (*pulledTool, error) {
	in := m.install()
	switch {
	case !m.granted():
		return nil, refusedf(notGranted, "this capsule declares no capabilities.install, so pulling '%s' is refused", name)
	case !manifest.ValidName(name):
		return nil, refusedf(notGranted, "'%s' is not an artifact name; capabilities.install matches bare artifact names only", name)
	case !in.Allows(manifest.RoleTool, name) && !in.Allows(manifest.RoleSkill, name):
		return nil, refusedf(notGranted, "'%s' matches no capabilities.install entry (%s)", name, in.Describe())
	case !in.Allows(manifest.RoleTool, name):
		// Decided before the registry is asked: runtime pulls install tools only.
		return nil, refusedf(notGranted, "'%s' is granted as a skill only, and runtime pulls install wasm tools only (%s)", name, in.Describe())
	}
	if why := manifest.CheckVersion(version); why != "" {
		return nil, refusedf(notGranted, "'%s@%s' is not a version a pull can name: %s", name, version, why)
	}
	if a := m.operatorArtifact(name); a != nil {
		if a.IsLocal() {
			return nil, refusedf(notGranted, "'%s' is declared in murmur.yaml; a runtime pull may not replace an artifact the operator declared", name)
		}
		return nil, refusedf(notGranted, "murmur.lock pins '%s' with origin: operator (version %s); a runtime pull may not replace an artifact the operator declared", name, a.Version)
	}
	if m.policy == nil || len(m.policy.Sources) == 0 {
		return nil, refusedf(notGranted, "the gateway's trust policy names no registry for runtime pulls, so pulling '%s' is refused", name)
	}
	pinned := m.policy.Pins[name+"@"+version]
	blob, arc, src, err := m.fetch(ctx, registry.Ref{Name: name, Version: version, Platform: registry.HostPlatform()}, pinned)
	if err != nil {
		return nil, err
	}
	am := arc.Manifest()
	if am.Runtime != manifest.RoleTool || arc.Payload().Kind != registry.PayloadWasm {
		impl := am.Implementation
		if impl == "" {
			impl = "static"
		}
		return nil, refusedf(notGranted, "'%s' is a '%s' artifact (%s); runtime pulls install wasm tools only", name, am.Runtime, impl)
	}
	pin := taskstore.RuntimePin{Capsule: m.capsule(), Name: name, Version: version, SHA256: blob.SHA256, Registry: src.Spec,
		Role: string(am.Runtime), Implementation: am.Implementation, Platform: blob.Platform, Origin: taskstore.OriginRuntime,
		Pulled: time.Now().UTC(), By: by}
	// Files first, then the pin, then the tool compiled: a pin always names bytes kept.
	if err := m.keep(pin.SHA256, blob.Data); err != nil {
		return nil, err
	}
	var previous *taskstore.RuntimePin // the pin this one replaces, put back if it fails
	if pins, err := m.store().RuntimePins(ctx, pin.Capsule); err == nil {
		for _, p := range pins {
			if p.Name == name {
				previous = &p
			}
		}
	}
	if err := m.store().PutRuntimePin(ctx, pin); err != nil {
		return nil, fmt.Errorf("pull: '%s@%s' is verified and kept, but its pin could not be written: %w", name, version, err)
	}
	tool, err := m.compile(ctx, pin, arc)
	if err != nil {
		if previous != nil {
			m.store().PutRuntimePin(context.WithoutCancel(ctx), *previous)
		} else {
			m.store().DeleteRuntimePin(context.WithoutCancel(ctx), pin.Capsule, name)
		}
		return nil, fmt.Errorf("pull: '%s@%s' does not compile as a tool, so it is not installed: %w", name, version, err)
	}
	return tool, nil
}

// fetch gets ref from the first trusted registry that has it, checked by
// registry.PullVerified against pinned or the registry's own statement.
func (m *artifactManager) fetch(ctx context.Context, ref registry.Ref, pinned string) (*registry.Blob, *registry.Archive, PullSource, error) {
	var missing []string
	for _, src := range m.policy.Sources {
		blob, arc, err := registry.PullVerified(ctx, src.Registry, ref, pinned)
		switch code := errs.Code(err); {
		case err == nil:
			return blob, arc, src, nil
		case code == registry.CodeNotFound || code == registry.CodeNoVariant:
			missing = append(missing, src.Spec)
			continue
		default:
			return nil, nil, src, fmt.Errorf("pull: '%s@%s' from %s refused: %w", ref.Name, ref.Version, src.Spec, err)
		}
	}
	return nil, nil, PullSource{}, untrusted{fmt.Errorf("pull: '%s@%s' is in none of the trusted registries (%s)", ref.Name, ref.Version, strings.Join(missing, ", "))}
}

// keep puts verified bytes in the policy's cache and holds them there while the
// process serves the capsule; without a cache the compiled tool is all that is kept.
func (m *artifactManager) keep(sum string, data []byte) error {
	c := m.policy.Cache
	if c == nil {
		return nil
	}
	if _, err := c.Put(sum, data); err != nil {
		return fmt.Errorf("pull: the verified bytes could not be kept: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held[sum] == nil {
		release, err := c.Hold([]string{sum})
		if err != nil {
			return fmt.Errorf("pull: the verified bytes could not be held: %w", err)
		}
		m.held[sum] = release
	}
	return nil
}

// compile compiles a pulled tool's payload for the tool world, once per sha256.
func (m *artifactManager) compile(ctx context.Context, pin taskstore.RuntimePin, arc *registry.Archive) (*pulledTool, error) {
	m.mu.Lock()
	if t := m.tools[pin.SHA256]; t != nil {
		m.mu.Unlock()
		return &pulledTool{pin: pin, arc: t.arc, mod: t.mod}, nil
	}
	m.mu.Unlock()
	p := arc.Payload()
	world := string(manifest.RoleTool)
	limit := m.staged.Manifest.Capabilities.Limits.MemoryBytes
	j := &compileJob{name: pin.Name, role: manifest.RoleTool, world: world,
		key:  moduleKey("archive:"+pin.SHA256+"\x00"+p.Path, world, limit),
		read: func() ([]byte, error) { return arc.ReadFile(p.Path) }}
	m.rt.compileAll(ctx, m.staged.Manifest, []*compileJob{j})
	if j.err != nil {
		return nil, j.err
	}
	t := &pulledTool{pin: pin, arc: arc, mod: j.mod}
	m.mu.Lock()
	m.tools[pin.SHA256] = t
	m.mu.Unlock()
	return t, nil
}

// runtimePins returns the capsule's runtime pins as the store holds them now.
func (m *artifactManager) runtimePins(ctx context.Context) ([]taskstore.RuntimePin, error) {
	if m == nil {
		return nil, nil
	}
	pins, err := m.store().RuntimePins(ctx, m.capsule())
	// What the manifest no longer grants, or now declares itself, is not the capsule's to
	// call: a reload that narrows capabilities.install takes pulled tools away with it.
	in := m.install()
	var kept []taskstore.RuntimePin
	for _, p := range pins {
		if in.Allows(manifest.RoleTool, p.Name) && m.operatorArtifact(p.Name) == nil {
			kept = append(kept, p)
		}
	}
	return kept, err
}

// tool returns the pulled tool named name, loading and compiling it when this process
// has not (a pin another replica or an earlier process wrote); nil when there is none.
func (m *artifactManager) tool(ctx context.Context, name string) (*pulledTool, error) {
	pins, err := m.runtimePins(ctx)
	if err != nil {
		return nil, fmt.Errorf("the capsule's runtime pins cannot be read: %w", err)
	}
	for _, pin := range pins {
		if pin.Name == name {
			return m.toolFor(ctx, pin)
		}
	}
	return nil, nil
}

// toolFor is pin's tool: compiled already by this process, or loaded now.
func (m *artifactManager) toolFor(ctx context.Context, pin taskstore.RuntimePin) (*pulledTool, error) {
	m.mu.Lock()
	t := m.tools[pin.SHA256]
	m.mu.Unlock()
	if t != nil {
		return &pulledTool{pin: pin, arc: t.arc, mod: t.mod}, nil
	}
	return m.load(ctx, pin)
}

// pulled is every pulled tool ready to call, by name, from one read of the pins: what an
// agent turn offers and dispatches against. A tool that cannot be loaded is left out.
func (m *artifactManager) pulled(ctx context.Context) map[string]*pulledTool {
	pins, _ := m.runtimePins(ctx) // a store that cannot be read offers no pulled tool this turn
	out := make(map[string]*pulledTool, len(pins))
	for _, pin := range pins {
		if t, err := m.toolFor(ctx, pin); err == nil {
			out[pin.Name] = t
		}
	}
	return out
}

// load brings a pinned tool into this process: its bytes from the cache, else from a
// trusted registry checked against the pin, then compiled.
func (m *artifactManager) load(ctx context.Context, pin taskstore.RuntimePin) (*pulledTool, error) {
	ref := registry.Ref{Name: pin.Name, Version: pin.Version, Platform: pin.Platform}
	var arc *registry.Archive
	if c := m.policy.cache(); c != nil {
		if data, ok := c.Get(pin.SHA256); ok {
			a, err := registry.ArchiveOf(pin.Name, pin.Version, data)
			if err == nil {
				arc = a
				if err := m.keep(pin.SHA256, data); err != nil {
					return nil, err
				}
			}
		}
	}
	if arc == nil {
		if m.policy == nil || len(m.policy.Sources) == 0 {
			return nil, fmt.Errorf("'%s' is pinned by a runtime pull, but this gateway's trust policy names no registry to fetch it from", pin.Name)
		}
		blob, a, _, err := m.fetch(ctx, ref, pin.SHA256)
		if err != nil {
			return nil, err
		}
		if err := m.keep(pin.SHA256, blob.Data); err != nil {
			return nil, err
		}
		arc = a
	}
	return m.compile(ctx, pin, arc)
}

func (p *PullPolicy) cache() *registry.Cache {
	if p == nil {
		return nil
	}
	return p.Cache
}

// remove drops a runtime pin; an artifact the operator declared is refused.
func (m *artifactManager) remove(ctx context.Context, name string) (bool, error) {
	switch {
	case !m.granted():
		return false, refusedf(notGranted, "this capsule declares no capabilities.install, so removing '%s' is refused", name)
	case !manifest.ValidName(name):
		return false, refusedf(notGranted, "'%s' is not an artifact name; capabilities.install matches bare artifact names only", name)
	}
	if a := m.operatorArtifact(name); a != nil {
		if a.IsLocal() {
			return false, refusedf(notRemovable, "'%s' is declared in murmur.yaml; an artifact the operator declared stays for the life of the session", name)
		}
		return false, refusedf(notRemovable, "murmur.lock pins '%s' with origin: operator; only an artifact this capsule pulled (origin: runtime) can be removed", name)
	}
	pins, err := m.runtimePins(ctx)
	if err != nil {
		return false, err
	}
	var sum string
	for _, p := range pins {
		if p.Name == name {
			sum = p.SHA256
		}
	}
	ok, err := m.store().DeleteRuntimePin(ctx, m.capsule(), name)
	if err != nil || !ok {
		return ok, err
	}
	m.mu.Lock()
	if release := m.held[sum]; release != nil {
		release()
		delete(m.held, sum)
	}
	delete(m.tools, sum)
	m.mu.Unlock()
	return true, nil
}

// close lets go of the cache holds.
func (m *artifactManager) close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for sum, release := range m.held {
		release()
		delete(m.held, sum)
	}
}

// list is every artifact the capsule can call: the operator's tools, its shell
// binaries (native), and what it pulled.
func (m *artifactManager) list(ctx context.Context) []abi.ArtifactSummary {
	var out []abi.ArtifactSummary
	for _, a := range m.staged.Artifacts {
		if a.Role != manifest.RoleTool {
			continue
		}
		rt := abi.RuntimeWasm
		if a.Archive != nil && a.Archive.Payload().Kind != registry.PayloadWasm {
			rt = abi.RuntimeNative
		}
		out = append(out, abi.ArtifactSummary{Name: a.Name, Version: a.Version, Runtime: rt})
	}
	for _, b := range m.staged.Manifest.Capabilities.Shell.Allow {
		out = append(out, abi.ArtifactSummary{Name: b, Runtime: abi.RuntimeNative})
	}
	pins, _ := m.runtimePins(ctx) // a store that cannot be read lists what the operator declared
	for _, p := range pins {
		out = append(out, summaryOf(p))
	}
	return out
}

func summaryOf(p taskstore.RuntimePin) abi.ArtifactSummary {
	return abi.ArtifactSummary{Name: p.Name, Version: p.Version, Runtime: runtimeOf(p.Implementation)}
}

// runtimeOf is the manager's runtime-type of an artifact's implementation.
func runtimeOf(impl string) abi.RuntimeType {
	if impl == manifest.ImplNative {
		return abi.RuntimeNative
	}
	return abi.RuntimeWasm
}

// describe answers from the artifact's own manifest.
func (m *artifactManager) describe(ctx context.Context, name string) (abi.ArtifactInfo, error) {
	for _, a := range m.staged.Artifacts {
		if a.Name == name && a.Archive != nil {
			return infoOf(a.Archive), nil
		}
	}
	for _, b := range m.staged.Manifest.Capabilities.Shell.Allow {
		if b == name {
			return abi.ArtifactInfo{Name: b, Description: "a binary of capabilities.shell.allow, run in the workdir", Runtime: abi.RuntimeNative}, nil
		}
	}
	t, err := m.tool(ctx, name)
	if err != nil {
		return abi.ArtifactInfo{}, err
	}
	if t == nil {
		return abi.ArtifactInfo{}, fmt.Errorf("'%s' is not installed", name)
	}
	return infoOf(t.arc), nil
}

func infoOf(arc *registry.Archive) abi.ArtifactInfo {
	am := arc.Manifest()
	info := abi.ArtifactInfo{Name: am.Name, Version: am.Version, Description: am.Description, Tags: am.Tags, Runtime: runtimeOf(am.Implementation)}
	if info.Tags == nil {
		info.Tags = []string{}
	}
	if am.InputSchema != nil {
		s := string(mustJSON(am.InputSchema))
		info.InputSchema = &s
	}
	if am.OutputSchema != nil {
		s := string(mustJSON(am.OutputSchema))
		info.OutputSchema = &s
	}
	return info
}

// search lists what the trusted registries hold that matches query.
func (m *artifactManager) search(ctx context.Context, query string) ([]abi.ArtifactSummary, error) {
	if m.policy == nil || len(m.policy.Sources) == 0 {
		return nil, refusedf(notGranted, "the gateway's trust policy names no registry to search")
	}
	seen := map[string]bool{}
	out := []abi.ArtifactSummary{}
	var failed []string
	for _, src := range m.policy.Sources {
		l, ok := src.Registry.(registry.Lister)
		if !ok {
			continue
		}
		all, err := l.List(ctx)
		if err != nil {
			failed = append(failed, src.Spec+": "+err.Error())
			continue
		}
		for _, a := range all {
			key := a.Name + "@" + a.Version
			if !a.Matches(query) || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, abi.ArtifactSummary{Name: a.Name, Version: a.Version, Runtime: runtimeOf(a.Implementation)})
		}
	}
	if len(failed) == len(m.policy.Sources) {
		return nil, fmt.Errorf("search: no trusted registry answered: %s", strings.Join(failed, "; "))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// diagnostics states what the capsule pulled and what it may pull.
func (m *artifactManager) diagnostics(ctx context.Context) (abi.RuntimeState, error) {
	pins, err := m.runtimePins(ctx)
	if err != nil {
		return abi.RuntimeState{}, err
	}
	st := abi.RuntimeState{CapsuleID: m.capsule() + "@" + m.staged.Manifest.Version, Installed: []abi.ArtifactSummary{}}
	for _, p := range pins {
		st.Installed = append(st.Installed, summaryOf(p))
	}
	caps := "pull: not granted (no capabilities.install)"
	if m.granted() {
		caps = m.install().Describe()
	}
	var srcs []string
	if m.policy != nil {
		for _, s := range m.policy.Sources {
			srcs = append(srcs, s.Spec)
		}
	}
	if len(srcs) == 0 {
		srcs = []string{"none"}
	}
	pinned := 0
	if m.policy != nil {
		pinned = len(m.policy.Pins)
	}
	st.Capabilities = fmt.Sprintf("%s; trusted registries: %s; digests pinned by the trust policy: %d", caps, strings.Join(srcs, ", "), pinned)
	return st, nil
}
