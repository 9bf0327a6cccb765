package murmur

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// A component's world is checked at compile, not only by CheckWorld: the check picks
// the core instance whose exports the host calls (the engine's wasm.World), so
// checkComponentWorld is what Compile hands the engine.

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
	ScriptWorld:                 {"murmur:tool-registry/invoke", artifactsInterface, messageInterface},
	string(manifest.RoleTool):   {"murmur:task/task", "murmur:text/chunks", messageInterface},
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

func hostFuncNames(fs []wasm.HostFunc) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func findHostFunc(fs []wasm.HostFunc, name string) (wasm.HostFunc, bool) {
	for _, f := range fs {
		if f.Name == name {
			return f, true
		}
	}
	return wasm.HostFunc{}, false
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
				bad(wasm.CodeCompImport, fmt.Sprintf("imports functions of %s (%s); it may import that interface for its types only", imp.Name, imp.Funcs[0].Name), "export murmur:tool/run instead of importing its run")
			}
		default:
			fns, known := componentImports[imp.Interface]
			if !known || !isMinor(imp.Version, importLevel(imp.Interface)) {
				bad(wasm.CodeCompImport, fmt.Sprintf("imports %s, which this host does not serve (a component may import: wasi:*@0.2.x, murmur:tool/run@0.1.x or 0.2.x for its types, and for a %s %s)", imp.Name, world, offeredLevels(offered)),
					"rebuild the guest without that import, or against a served version")
				continue
			}
			if !slices.Contains(offered, imp.Interface) {
				bad(wasm.CodeCompImport, fmt.Sprintf("imports %s, which is not offered to a %s (a %s may import: %s)", imp.Name, world, world, strings.Join(offered, ", ")),
					"rebuild the guest without that import")
				continue
			}
			for _, f := range imp.Funcs {
				hf, ok := findHostFunc(fns, f.Name)
				if !ok {
					bad(wasm.CodeCompImport, fmt.Sprintf("imports %s#%s, which this host does not serve (served: %s)", imp.Name, f.Name, hostFuncNames(fns)), "build against the murmur WIT files")
					continue
				}
				if !sameType(f.Type, hf.Func) {
					bad(wasm.CodeCompType, fmt.Sprintf("imports %s#%s as %s; this host serves %s", imp.Name, f.Name, f.Type.WIT(), funcShape(hf.Func)), "build against the murmur WIT files")
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
		bad(wasm.CodeCompImport, fmt.Sprintf("imports %s, a version of %s this host does not serve (served: 0.2.x)", imp.Name, imp.Interface), "build against WASI 0.2 (wasm32-wasip2)")
		return
	}
	for _, f := range imp.Funcs {
		fn, ok := probeHost.Func(imp.Name, f.Name)
		if !ok {
			bad(wasm.CodeCompImport, fmt.Sprintf("imports %s#%s, which this host does not serve (served of %s: %s)", imp.Name, f.Name, imp.Interface, servedWASI(imp.Interface)),
				"build without that function; see docs/guests.md \"WASI 0.2 interfaces\"")
			continue
		}
		if got := f.Type.WIT(); !sameWIT(got, fn.WIT) && !sameType(f.Type, fn.ABI()) {
			bad(wasm.CodeCompType, fmt.Sprintf("imports %s#%s as %s; this host serves %s", imp.Name, f.Name, got, fn.WIT), "build against the WASI 0.2 WIT files")
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
		return -1, errs.New(wasm.CodeCompExport, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
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
		return -1, errs.New(wasm.CodeCompExport, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
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
		return -1, errs.New(wasm.CodeCompGraph, "runtime", fmt.Sprintf("artifact %s: %s uses string-encoding=%s; only utf8 is supported", artifact, export, o.StringEncoding), "build with UTF-8 strings (the default)")
	case o.Memory != nil && !is(o.Memory, "memory"):
		return fail("%s lifts with memory %s, not core instance #%d's \"memory\"", export, o.Memory, main)
	case o.Realloc != nil && !is(o.Realloc, abi.ExportRealloc):
		return fail("%s lifts with realloc %s, not core instance #%d's %q", export, o.Realloc, main, abi.ExportRealloc)
	case o.PostReturn != nil && !is(o.PostReturn, abi.PostReturnPrefix+export):
		return fail("%s lifts with post-return %s, not core instance #%d's %q", export, o.PostReturn, main, abi.PostReturnPrefix+export)
	}
	return main, nil
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
