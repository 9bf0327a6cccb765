package wasm

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/wasmbin"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Components (wasm32-wasip2, wit-component's output) run as a graph of core instances:
// at stage the component is parsed and planned (package component), its world checked
// against what the host serves (the World it is compiled with, which also picks the main
// instance), and every core module compiled once — the main module
// (the one whose export the world's run lifts) through the engine's pipeline, so it gets
// the interrupt checks, the memory image and the limited allocator; the others (the
// shim of indirect calls, the fixup that fills its table) plainly, as they have no loops
// and no memory. Each call instantiates the graph afresh (compcall.go): wazero resolves
// a module's imports by module name, through experimental.WithImportResolver, to this
// call's instances; a module name whose items come from several places is a small glue
// module (glue.go) re-exporting them; the functions canon lower and resource.drop make
// are one host module per component whose trampolines find the call's WASI host in the
// context and serve the host modules' functions (WithHost). Because a World checks that
// the functions the host calls are plain lifts of the main module's exports with that
// module's memory, realloc and post-return, Instance.CallLifted calls them exactly as it
// calls a core module's.

// compModule is a component compiled at stage.
type compModule struct {
	plan *component.Plan
	// main is the core instance whose exports the world's run lifts; mainModule its plan
	// module, compiled as the Module's own compiled module.
	main, mainModule int
	mods             []wazero.CompiledModule // by plan module (nil for mainModule)
	steps            []instStep
	canon            wazero.CompiledModule // the host module of the canon-made funcs
	fns              []canonFunc           // by core func
	// bindFor lists, by core instance, the canon funcs whose memory or realloc it exports.
	bindFor [][]int
	mainC   *compiled
	// preview1: the main module imports wasi_snapshot_preview1, served by the engine's
	// preview1 host with the call's grants.
	preview1 bool
	// initByGraph: another module's start function calls main's _initialize (wit-component
	// does so for a reactor module), so the call must not run it a second time.
	initByGraph bool
}

// instStep is one core module instantiation: which module, and where each of its import
// module names resolves.
type instStep struct {
	instance, module int
	groups           []importGroup
	glues            []wazero.CompiledModule
}

// importGroup is one import module name of an instantiation: either one earlier instance
// as is (direct), or glue module number glue of the step, re-exporting items of several.
// The groups of a step share one glue module unless two of them import different items
// under the same name.
type importGroup struct {
	name   string
	direct int
	glue   int
}

type canonKind uint8

const (
	canonWASI canonKind = iota + 1 // a wasip2 function (lowered, or a resource drop)
	canonHost                      // a function of a host module (WithHost)
)

// canonFunc is a core func made by canon lower or resource.drop.
type canonFunc struct {
	kind            canonKind
	module, name    string // wasi: the import's instance name and function
	host            HostFunc
	sig             *component.CoreFuncType
	memory, realloc *component.CoreItem
}

// wasiP1 is the preview1 import module; viaPreview1 marks an import group resolved to
// the engine's preview1 host.
const (
	wasiP1      = "wasi_snapshot_preview1"
	viaPreview1 = -2
)

// Names under which glue modules import: the canon host module, and core instance N.
const (
	glueCanon      = "\x00canon"
	glueInstPrefix = "\x00i"
)

// isComponent reports whether b has the component layer in its header.
func isComponent(b []byte) bool {
	return len(b) >= 8 && string(b[:4]) == "\x00asm" && b[6] == 1 && b[7] == 0
}

