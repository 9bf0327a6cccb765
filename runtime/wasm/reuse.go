package wasm

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Warm instances (the default; WithoutInstanceReuse turns them off). Instantiating a Go
// guest costs wazero a function reference per table element, thousands of them, on every
// call. Instead, an instance that ended its call cleanly is reset to exactly what a fresh
// instance started from the same init snapshot would be, and serves the next call of the
// same grants:
//
//   - linear memory: each page the call wrote copied back from the snapshot image in
//     place (image_linux.go: restoreOnto; remapped copy-on-write when that cannot be
//     done); memory the call grew past the snapshot's size is discarded (its pages read
//     zeros again) and the memory shrunk back to the snapshot's size, so a later grow
//     sees what a fresh one does;
//   - mutable globals: set to the snapshot's values through the exports exportGlobals
//     added;
//   - tables, and the data and element segment instances (dropped by data.drop and
//     elem.drop): put back to what instantiation built, saved before the instance's
//     first call;
//   - WASI state — the descriptor table (files a call opened, preopens and their
//     directory state, stdio, the numbering of the next descriptor), args, environment,
//     clocks and random source: when its call ends the instance gets an empty system
//     context (closing every file the call left open, so an idle instance holds no
//     session's files), and when it is taken for the next call, a brand-new one built by
//     wazero from that call's module configuration, exactly what a fresh instance for
//     the call is given. The filesystem, environment and output writers are therefore
//     the call's, not the first call's: one warm instance serves every session whose
//     grants share its init snapshot (the same environment but for per-session values,
//     a filesystem or none, the same memory limit).
//
// wazero exposes no API for these, nor for shrinking a memory, so they are reached
// through the exported fields of its module instance (Sys, Tables, DataInstances,
// ElementInstances, MemoryInstance.Buffer and Cap, and Engine.MemoryGrown, which tells
// compiled code the memory's new length) by reflection; NewEngine checks their shape
// once and turns reuse off when a wazero version no longer has it. A new system context
// comes from instantiating an empty module with the instance's configuration and moving
// its context over; the one the call used leaves with the empty module, whose closing
// closes every file the guest left open.
//
// The new context's clocks and random source are a fresh instance's by construction:
// wazero's monotonic clock is process-wide (a fresh instance's nanotime is not rebased)
// and the random source is the host's CSPRNG, stateless.
//
// An instance is never reused after a call that failed (trap, exit, deadline,
// cancellation, memory limit, ABI error), once closed, when its memory is not one
// mapping, or when any step of the reset fails: it is closed.

// maxWarmPerKey bounds the warm instances kept per grants; maxWarmKeys the grants kept
// per module (older ones are closed).
const (
	maxWarmPerKey = 4
	maxWarmKeys   = 8
)

// DefaultWarmIdleTimeout is how long a warm instance may stay unused before it is closed.
const DefaultWarmIdleTimeout = 60 * time.Second

// WithoutInstanceReuse makes every call instantiate a new instance, instead of resetting
// an instance that ended a call cleanly (see reuse.go).
func WithoutInstanceReuse() EngineOption { return func(c *engineConfig) { c.noReuse = true } }

// WithInstanceReuse keeps instances that ended a call cleanly, reset to what a fresh
// instance would be; it is the default, kept so configurations that name it still build.
func WithInstanceReuse() EngineOption { return func(c *engineConfig) { c.noReuse = false } }

// WithWarmIdleTimeout closes a warm instance left unused for d (DefaultWarmIdleTimeout
// when d is not positive).
func WithWarmIdleTimeout(d time.Duration) EngineOption {
	return func(c *engineConfig) { c.warmIdle = d }
}

// warmConfig is what an engine's warm pools share.
type warmConfig struct {
	rt      wazero.Runtime
	empty   wazero.CompiledModule // gives each reset a fresh system context
	idleSys wazero.ModuleConfig   // the empty system context of an instance between calls
	idle    time.Duration
	metrics *Metrics
	now     func() time.Time // replaced by tests
}

// emptyModule is the smallest valid module: instantiating it builds only a system context.
var emptyModule = []byte("\x00asm\x01\x00\x00\x00")

