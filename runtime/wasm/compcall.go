package wasm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// compCall is one call's component instance state, found by the canon trampolines in
// the call's context.
type compCall struct {
	cm    *compModule
	host  *wasip2.Host
	binds []wasip2.Binding // by core func, set once the instance owning them exists
	funcs []wasip2.Func    // by core func, looked up at first use
}

type compCallKey struct{}

// canonTrampoline is the host function of canon func i: it serves the call in ctx.
func canonTrampoline(i int) api.GoModuleFunc {
	return func(ctx context.Context, _ api.Module, stack []uint64) {
		cc, _ := ctx.Value(compCallKey{}).(*compCall)
		if cc == nil {
			panic(errors.New("a component's host function was called outside its call"))
		}
		if err := cc.call(ctx, i, stack); err != nil {
			panic(err)
		}
	}
}

func (cc *compCall) call(ctx context.Context, i int, stack []uint64) error {
	f := &cc.cm.fns[i]
	b := cc.binds[i]
	if f.kind == canonHost {
		var mem abi.Memory = b.Memory
		if mem == nil {
			mem = emptyMemory{}
		}
		return serveImport(ctx, f.host, mem, b.Realloc, stack)
	}
	fn := &cc.funcs[i]
	if fn.Name == "" {
		var ok bool
		if *fn, ok = cc.host.Func(f.module, f.name); !ok {
			return fmt.Errorf("%s#%s is not served", f.module, f.name) // checked at stage
		}
	}
	return fn.Call(ctx, b, stack)
}

// bind gives the canon funcs whose options instance inst (now m) exports their binding.
func (cc *compCall) bind(inst int, m api.Module) {
	for _, i := range cc.cm.bindFor[inst] {
		f := &cc.cm.fns[i]
		if f.memory != nil && f.memory.Instance == inst {
			if mem := m.ExportedMemory(f.memory.Name); mem != nil {
				cc.binds[i].Memory = mem
			}
		}
		if f.realloc != nil && f.realloc.Instance == inst {
			if r := m.ExportedFunction(f.realloc.Name); r != nil {
				cc.binds[i].Realloc = reallocFunc(r)
			}
		}
	}
}

func reallocFunc(f api.Function) abi.Realloc {
	return func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error) {
		res, err := f.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
		if err != nil {
			return 0, err
		}
		return uint32(res[0]), nil
	}
}

// emptyMemory stands in for a lowering without a memory: every access is out of bounds.
type emptyMemory struct{}

func (emptyMemory) Size() uint32                       { return 0 }
func (emptyMemory) Read(uint32, uint32) ([]byte, bool) { return nil, false }
func (emptyMemory) Write(uint32, []byte) bool          { return false }

// callComponent instantiates mod's component graph for one call planned in p, runs fn
// on its main instance, and closes every instance (in reverse order) and the WASI host,
// whatever happened; interrupted reports whether the main instance's flag was set.
func (e *Engine) callComponent(ctx context.Context, mod *Module, g Grants, p *callPlan, fn func(ctx context.Context, inst *Instance) error, interrupted *bool) error {
	cm := mod.comp
	rt := mod.rt
	env := wasip2.Env{FS: g.FS, Env: goGCEnv(g.Env, p.limit), Args: []string{mod.Artifact}, Stdout: g.Stdout, Stderr: g.Stderr, Interrupt: p.calls.interrupt,
		HTTP: g.HTTP, HTTPCheck: g.HTTPCheck}
	cc := &compCall{cm: cm, host: wasip2.New(env), binds: make([]wasip2.Binding, len(cm.fns)), funcs: make([]wasip2.Func, len(cm.fns))}
	ctx = context.WithValue(ctx, compCallKey{}, cc)

	insts := make([]api.Module, cm.plan.CoreInstances)
	var opened []api.Module
	disarm := func() bool { return false }
	defer func() {
		*interrupted = disarm()
		closeCtx := context.WithoutCancel(ctx)
		for i := len(opened) - 1; i >= 0; i-- {
			opened[i].Close(closeCtx)
		}
		cc.host.Close()
	}()

	var canon api.Module
	var cur map[string]api.Module // the import module names of the instantiation at hand
	rctx := experimental.WithImportResolver(ctx, func(name string) api.Module {
		if name == glueCanon {
			return canon
		}
		if n, ok := strings.CutPrefix(name, glueInstPrefix); ok {
			if i, err := strconv.Atoi(n); err == nil && i >= 0 && i < len(insts) {
				return insts[i]
			}
			return nil
		}
		return cur[name]
	})
	// Modules other than main have no memory in wit-component's output; should one have,
	// it is capped at the same limit.
	otherCtx := experimental.WithMemoryAllocator(rctx, &limitedAllocator{limit: p.limit})
	mainCtx := experimental.WithMemoryAllocator(rctx, p.alloc)
	// A random source of our own: wazero's default seeds a fake one per instance, which
	// cost most of a component call's time (the guests' randomness is wasi:random's).
	cfg := wazero.NewModuleConfig().WithName("").WithStartFunctions().WithRandSource(randReader{})

	var err error
	if canon, err = rt.InstantiateModule(rctx, cm.canon, cfg); err != nil {
		return fmt.Errorf("component host functions: %w", err)
	}
	opened = append(opened, canon)
	for _, st := range cm.steps {
		glues := make([]api.Module, len(st.glues))
		for i, g := range st.glues {
			gm, err := rt.InstantiateModule(rctx, g, cfg)
			if err != nil {
				return fmt.Errorf("core instance #%d's imports: %w", st.instance, err)
			}
			opened = append(opened, gm)
			glues[i] = gm
		}
		cur = make(map[string]api.Module, len(st.groups))
		for _, gr := range st.groups {
			switch {
			case gr.direct >= 0:
				cur[gr.name] = insts[gr.direct]
			case gr.direct == viaPreview1:
				// Not resolved here: wazero then takes the runtime's module of that name.
			default:
				cur[gr.name] = glues[gr.glue]
			}
		}
		ictx, compiled, icfg := otherCtx, cm.mods[st.module], cfg
		if st.instance == cm.main {
			ictx, compiled = mainCtx, mod.module
			if cm.preview1 {
				// The preview1 host reads the grants from the calling module's config.
				icfg = moduleConfig(g, p.limit, p.calls)
			}
			mod.instantiations.Add(1)
		}
		m, err := rt.InstantiateModule(ictx, compiled, icfg)
		if err != nil {
			return fmt.Errorf("core instance #%d: %w", st.instance, err)
		}
		opened = append(opened, m)
		insts[st.instance] = m
		cc.bind(st.instance, m)
		if st.instance == cm.main {
			// Armed before any of the main module's code runs.
			intr := newInterrupter(m)
			p.calls.intr.Store(intr)
			disarm = intr.arm(ctx)
			if mod.movedStart {
				if _, err := m.ExportedFunction(startExport).Call(ctx); err != nil {
					return fmt.Errorf("start function: %w", err)
				}
			}
		}
	}
	main := insts[cm.main]
	if f := main.ExportedFunction(abi.ExportInitialize); f != nil && !cm.initByGraph {
		if _, err := f.Call(ctx); err != nil {
			return err
		}
	}
	return fn(ctx, &Instance{Module: main, mod: mod})
}