// compileComponent parses, plans, checks and compiles a component for artifact, which
// runs world; it also returns the core exports world named for its functions.
func (e *Engine) compileComponent(ctx context.Context, artifact string, world World, wasm []byte) (_ *compModule, lifts map[string]string, err error) {
	if world == nil {
		return nil, nil, errs.New(CodeCompExport, "runtime", "artifact "+artifact+": the host names no world to run the component in",
			"compile the component with its role's world")
	}
	c, err := component.Parse(wasm)
	if err != nil {
		return nil, nil, err
	}
	plan, err := c.Plan()
	if err != nil {
		return nil, nil, err
	}
	main, lifts, err := world(plan, artifact)
	if err != nil {
		return nil, nil, err
	}
	// Keyed by the main instance too: the same bytes run as another world may lift
	// that world's functions from another core instance.
	key := compKey{sum: sha256.Sum256(wasm), main: main}
	e.mu.Lock()
	cm := e.components[key]
	e.mu.Unlock()
	if cm != nil {
		return cm, lifts, nil
	}
	if cm, err = e.buildComponent(ctx, artifact, plan, main); err != nil {
		return nil, nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if prev := e.components[key]; prev != nil {
		return prev, lifts, nil // compiled meanwhile by another stage; ours is dropped with the runtime
	}
	e.components[key] = cm
	return cm, lifts, nil
}

// compKey is a compiled component's key: the component's sha256 and its main instance.
type compKey struct {
	sum  [32]byte
	main int
}

// probeHost answers which WASI 0.2 functions are served, with their types.
var probeHost = wasip2.New(wasip2.Env{})

// buildComponent compiles the graph of plan (checked by its World, main its main
// instance) and the glue and host modules that run it.
func (e *Engine) buildComponent(ctx context.Context, artifact string, plan *component.Plan, main int) (cm *compModule, err error) {
	graph := func(format string, a ...any) error {
		return errs.New(CodeCompGraph, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
			"build the component with wit-component for wasm32-wasip2 from one core module; see docs/guests.md \"Components\"")
	}
	cm = &compModule{plan: plan, main: main, mainModule: -1, fns: make([]canonFunc, plan.CoreFuncs),
		bindFor: make([][]int, plan.CoreInstances), mods: make([]wazero.CompiledModule, len(plan.Modules))}
	for _, s := range plan.Steps {
		if s.Kind == component.StepInstantiate && s.Instance == main {
			cm.mainModule = s.Module
		}
	}
	// The preview1 adapter: the main module's wasi_snapshot_preview1 imports are served by
	// the engine's preview1 host instead (the adapter is still instantiated, unused by
	// main); another module importing preview1 is refused.
	for i, m := range plan.Modules {
		for _, imp := range m.Imports {
			if imp.Module != wasiP1 {
				continue
			}
			if i != cm.mainModule {
				return nil, errs.New(CodeCompAdapter, "runtime", fmt.Sprintf("artifact %s: core module %d of the component, not its main module, imports %s (%s); only the main module's preview1 imports can be served by the host", artifact, i, wasiP1, imp.Name),
					"build for wasm32-wasip2 directly (no adapter), or ship the core module for WASI preview1 instead of the component")
			}
			cm.preview1 = true
		}
	}
	if cm.mainModule < 0 {
		return nil, graph("core instance #%d, whose export the run lifts, is not a module instance", main)
	}
	for _, s := range plan.Steps {
		if s.Kind != component.StepInstantiate || s.Instance == main || !hasStart(plan.Modules[s.Module].Bytes) {
			continue
		}
		for _, imp := range s.Imports {
			if imp.Item.Kind == component.CoreFunc && imp.Item.Instance == main && imp.Item.Name == abi.ExportInitialize {
				cm.initByGraph = true
			}
		}
	}
	for _, s := range plan.Steps {
		switch s.Kind {
		case component.StepDefineResource:
			return nil, graph("defines its own resource (%s); only the host's WASI resources are supported", s.Resource)
		case component.StepResourceNew, component.StepResourceRep:
			return nil, graph("uses %s of %s; only the host's WASI resources are supported", s.Kind, s.Resource)
		case component.StepResourceDrop:
			if s.Resource.Defined >= 0 {
				return nil, graph("drops its own resource (%s)", s.Resource)
			}
			f := canonFunc{kind: canonWASI, module: s.Resource.Import, name: "[resource-drop]" + s.Resource.Name, sig: s.Sig}
			if _, ok := probeHost.Func(f.module, f.name); !ok {
				return nil, errs.New(CodeCompImport, "runtime", fmt.Sprintf("artifact %s: drops resource %s, which this host does not serve", artifact, s.Resource), "build against WASI 0.2")
			}
			cm.fns[s.Func] = f
		case component.StepLower:
			f, err := lowerFunc(s, artifact, e.host)
			if err != nil {
				return nil, err
			}
			for _, it := range []*component.CoreItem{f.memory, f.realloc} {
				if it == nil {
					continue
				}
				if it.Instance < 0 {
					return nil, graph("a lowering's canon option is %s; only a module instance's exports are supported", it)
				}
				if !slices.Contains(cm.bindFor[it.Instance], s.Func) {
					cm.bindFor[it.Instance] = append(cm.bindFor[it.Instance], s.Func)
				}
			}
			cm.fns[s.Func] = f
		case component.StepLift:
			if enc := s.Options.StringEncoding; enc != "" && enc != "utf8" {
				return nil, graph("lifts with string-encoding=%s; only utf8 is supported", enc)
			}
		case component.StepInstantiate:
			st, err := cm.groups(s, graph)
			if err != nil {
				return nil, err
			}
			cm.steps = append(cm.steps, st)
		}
	}
	// Compile: the main module through the pipeline, the rest on the same runtime.
	code := make([][]byte, len(plan.Modules))
	for i, m := range plan.Modules {
		var ok bool
		if code[i], ok = renameEmptyImports(m.Bytes); !ok {
			return nil, graph("core module %d's imports cannot be read", i)
		}
	}
	mainC, err := e.compile(ctx, code[cm.mainModule])
	if err != nil {
		return nil, fmt.Errorf("the main core module does not compile: %w", err)
	}
	cm.mainC = mainC
	rt := mainC.rt
	if cm.preview1 {
		if err := checkPreview1(rt, plan.Modules[cm.mainModule], artifact); err != nil {
			return nil, err
		}
	}
	var made []wazero.CompiledModule
	defer func() {
		if err != nil {
			for _, m := range made {
				m.Close(ctx)
			}
		}
	}()
	for i := range plan.Modules {
		if i == cm.mainModule {
			continue
		}
		if cm.mods[i], err = rt.CompileModule(ctx, code[i]); err != nil {
			return nil, fmt.Errorf("core module %d does not compile: %w", i, err)
		}
		made = append(made, cm.mods[i])
	}
	for si := range cm.steps {
		st := &cm.steps[si]
		for _, items := range glueModules(plan, st) {
			g, err := rt.CompileModule(ctx, buildGlue(items))
			if err != nil {
				return nil, fmt.Errorf("glue of core instance #%d's imports: %w", st.instance, err)
			}
			made = append(made, g)
			st.glues = append(st.glues, g)
		}
	}
	b := rt.NewHostModuleBuilder("capsulegate:component")
	for i, f := range cm.fns {
		if f.kind == 0 {
			continue
		}
		b.NewFunctionBuilder().WithGoModuleFunction(canonTrampoline(i), valueTypes(f.sig.Params), valueTypes(f.sig.Results)).Export("c" + strconv.Itoa(i))
	}
	if cm.canon, err = b.Compile(ctx); err != nil {
		return nil, fmt.Errorf("the component's host functions: %w", err)
	}
	return cm, nil
}

// lowerFunc checks one canon lower and returns what serves it.
func lowerFunc(s component.Step, artifact string, host *hostSet) (canonFunc, error) {
	refuse := func(code, format string, a ...any) (canonFunc, error) {
		return canonFunc{}, errs.New(code, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
			"build the component with wit-component for wasm32-wasip2; see docs/guests.md \"Components\"")
	}
	if enc := s.Options.StringEncoding; enc != "" && enc != "utf8" {
		return refuse(CodeCompGraph, "lowers %s with string-encoding=%s; only utf8 is supported", s.Callee, enc)
	}
	if s.Callee.Import == "" {
		return refuse(CodeCompGraph, "lowers a function it lifts itself (%s); components calling their own exports are not supported", s.Callee)
	}
	if s.Callee.Name == "" {
		return refuse(CodeCompImport, "imports a bare function (%s); only interface instances are served", s.Callee)
	}
	f := canonFunc{module: s.Callee.Import, name: s.Callee.Name, sig: s.Sig, memory: s.Options.Memory, realloc: s.Options.Realloc}
	var params, results []abi.ValType
	iface, _ := component.SplitName(s.Callee.Import)
	if strings.HasPrefix(iface, "wasi:") {
		fn, ok := probeHost.Func(s.Callee.Import, s.Callee.Name)
		if !ok {
			return refuse(CodeCompImport, "lowers %s, which this host does not serve", s.Callee)
		}
		f.kind = canonWASI
		params, results = abiVals(fn.Params), abiVals(fn.Results)
	} else {
		hf, ok := host.componentFunc(iface, s.Callee.Name)
		if !ok {
			return refuse(CodeCompImport, "lowers %s, which this host does not serve", s.Callee)
		}
		f.kind, f.host = canonHost, hf
		params, results = hf.Func.ImportSignature()
	}
	if !s.Sig.Equal(&component.CoreFuncType{Params: params, Results: results}) {
		return refuse(CodeCompType, "lowers %s with core type %s; the host's is %s", s.Callee, s.Sig, &component.CoreFuncType{Params: params, Results: results})
	}
	return f, nil
}

// groups resolves each import module name of instantiation s.
func (cm *compModule) groups(s component.Step, graph func(string, ...any) error) (instStep, error) {
	st := instStep{instance: s.Instance, module: s.Module}
	mod := cm.plan.Modules[s.Module]
	idx := map[string]int{}
	for j, imp := range s.Imports {
		switch imp.Kind {
		case component.CoreFunc, component.CoreTable, component.CoreMemory:
		default:
			return st, graph("core module %d imports %s %q.%q; only functions, tables and memories are supported", s.Module, imp.Kind, imp.Module, imp.Name)
		}
		if imp.Item.Instance < 0 {
			f := cm.fns[imp.Item.Func]
			if f.kind == 0 {
				return st, graph("core module %d imports %q.%q from %s, which this host cannot make", s.Module, imp.Module, imp.Name, imp.Item)
			}
			if !f.sig.Equal(mod.Imports[j].Func) {
				return st, graph("core module %d imports %q.%q as %s; it is given %s", s.Module, imp.Module, imp.Name, mod.Imports[j].Func, f.sig)
			}
		}
		gi, ok := idx[imp.Module]
		if !ok {
			gi = len(st.groups)
			idx[imp.Module] = gi
			st.groups = append(st.groups, importGroup{name: importModuleName(imp.Module), direct: imp.Item.Instance})
		}
		if g := &st.groups[gi]; g.direct >= 0 && (imp.Item.Instance != g.direct || imp.Item.Name != imp.Name) {
			g.direct = -1
		}
	}
	if s.Instance == cm.main {
		for gi := range st.groups {
			if g := &st.groups[gi]; g.name == wasiP1 {
				g.direct = viaPreview1
			}
		}
	}
	mems := map[string]int{}
	for _, imp := range s.Imports {
		if imp.Kind == component.CoreMemory {
			if mems[imp.Module]++; mems[imp.Module] > 1 {
				return st, graph("core module %d imports several memories from %q", s.Module, imp.Module)
			}
		}
	}
	return st, nil
}

// glueModules assigns st's indirect groups to glue modules and lists what each imports
// and exports: one module for all of them, or one per group when two groups import
// different items under the same name.
func glueModules(plan *component.Plan, st *instStep) [][]glueImport {
	var all []glueImport
	byName := map[string]glueImport{}
	merged := true
	for gi := range st.groups {
		g := &st.groups[gi]
		g.glue = -1
		if g.direct != -1 {
			continue
		}
		for _, it := range glueItems(plan, *st, g.name) {
			prev, seen := byName[it.Export]
			switch {
			case !seen:
				byName[it.Export] = it
				all = append(all, it)
			case prev.Module != it.Module || prev.Name != it.Name || prev.Kind != it.Kind || !prev.Func.Equal(it.Func):
				merged = false
			}
		}
	}
	var out [][]glueImport
	for gi := range st.groups {
		g := &st.groups[gi]
		if g.direct != -1 {
			continue
		}
		switch {
		case !merged:
			g.glue = len(out)
			out = append(out, glueItems(plan, *st, g.name))
		case len(out) == 0:
			out = append(out, all)
			fallthrough
		default:
			g.glue = 0
		}
	}
	return out
}

// glueItems lists what the glue module of import module name of st imports and exports.
func glueItems(plan *component.Plan, st instStep, name string) []glueImport {
	var s component.Step
	for _, x := range plan.Steps {
		if x.Kind == component.StepInstantiate && x.Instance == st.instance {
			s = x
		}
	}
	mod := plan.Modules[s.Module]
	var items []glueImport
	for j, imp := range s.Imports {
		if importModuleName(imp.Module) != name {
			continue
		}
		it := glueImport{Export: imp.Name, Kind: imp.Kind, Func: mod.Imports[j].Func}
		if imp.Item.Instance < 0 {
			it.Module, it.Name = glueCanon, "c"+strconv.Itoa(imp.Item.Func)
		} else {
			it.Module, it.Name = glueInstPrefix+strconv.Itoa(imp.Item.Instance), imp.Item.Name
		}
		items = append(items, it)
	}
	return items
}

func abiVals(v []api.ValueType) []abi.ValType {
	out := make([]abi.ValType, len(v))
	for i, t := range v {
		out[i] = abi.ValType(t)
	}
	return out
}

// hasStart reports whether the core module mod has a start section.
func hasStart(mod []byte) bool {
	secs, _ := wasmbin.Sections(mod)
	for _, sec := range secs {
		if sec.ID == 8 {
			return true
		}
	}
	return false
}

// checkPreview1 refuses a main module importing a preview1 function the engine's
// preview1 host does not have, or with another signature.
func checkPreview1(rt wazero.Runtime, m *component.Module, artifact string) error {
	host := rt.Module(wasiP1)
	if host == nil {
		return errs.New(CodeCompAdapter, "runtime", "artifact "+artifact+": the engine has no preview1 host", "")
	}
	defs := host.ExportedFunctionDefinitions()
	for _, imp := range m.Imports {
		if imp.Module != wasiP1 {
			continue
		}
		d, ok := defs[preview1Name(imp.Name)]
		want := &component.CoreFuncType{}
		if ok {
			want.Params, want.Results = abiVals(d.ParamTypes()), abiVals(d.ResultTypes())
		}
		if imp.Kind != component.CoreFunc || !ok || !want.Equal(imp.Func) {
			return errs.New(CodeCompAdapter, "runtime", fmt.Sprintf("artifact %s: the main module imports %s %q, which the preview1 host does not serve with that type", artifact, wasiP1, imp.Name),
				"build for wasm32-wasip2 directly (no adapter)")
		}
	}
	return nil
}