// newWarmConfig prepares reuse on rt, or says why wazero's instances cannot be reset.
func newWarmConfig(ctx context.Context, rt wazero.Runtime, idle time.Duration, m *Metrics) (*warmConfig, error) {
	empty, err := rt.CompileModule(ctx, emptyModule)
	if err != nil {
		return nil, fmt.Errorf("compile the empty module: %w", err)
	}
	probe, err := rt.InstantiateModule(ctx, empty, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		empty.Close(ctx)
		return nil, fmt.Errorf("instantiate the empty module: %w", err)
	}
	defer probe.Close(ctx)
	if _, err := instanceFields(probe); err != nil {
		empty.Close(ctx)
		return nil, err
	}
	if idle <= 0 {
		idle = DefaultWarmIdleTimeout
	}
	// The idle context gets the host's random source too: given none, wazero seeds a new
	// math/rand source (about 5 µs) for every context it builds, so for every reset.
	idleSys := wazero.NewModuleConfig().WithName("").WithRandSource(randReader{})
	return &warmConfig{rt: rt, empty: empty, idleSys: idleSys, idle: idle, metrics: m, now: time.Now}, nil
}

// instanceFields returns the wazero module instance behind m as an addressable struct,
// after checking it has the fields a reset sets, with the types it expects.
func instanceFields(m api.Module) (reflect.Value, error) {
	v := reflect.ValueOf(m)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, fmt.Errorf("wazero module is a %T, not a struct pointer", m)
	}
	s := v.Elem()
	want := map[string]reflect.Type{
		"DataInstances":    reflect.TypeFor[[][]byte](),
		"ElementInstances": reflect.TypeFor[[][]uintptr](),
	}
	for name, typ := range want {
		if f := s.FieldByName(name); !f.IsValid() || f.Type() != typ || !f.CanSet() {
			return reflect.Value{}, fmt.Errorf("wazero module instance has no settable %s %v", name, typ)
		}
	}
	if f := s.FieldByName("Sys"); !f.IsValid() || f.Kind() != reflect.Pointer || !f.CanSet() {
		return reflect.Value{}, errors.New("wazero module instance has no settable Sys pointer")
	}
	tables := s.FieldByName("Tables")
	if !tables.IsValid() || tables.Kind() != reflect.Slice || tables.Type().Elem().Kind() != reflect.Pointer {
		return reflect.Value{}, errors.New("wazero module instance has no Tables slice")
	}
	refs, ok := tables.Type().Elem().Elem().FieldByName("References")
	if !ok || refs.Type != reflect.TypeFor[[]uintptr]() {
		return reflect.Value{}, errors.New("wazero table instance has no References []uintptr")
	}
	mem := s.FieldByName("MemoryInstance")
	if !mem.IsValid() || mem.Kind() != reflect.Pointer || mem.Type().Elem().Kind() != reflect.Struct {
		return reflect.Value{}, errors.New("wazero module instance has no MemoryInstance pointer")
	}
	if f, ok := mem.Type().Elem().FieldByName("Buffer"); !ok || f.Type != reflect.TypeFor[[]byte]() {
		return reflect.Value{}, errors.New("wazero memory instance has no Buffer []byte")
	}
	if f, ok := mem.Type().Elem().FieldByName("Cap"); !ok || f.Type.Kind() != reflect.Uint32 {
		return reflect.Value{}, errors.New("wazero memory instance has no Cap uint32")
	}
	eng := s.FieldByName("Engine")
	if !eng.IsValid() || eng.Kind() != reflect.Interface {
		return reflect.Value{}, errors.New("wazero module instance has no Engine")
	}
	if m, ok := eng.Type().MethodByName("MemoryGrown"); !ok || m.Type.NumIn() != 0 || m.Type.NumOut() != 0 {
		return reflect.Value{}, errors.New("wazero module engine has no MemoryGrown()")
	}
	return s, nil
}

// pristine is the state instantiation gave an instance outside memory and globals.
type pristine struct {
	tables [][]uintptr
	data   [][]byte
	elems  [][]uintptr
}

func tableRefs(s reflect.Value, i int) reflect.Value {
	return s.FieldByName("Tables").Index(i).Elem().FieldByName("References")
}

// capturePristine copies s's tables and segment instances, before the instance runs.
func capturePristine(s reflect.Value) pristine {
	var p pristine
	for i := range s.FieldByName("Tables").Len() {
		p.tables = append(p.tables, slices.Clone(tableRefs(s, i).Interface().([]uintptr)))
	}
	p.data = slices.Clone(s.FieldByName("DataInstances").Interface().([][]byte))
	p.elems = slices.Clone(s.FieldByName("ElementInstances").Interface().([][]uintptr))
	return p
}

