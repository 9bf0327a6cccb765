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

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/internal/wasmbin"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Components (wasm32-wasip2, wit-component's output) run as a graph of core instances:
// at stage the component is parsed and planned (package component), its world checked
// against what this host serves, and every core module compiled once — the main module
// (the one whose export the world's run lifts) through the engine's pipeline, so it gets
// the interrupt checks, the memory image and the limited allocator; the others (the
// shim of indirect calls, the fixup that fills its table) plainly, as they have no loops
// and no memory. Each call instantiates the graph afresh (compcall.go): wazero resolves
// a module's imports by module name, through experimental.WithImportResolver, to this
// call's instances; a module name whose items come from several places is a small glue
// module (glue.go) re-exporting them; the functions canon lower and resource.drop make
// are one host module per component whose trampolines find the call's WASI host and
// murmur imports in the context. Because the run lift must be a plain lift of the main
// module's export with that module's memory, realloc and post-return, CallTool and
// RunScript call it exactly as they call a core module; a hook component's lifecycle
// functions are checked the same way (hookLifts), so CallHook calls them unchanged.

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
	canonWASI   canonKind = iota + 1 // a wasip2 function (lowered, or a resource drop)
	canonMurmur                      // a murmur host import
)

// canonFunc is a core func made by canon lower or resource.drop.
type canonFunc struct {
	kind            canonKind
	module, name    string // wasi: the import's instance name and function
	host            hostFunc
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

// worldOf is the world a module of role runs.
func worldOf(role manifest.Role) string {
	if role == RoleCapsule {
		return ScriptWorld
	}
	return string(role)
}

// componentWorlds lists the murmur interfaces each role's component may import
// (besides WASI 0.2 and murmur:tool/run for its types), as worlds does for core modules.
var componentWorlds = map[string][]string{
	ScriptWorld:                 {"murmur:tool-registry/invoke"},
	string(manifest.RoleTool):   {"murmur:task/task", "murmur:text/chunks"},
	string(manifest.RoleDriver): {"murmur:text/chunks"},
	hookWorld:                   {"murmur:runtime/inference", "murmur:runtime/tokens", "murmur:task-io/read", "murmur:conversation/read"},
}

// offeredLevels names the interfaces offered with their served levels: "murmur:task/task@0.1.x, …".
func offeredLevels(offered []string) string {
	out := make([]string, len(offered))
	for i, o := range offered {
		out[i] = o + "@" + importLevel(o) + ".x"
	}
	return strings.Join(out, ", ")
}

// isMinor reports whether version is major.minor.x for the given "major.minor".
func isMinor(version, majorMinor string) bool {
	patch, ok := strings.CutPrefix(version, majorMinor+".")
	if !ok || patch == "" || len(patch) > 4 {
		return false
	}
	_, err := strconv.Atoi(patch)
	return err == nil && patch[0] != '-' && patch[0] != '+'
}

// compileComponent parses, plans, checks and compiles a component for artifact, which
// runs world; for a hook or a process driver, it also returns the core export each
// function of its interface lifts.
func (e *Engine) compileComponent(ctx context.Context, artifact, world string, wasm []byte) (_ *compModule, lifts map[string]string, err error) {
	c, err := component.Parse(wasm)
	if err != nil {
		return nil, nil, err
	}
	plan, err := c.Plan()
	if err != nil {
		return nil, nil, err
	}
	main, lifts, err := checkComponentWorld(plan, artifact, world)
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

// servedWASI lists the functions served of a WASI interface, for refusals.
func servedWASI(iface string) string {
	var out []string
	for _, k := range wasip2.Served() {
		if name, ok := strings.CutPrefix(k, iface+"#"); ok {
			out = append(out, name)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func hostFuncNames(fs []hostFunc) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.name
	}
	return strings.Join(names, ", ")
}

func findHostFunc(fs []hostFunc, name string) (hostFunc, bool) {
	for _, f := range fs {
		if f.name == name {
			return f, true
		}
	}
	return hostFunc{}, false
}

// checkComponentWorld refuses, before anything runs, a component that imports what the
// host does not serve to world's role or exports no run (for a hook: no lifecycle
// function; for a process driver: not the whole process interface) the host can call
// directly; it returns the core instance whose exports those lift and, for a hook or a
// process driver, the core export each of its functions lifts.
func checkComponentWorld(plan *component.Plan, artifact, world string) (int, map[string]string, error) {
	if world == ProcessWorld {
		return processLifts(plan, artifact)
	}
	if world == string(manifest.RoleDriver) {
		if err := httpDriverRefusal(artifact, compProcessVersions(plan)); err != nil {
			return -1, nil, err
		}
	}
	w, ok := worlds[world]
	if !ok {
		return -1, nil, errs.New(CodeImport, "runtime", fmt.Sprintf("artifact %s: role %q runs no wasm world in this release", artifact, world),
			"use a tool, driver or script capsule")
	}
	var problems errs.List
	bad := func(code, msg, fix string) {
		problems = append(problems, errs.New(code, "runtime", "artifact "+artifact+": "+msg, fix))
	}
	offered := componentWorlds[world]
	for _, imp := range plan.World.Imports {
		switch {
		case strings.HasPrefix(imp.Interface, "wasi:"):
			checkWASIImport(imp, bad)
		case imp.Interface == "murmur:tool/run" && world != hookWorld && serves(imp.Interface, imp.Version):
			if len(imp.Funcs) > 0 {
				bad(CodeCompImport, fmt.Sprintf("imports functions of %s (%s); it may import that interface for its types only", imp.Name, imp.Funcs[0].Name), "export murmur:tool/run instead of importing its run")
			}
		default:
			fns, known := componentImports[imp.Interface]
			if !known || !isMinor(imp.Version, importLevel(imp.Interface)) {
				bad(CodeCompImport, fmt.Sprintf("imports %s, which this host does not serve (a component may import: wasi:*@0.2.x, murmur:tool/run@0.1.x or 0.2.x for its types, and for a %s %s)", imp.Name, world, offeredLevels(offered)),
					"rebuild the guest without that import, or against a served version")
				continue
			}
			if !slices.Contains(offered, imp.Interface) {
				bad(CodeCompImport, fmt.Sprintf("imports %s, which is not offered to a %s (a %s may import: %s)", imp.Name, world, world, strings.Join(offered, ", ")),
					"rebuild the guest without that import")
				continue
			}
			for _, f := range imp.Funcs {
				hf, ok := findHostFunc(fns, f.Name)
				if !ok {
					bad(CodeCompImport, fmt.Sprintf("imports %s#%s, which this host does not serve (served: %s)", imp.Name, f.Name, hostFuncNames(fns)), "build against the murmur WIT files")
					continue
				}
				if !sameType(f.Type, hf.f) {
					bad(CodeCompType, fmt.Sprintf("imports %s#%s as %s; this host serves %s", imp.Name, f.Name, f.Type.WIT(), funcShape(hf.f)), "build against the murmur WIT files")
				}
			}
		}
	}
	if len(problems) > 0 {
		return -1, nil, problems
	}
	if world == hookWorld {
		return hookLifts(plan, artifact)
	}
	main, err := runLift(plan, artifact, world, w.export)
	return main, nil, err
}

// checkWASIImport passes to bad each reason the WASI import imp is not served: a
// version other than 0.2.x, a function the host lacks or types differently.
func checkWASIImport(imp component.WorldItem, bad func(code, msg, fix string)) {
	if !isMinor(imp.Version, "0.2") {
		bad(CodeCompImport, fmt.Sprintf("imports %s, a version of %s this host does not serve (served: 0.2.x)", imp.Name, imp.Interface), "build against WASI 0.2 (wasm32-wasip2)")
		return
	}
	for _, f := range imp.Funcs {
		fn, ok := probeHost.Func(imp.Name, f.Name)
		if !ok {
			bad(CodeCompImport, fmt.Sprintf("imports %s#%s, which this host does not serve (served of %s: %s)", imp.Name, f.Name, imp.Interface, servedWASI(imp.Interface)),
				"build without that function; see docs/guests.md \"WASI 0.2 interfaces\"")
			continue
		}
		if got := f.Type.WIT(); !sameWIT(got, fn.WIT) && !sameType(f.Type, fn.ABI()) {
			bad(CodeCompType, fmt.Sprintf("imports %s#%s as %s; this host serves %s", imp.Name, f.Name, got, fn.WIT), "build against the WASI 0.2 WIT files")
		}
	}
}

// hookWorld is the world of a hook.
const hookWorld = string(manifest.RoleHook)

// hookLifts finds a hook component's murmur:hook/lifecycle export and checks that each
// lifecycle function it exports is a lift the host can call directly, all of one core
// instance (as runLift checks run); it returns that instance and, by function, the
// core export lifted.
func hookLifts(plan *component.Plan, artifact string) (int, map[string]string, error) {
	iface := abi.HookInterface
	var item *component.WorldItem
	for i := range plan.World.Exports {
		if x := &plan.World.Exports[i]; x.Interface == iface && x.Sort == component.SortInstance {
			if !serves(iface, x.Version) {
				return -1, nil, errs.New(CodeExportVersion, "runtime", fmt.Sprintf("artifact %s exports %s, a version of %s this host does not serve (it %s)", artifact, x.Name, iface, servedLevels(iface)),
					"rebuild the guest against a served version of the interface")
			}
			if item == nil || x.Name > item.Name {
				item = x
			}
		}
	}
	none := func(what string) (int, map[string]string, error) {
		return -1, nil, errs.New(CodeHookExport, "runtime", fmt.Sprintf("artifact %s exports %s, which a hook component must (this host %s)", artifact, what, servedLevels(iface)),
			"export the lifecycle functions the hook answers (wit/murmur-hook-0.9.0.wit)")
	}
	if item == nil {
		return none("no " + iface + "@<version>")
	}
	fail := func(format string, a ...any) (int, error) {
		return -1, errs.New(CodeCompExport, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
			"build the component with wit-component from a core module exporting the lifecycle functions (cargo component, wasm32-wasip2)")
	}
	main, hooks, err := oneInstanceLifts(plan, artifact, item, abi.HookFuncs, "lifecycle", fail)
	if err == nil && main < 0 {
		return none(item.Name + " without a lifecycle function")
	}
	return main, hooks, err
}

// oneInstanceLifts checks each function of the exported interface item that funcs
// names (the others are never called) is a lift the host can call directly, all of one
// core instance; it returns that instance (-1 for none) and, by function, the core
// export lifted. what names the functions in a refusal ("lifecycle", "process").
func oneInstanceLifts(plan *component.Plan, artifact string, item *component.WorldItem, funcs map[string]*abi.Func, what string,
	fail func(string, ...any) (int, error)) (int, map[string]string, error) {
	main := -1
	lifts := map[string]string{}
	for i := range item.Funcs {
		f := &item.Funcs[i]
		want := funcs[f.Name]
		if want == nil {
			continue
		}
		inst, err := checkLift(plan, artifact, item.Name, f, want, fail)
		if err != nil {
			return -1, nil, err
		}
		if main >= 0 && inst != main {
			_, err := fail("%s#%s lifts an export of core instance #%d, the other %s functions of #%d; the host calls them on one instance", item.Name, f.Name, inst, what, main)
			return -1, nil, err
		}
		main = inst
		lifts[f.Name] = item.Name + "#" + f.Name
	}
	return main, lifts, nil
}

// runLift finds the world's run export and checks it is a lift the host can call
// directly: of the core export <iface>@<ver>#run of one module instance, with that
// instance's memory, cabi_realloc and post-return, UTF-8.
func runLift(plan *component.Plan, artifact, world, iface string) (int, error) {
	fail := func(format string, a ...any) (int, error) {
		return -1, errs.New(CodeCompExport, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
			"build the component with wit-component from a core module exporting the run function (cargo component, wasm32-wasip2)")
	}
	var item *component.WorldItem
	for i := range plan.World.Exports {
		if x := &plan.World.Exports[i]; x.Interface == iface && x.Sort == component.SortInstance {
			if !serves(iface, x.Version) {
				return -1, errs.New(CodeExportVersion, "runtime", fmt.Sprintf("artifact %s exports %s, a version of %s this host does not serve (it %s)", artifact, x.Name, iface, servedLevels(iface)),
					"rebuild the guest against a served version of the interface")
			}
			item = x
		}
	}
	if item == nil {
		return fail("exports no %s@<version> with run, which a %s component must (this host %s)", iface, world, servedLevels(iface))
	}
	var run *component.NamedFunc
	for i := range item.Funcs {
		if item.Funcs[i].Name == "run" {
			run = &item.Funcs[i]
		}
	}
	if run == nil {
		return fail("exports %s without a run function", item.Name)
	}
	want := abi.NewFunc(nil, nil)
	if iface == "murmur:tool/run" {
		want = toolRun(item.Name + "#run")
	}
	return checkLift(plan, artifact, item.Name, run, want, fail)
}

// checkLift checks that function f of the exported instance named item is of type want
// and a lift the host can call directly: of the core export <item>#<f> of one module
// instance, with that instance's memory, cabi_realloc and post-return, UTF-8; it
// returns that instance.
func checkLift(plan *component.Plan, artifact, item string, f *component.NamedFunc, want *abi.Func, fail func(string, ...any) (int, error)) (int, error) {
	export := item + "#" + f.Name
	if !sameType(f.Type, want) {
		return fail("exports %s as %s; this host calls %s", export, f.Type.WIT(), funcShape(want))
	}
	if f.Ref.Import != "" {
		return fail("re-exports an imported function (%s) as %s; the host calls only a lift of its own core export", f.Ref, export)
	}
	var lift *component.Step
	for i := range plan.Steps {
		if s := &plan.Steps[i]; s.Kind == component.StepLift && s.Lift == f.Ref.Lift {
			lift = s
		}
	}
	switch {
	case lift == nil:
		return fail("%s is not a lift", export)
	case lift.Core.Instance < 0 || lift.Core.Name != export:
		return fail("%s lifts %s, not a core export named %q the host could call directly", export, lift.Core, export)
	}
	main := lift.Core.Instance
	is := func(it *component.CoreItem, name string) bool {
		return it != nil && it.Instance == main && it.Name == name
	}
	o := lift.Options
	switch {
	case o.StringEncoding != "" && o.StringEncoding != "utf8":
		return -1, errs.New(CodeCompGraph, "runtime", fmt.Sprintf("artifact %s: %s uses string-encoding=%s; only utf8 is supported", artifact, export, o.StringEncoding), "build with UTF-8 strings (the default)")
	case o.Memory != nil && !is(o.Memory, "memory"):
		return fail("%s lifts with memory %s, not core instance #%d's \"memory\"", export, o.Memory, main)
	case o.Realloc != nil && !is(o.Realloc, abi.ExportRealloc):
		return fail("%s lifts with realloc %s, not core instance #%d's %q", export, o.Realloc, main, abi.ExportRealloc)
	case o.PostReturn != nil && !is(o.PostReturn, abi.PostReturnPrefix+export):
		return fail("%s lifts with post-return %s, not core instance #%d's %q", export, o.PostReturn, main, abi.PostReturnPrefix+export)
	}
	return main, nil
}

// buildComponent compiles the graph of plan (checked by checkComponentWorld, main its
// main instance) and the glue and host modules that run it.
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
			f, err := lowerFunc(s, artifact)
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
func lowerFunc(s component.Step, artifact string) (canonFunc, error) {
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
		hf, ok := findHostFunc(componentImports[iface], s.Callee.Name)
		if !ok {
			return refuse(CodeCompImport, "lowers %s, which this host does not serve", s.Callee)
		}
		f.kind, f.host = canonMurmur, hf
		params, results = hf.f.ImportSignature()
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

// sameWIT reports whether two renderings of a function type are the same type: the
// plan writes a returned handle as own<T> where a WIT file may write T.
func sameWIT(a, b string) bool {
	return a == b || normWIT(a) == normWIT(b)
}

// normWIT spells own<T> as T, result<_, _> as result and result<T, _> as result<T>:
// the differences between the plan's rendering and the host's.
func normWIT(s string) string {
	s = strings.ReplaceAll(strings.ReplaceAll(s, "result<_, _>", "result"), ", _>", ">")
	var b strings.Builder
	for {
		i := strings.Index(s, "own<")
		if i < 0 || (i > 0 && isIdent(s[i-1])) {
			if i < 0 {
				b.WriteString(s)
				return b.String()
			}
			b.WriteString(s[:i+4])
			s = s[i+4:]
			continue
		}
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(s[i+4 : i+j])
		s = s[i+j+1:]
	}
}

func isIdent(c byte) bool {
	return c == '-' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// sameType reports whether the component function type t is the host's function f
// structurally: type names aside (a WIT alias such as filesize for u64, or headers for
// the resource fields, is the type it names); labels, field names, resources count.
func sameType(t *component.Type, f *abi.Func) bool {
	if f == nil {
		return false
	}
	got, err := unaliased(t, 0).Func()
	return err == nil && funcShape(got) == funcShape(f)
}

// unaliased copies t with every handle naming its resource by the resource's own name
// rather than an alias's.
func unaliased(t *component.Type, depth int) *component.Type {
	if t == nil || depth > 64 {
		return t
	}
	n := *t
	d := depth + 1
	switch t.Kind {
	case component.KindOwn, component.KindBorrow:
		if t.Target != nil && t.Target.Resource != nil && t.Target.Resource.Name != "" {
			tg := *t.Target
			tg.Name = t.Target.Resource.Name
			n.Target = &tg
		}
	case component.KindList, component.KindOption:
		n.Elem = unaliased(t.Elem, d)
	case component.KindResult:
		n.OK, n.Err = unaliased(t.OK, d), unaliased(t.Err, d)
	case component.KindTuple:
		n.Elems = make([]*component.Type, len(t.Elems))
		for i, e := range t.Elems {
			n.Elems[i] = unaliased(e, d)
		}
	case component.KindRecord, component.KindFunc:
		n.Fields = make([]component.Field, len(t.Fields))
		for i, f := range t.Fields {
			n.Fields[i] = component.Field{Name: f.Name, Type: unaliased(f.Type, d)}
		}
		n.Result = unaliased(t.Result, d)
	case component.KindVariant:
		n.Cases = make([]component.Case, len(t.Cases))
		for i, c := range t.Cases {
			n.Cases[i] = component.Case{Name: c.Name, Type: unaliased(c.Type, d)}
		}
	}
	return &n
}

// funcShape renders a function type with every named type spelt out.
func funcShape(f *abi.Func) string {
	var b strings.Builder
	b.WriteString("func(")
	for i, p := range f.Params() {
		if i > 0 {
			b.WriteString(", ")
		}
		writeShape(&b, p)
	}
	b.WriteString(")")
	for _, r := range f.Results() {
		b.WriteString(" -> ")
		writeShape(&b, r)
	}
	return b.String()
}

func writeShape(b *strings.Builder, t *abi.Type) {
	if t == nil {
		b.WriteString("_")
		return
	}
	switch t.Kind() {
	case abi.KindList, abi.KindOption:
		b.WriteString(map[abi.Kind]string{abi.KindList: "list<", abi.KindOption: "option<"}[t.Kind()])
		writeShape(b, t.Elem())
		b.WriteString(">")
	case abi.KindRecord, abi.KindTuple:
		b.WriteString(map[abi.Kind]string{abi.KindRecord: "record {", abi.KindTuple: "tuple {"}[t.Kind()])
		for _, f := range t.Fields() {
			b.WriteString(" " + f.Name + ": ")
			writeShape(b, f.Type)
		}
		b.WriteString(" }")
	case abi.KindResult, abi.KindVariant, abi.KindEnum:
		b.WriteString(map[abi.Kind]string{abi.KindResult: "result {", abi.KindVariant: "variant {", abi.KindEnum: "enum {"}[t.Kind()])
		for _, c := range t.Cases() {
			b.WriteString(" " + c.Name)
			if c.Type != nil {
				b.WriteString("(")
				writeShape(b, c.Type)
				b.WriteString(")")
			}
		}
		b.WriteString(" }")
	case abi.KindFlags:
		b.WriteString("flags { " + strings.Join(t.Labels(), " ") + " }")
	case abi.KindOwn, abi.KindBorrow:
		b.WriteString(map[abi.Kind]string{abi.KindOwn: "own<", abi.KindBorrow: "borrow<"}[t.Kind()] + t.Resource() + ">")
	default:
		b.WriteString(t.Named("").String())
	}
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