// restore puts p back into s. Segment slices are copied in place: compiled code holds
// the address of their first element.
func (p *pristine) restore(s reflect.Value) error {
	tables := s.FieldByName("Tables")
	if tables.Len() != len(p.tables) {
		return fmt.Errorf("%d tables, %d at instantiation", tables.Len(), len(p.tables))
	}
	for i, want := range p.tables {
		f := tableRefs(s, i)
		if have := f.Interface().([]uintptr); len(have) == len(want) {
			copy(have, want)
		} else {
			f.Set(reflect.ValueOf(slices.Clone(want))) // grown: back to the initial size
		}
	}
	data := s.FieldByName("DataInstances").Interface().([][]byte)
	elems := s.FieldByName("ElementInstances").Interface().([][]uintptr)
	if len(data) != len(p.data) || len(elems) != len(p.elems) {
		return errors.New("segment instances changed in number")
	}
	copy(data, p.data)
	copy(elems, p.elems)
	return nil
}

// warmInstance is an instance that can serve more than one call.
type warmInstance struct {
	m     api.Module
	alloc *limitedAllocator
	calls *callCtx
	inst  reflect.Value // m's wazero module instance (instanceFields)
	fns   funcCache     // its exported functions, kept across calls
	init  pristine
	used  time.Time // when it last went back to its pool
	bytes int64     // its linear memory, counted while it waits
	intr  *interrupter
	pages []byte // scratch for the page table entries read by each reset (restoreOnto)
}

// newWarm wraps m, just instantiated, so it can be reset after its call; nil when m's
// instance cannot be reached (it is then closed after the call).
func newWarm(m api.Module, alloc *limitedAllocator, calls *callCtx) *warmInstance {
	s, err := instanceFields(m)
	if err != nil {
		return nil
	}
	return &warmInstance{m: m, alloc: alloc, calls: calls, inst: s, init: capturePristine(s)}
}

// reset brings w back to what a fresh instance from snap is. False means it could not,
// and w must be closed.
func (wc *warmConfig) reset(ctx context.Context, w *warmInstance, snap *snapshot) bool {
	mm := w.alloc.mapped
	mem := w.m.Memory()
	size := uint64(snap.pages) * pageSize
	if mm == nil || mem == nil || uint64(mem.Size()) < size || w.m.IsClosed() {
		return false
	}
	if uint64(mem.Size()) > size && w.shrink(mm.buf, size) != nil {
		return false
	}
	if snap.image.restoreOnto(mm.buf, &w.pages) != nil && snap.image.mapOnto(mm.buf) != nil {
		return false
	}
	if snap.restore(w.m) != nil || w.init.restore(w.inst) != nil {
		return false
	}
	if wc.freshSys(ctx, w, wc.idleSys) != nil {
		return false
	}
	w.bytes = int64(mem.Size())
	return true
}

// shrink brings w's memory, which grew past size during its call, back to size bytes of
// buf: the pages past it are discarded and wazero's memory instance, and the length
// compiled code holds, are set to the smaller size.
func (w *warmInstance) shrink(buf []byte, size uint64) error {
	grown := uint64(w.m.Memory().Size())
	if grown > uint64(len(buf)) {
		return fmt.Errorf("memory of %d bytes is past its %d-byte mapping", grown, len(buf))
	}
	if err := discardPages(buf[size:grown]); err != nil {
		return fmt.Errorf("discard grown memory: %w", err)
	}
	mem := w.inst.FieldByName("MemoryInstance").Elem()
	mem.FieldByName("Buffer").Set(reflect.ValueOf(buf[:size:size]))
	mem.FieldByName("Cap").SetUint(size / pageSize)
	w.inst.FieldByName("Engine").MethodByName("MemoryGrown").Call(nil)
	return nil
}

// freshSys gives w the system context wazero builds from cfg for a new instance; the
// context w had is closed, and with it every file its call left open.
func (wc *warmConfig) freshSys(ctx context.Context, w *warmInstance, cfg wazero.ModuleConfig) error {
	donor, err := wc.rt.InstantiateModule(ctx, wc.empty, cfg)
	if err != nil {
		return fmt.Errorf("build a system context: %w", err)
	}
	// The donor is a module instance of the type newWarmConfig checked.
	mine, theirs := w.inst.FieldByName("Sys"), reflect.ValueOf(donor).Elem().FieldByName("Sys")
	old := mine.Interface()
	mine.Set(theirs)
	theirs.Set(reflect.ValueOf(old))
	// A file that fails to close belongs to the old context; the instance has its new one.
	_ = donor.Close(ctx)
	return nil
}

// callCtx carries the context of the call an instance is serving, for host functions
// fixed at instantiation (the guest's sleep).
type callCtx struct {
	p atomic.Pointer[context.Context]
	// intr is the instance's interrupter, for host functions that see the context end
	// before the AfterFunc that sets the flag has run.
	intr atomic.Pointer[interrupter]
	// drawn counts the bytes the guest read from random_get since the instance started.
	drawn atomic.Int64
}

// interrupt sets the instance's interrupt flag now.
func (c *callCtx) interrupt() { c.intr.Load().fire() }

func (c *callCtx) set(ctx context.Context) { c.p.Store(&ctx) }

func (c *callCtx) get() context.Context {
	if p := c.p.Load(); p != nil {
		return *p
	}
	return context.Background()
}

// warmPool holds the warm instances of one compiled module, by init snapshot key (the
// grants an instance can serve: see the top of this file).
type warmPool struct {
	mu    sync.Mutex
	byKey map[[32]byte][]*warmInstance // oldest first
	order [][32]byte
	cfg   *warmConfig
	timer *time.Timer // armed while instances wait, for the oldest one's idle timeout
}

func (p *warmPool) get(key [32]byte) *warmInstance {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.byKey[key]
	if len(list) == 0 {
		return nil
	}
	w := list[len(list)-1]
	p.byKey[key] = list[:len(list)-1]
	p.cfg.metrics.warm(-1, -w.bytes)
	return w
}

// put keeps w for the next call with key, or closes it when the pool is full.
func (p *warmPool) put(ctx context.Context, cfg *warmConfig, key [32]byte, w *warmInstance) {
	p.mu.Lock()
	if p.byKey == nil {
		p.byKey = map[[32]byte][]*warmInstance{}
	}
	p.cfg = cfg
	var closing []*warmInstance
	if _, ok := p.byKey[key]; !ok {
		if len(p.order) == maxWarmKeys {
			old := p.order[0]
			closing = p.byKey[old]
			delete(p.byKey, old)
			p.order = p.order[1:]
		}
		p.order = append(p.order, key)
	}
	if len(p.byKey[key]) < maxWarmPerKey {
		w.used = cfg.now()
		p.byKey[key] = append(p.byKey[key], w)
		cfg.metrics.warm(1, w.bytes)
		if p.timer == nil {
			p.timer = time.AfterFunc(cfg.idle, func() { p.sweep(context.Background()) })
		}
	} else {
		w.m.Close(ctx)
	}
	for _, e := range closing {
		cfg.metrics.warm(-1, -e.bytes)
	}
	p.mu.Unlock()
	for _, e := range closing {
		e.m.Close(ctx)
	}
}

// sweep closes the instances idle for the timeout and re-arms the timer for the next.
func (p *warmPool) sweep(ctx context.Context) {
	p.mu.Lock()
	if p.cfg == nil {
		p.mu.Unlock()
		return
	}
	now := p.cfg.now()
	var closing []*warmInstance
	var next time.Time
	keep := p.order[:0]
	for _, key := range p.order {
		list := p.byKey[key]
		i := 0
		for i < len(list) && !now.Before(list[i].used.Add(p.cfg.idle)) {
			i++
		}
		closing = append(closing, list[:i]...)
		list = list[i:]
		if len(list) > 0 && (next.IsZero() || list[0].used.Before(next)) {
			next = list[0].used
		}
		p.byKey[key] = list
		keep = append(keep, key)
	}
	p.order = keep
	for _, w := range closing {
		p.cfg.metrics.warm(-1, -w.bytes)
	}
	if p.timer != nil {
		if next.IsZero() {
			p.timer.Stop()
			p.timer = nil
		} else {
			p.timer.Reset(next.Add(p.cfg.idle).Sub(now))
		}
	}
	p.mu.Unlock()
	for _, w := range closing {
		w.m.Close(ctx)
	}
}

// drain closes every warm instance, for the engine's Close.
func (p *warmPool) drain(ctx context.Context) {
	p.mu.Lock()
	var closing []*warmInstance
	for _, list := range p.byKey {
		closing = append(closing, list...)
	}
	p.byKey, p.order = nil, nil
	if p.timer != nil {
		p.timer.Stop()
		p.timer = nil
	}
	for _, w := range closing {
		p.cfg.metrics.warm(-1, -w.bytes)
	}
	p.mu.Unlock()
	for _, w := range closing {
		w.m.Close(ctx)
	}
}

// size is how many instances wait in the pool.
func (p *warmPool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, l := range p.byKey {
		n += len(l)
	}
	return n
}
