package murmur

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// ProcessWorld names the world of a process driver (inference.transport: process) in
// CompileWorld and CheckWorld: it exports murmur:driver/process@0.6.x and imports
// nothing but WASI (preview1 for a core module, 0.2 without wasi:http or wasi:sockets
// for a component), which it is granted nothing of.
const ProcessWorld = "process-driver"

// ProcessLevel is the level of murmur:driver/process this host serves.
const ProcessLevel = "0.6"

// Codes of process driver refusals at stage (docs/errors.md). E-PRC-005, which refused
// a driver built as a component, is retired: components run as process drivers.
const (
	CodeProcessUnderHTTP = "E-PRC-001" // a driver of transport http exports murmur:driver/process
	CodeProcessLevel     = "E-PRC-002" // a process driver exports only versions of murmur:driver/process not served
	CodeProcessMissing   = "E-PRC-003" // a process driver exports no murmur:driver/process
	CodeProcessImport    = "E-PRC-004" // a process driver imports something besides WASI
)

// processVersions are the versions of murmur:driver/process whose functions mod
// exports, sorted, and whether it exports all five of the served level.
func processVersions(m *wasm.Module) (versions []string, complete bool) {
	fns := map[string]int{}
	for name := range m.ExportedFunctions() {
		iface, ver, fn, ok := parseExport(name)
		if !ok || iface != abi.ProcessInterface {
			continue
		}
		if !slices.Contains(versions, ver) {
			versions = append(versions, ver)
		}
		if isMinor(ver, ProcessLevel) && abi.ProcessFuncs[fn] != nil {
			fns[fn]++
		}
	}
	slices.Sort(versions)
	return versions, len(fns) == len(abi.ProcessFuncs)
}

// ProcessExport is the core export name of process function fn in a process driver,
// the highest of the served level in name order; for a component, the export of its
// main instance that fn lifts (checked at compile).
func ProcessExport(m *wasm.Module, fn string) string {
	if m.Plan() != nil {
		return m.Lift(fn)
	}
	best := ""
	for name := range m.ExportedFunctions() {
		if iface, ver, f, ok := parseExport(name); ok && iface == abi.ProcessInterface && f == fn && isMinor(ver, ProcessLevel) && name > best {
			best = name
		}
	}
	return best
}

// checkHTTPDriver refuses a driver of the http transport that exports any version of
// the process interface: it was built to drive a harness, and would be called as a
// tool/run driver it is not.
func checkHTTPDriver(m *wasm.Module) error {
	if m.Plan() != nil {
		return nil // checkComponentWorld refuses it, at compile and in CheckWorld
	}
	vs, _ := processVersions(m)
	return httpDriverRefusal(m.Artifact, vs)
}

// httpDriverRefusal is the refusal of an http driver exporting versions of the
// process interface, nil when it exports none.
func httpDriverRefusal(artifact string, versions []string) error {
	if len(versions) == 0 {
		return nil
	}
	return errs.List{errs.New(CodeProcessUnderHTTP, "runtime",
		fmt.Sprintf("artifact %s exports %s@%s, a process driver's interface, but inference.transport is http", artifact, abi.ProcessInterface, strings.Join(versions, ", ")),
		"set inference.transport: process to drive its harness, or name an http driver")}
}

// checkProcessWorld refuses a process driver that does not export the served level of
// the process interface whole (a level mismatch and a missing interface are told apart),
// or that imports anything but WASI preview1 — it is granted nothing, and a murmur
// import would be a capability. A component is checked by processLifts.
func checkProcessWorld(m *wasm.Module) error {
	if plan := m.Plan(); plan != nil {
		_, _, err := processLifts(plan, m.Artifact)
		return err
	}
	var problems errs.List
	versions, complete := processVersions(m)
	if err := processExportRefusal(m.Artifact, versions, complete); err != nil {
		problems = append(problems, err)
	}
	var bad []string
	for _, f := range m.ImportedFunctions() {
		if mod, name, _ := f.Import(); mod != wasiP1 {
			bad = append(bad, mod+"#"+name)
		}
	}
	if bad = dedupe(bad); len(bad) > 0 {
		problems = append(problems, errs.New(CodeProcessImport, "runtime",
			fmt.Sprintf("artifact %s imports %s; a process driver is pure translation and may import only wasi_snapshot_preview1, with nothing granted", m.Artifact, strings.Join(bad, ", ")),
			"rebuild the driver without that import"))
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

// processExportRefusal refuses a process driver exporting the process interface at
// versions, sorted, nil when complete (all five functions at the served level).
func processExportRefusal(artifact string, versions []string, complete bool) *errs.Error {
	switch {
	case len(versions) == 0:
		return errs.New(CodeProcessMissing, "runtime",
			fmt.Sprintf("artifact %s is named by inference.driver under transport process but exports no %s (this host serves %s.x)", artifact, abi.ProcessInterface, ProcessLevel),
			"build the driver against murmur:driver/process@0.6.0 (the Go SDK's wit/guest/process exports it)")
	case !complete:
		return errs.New(CodeProcessLevel, "runtime",
			fmt.Sprintf("artifact %s exports %s at %s, not all of its functions (describe, launch, parse, classify-exit, read-login) at %s.x, the level this host serves",
				artifact, abi.ProcessInterface, strings.Join(versions, ", "), ProcessLevel),
			"rebuild the driver against murmur:driver/process@0.6.0")
	}
	return nil
}

// compProcessVersions are the versions of murmur:driver/process a component exports,
// sorted.
func compProcessVersions(plan *component.Plan) []string {
	var versions []string
	for _, x := range plan.World.Exports {
		if x.Interface == abi.ProcessInterface && !slices.Contains(versions, x.Version) {
			versions = append(versions, x.Version)
		}
	}
	slices.Sort(versions)
	return versions
}

// processLifts checks a process-driver component: it imports only WASI 0.2 the host
// serves, and neither wasi:http nor wasi:sockets (it is granted nothing, and may reach
// nothing); it exports all five functions of the process interface at the served level,
// each a lift the host can call directly, all of one core instance (as hookLifts checks
// a hook's). It returns that instance and, by function, the core export lifted.
func processLifts(plan *component.Plan, artifact string) (int, map[string]string, error) {
	var problems errs.List
	bad := func(code, msg, fix string) {
		problems = append(problems, errs.New(code, "runtime", "artifact "+artifact+": "+msg, fix))
	}
	var refused []string
	for _, imp := range plan.World.Imports {
		switch {
		case strings.HasPrefix(imp.Interface, "wasi:http/"), strings.HasPrefix(imp.Interface, "wasi:sockets/"), !strings.HasPrefix(imp.Interface, "wasi:"):
			refused = append(refused, imp.Name)
		default:
			checkWASIImport(imp, bad)
		}
	}
	if refused = dedupe(refused); len(refused) > 0 {
		problems = append(problems, errs.New(CodeProcessImport, "runtime",
			fmt.Sprintf("artifact %s imports %s; a process driver is pure translation and may import only WASI 0.2 without wasi:http and wasi:sockets, with nothing granted", artifact, strings.Join(refused, ", ")),
			"rebuild the driver without that import"))
	}
	// The highest version at the served level exporting every function is the one called.
	var item *component.WorldItem
	for i := range plan.World.Exports {
		x := &plan.World.Exports[i]
		if x.Interface != abi.ProcessInterface || x.Sort != component.SortInstance || !isMinor(x.Version, ProcessLevel) || (item != nil && x.Name < item.Name) {
			continue
		}
		n := 0
		for _, f := range x.Funcs {
			if abi.ProcessFuncs[f.Name] != nil {
				n++
			}
		}
		if n == len(abi.ProcessFuncs) {
			item = x
		}
	}
	if err := processExportRefusal(artifact, compProcessVersions(plan), item != nil); err != nil {
		problems = append(problems, err)
	}
	if len(problems) > 0 {
		return -1, nil, problems
	}
	fail := func(format string, a ...any) (int, error) {
		return -1, errs.New(wasm.CodeCompExport, "runtime", "artifact "+artifact+": "+fmt.Sprintf(format, a...),
			"build the component with wit-component from a core module exporting the process functions (the Go SDK's wit/guest/process, wrapped with the preview1 reactor adapter)")
	}
	return oneInstanceLifts(plan, artifact, item, abi.ProcessFuncs, "process", fail)
}

// Describe calls describe() of a process driver in an instance of its own, granted
// nothing, under g's deadline and memory.
func Describe(ctx context.Context, e *wasm.Engine, mod *wasm.Module, g wasm.Grants) (abi.Description, error) {
	d := OpenDriver(e, mod, g)
	defer d.Close()
	return d.Describe(ctx)
}

// nothingGranted keeps only g's limits and snapshot policy: no filesystem, environment
// or output.
func nothingGranted(g wasm.Grants) wasm.Grants {
	return wasm.Grants{MemoryBytes: g.MemoryBytes, Deadline: g.Deadline, Snapshot: g.Snapshot}
}

// Driver is a process driver held for one run: its calls share one instance, each
// bounded by the hook-call deadline the driver was opened with (Held).
type Driver struct {
	h       *wasm.Held
	exports map[string]string // by process function, its core export (ProcessExport)
}

// OpenDriver holds an instance of the process driver mod for a run, granted nothing
// but g's memory limit and per-call deadline.
func OpenDriver(e *wasm.Engine, mod *wasm.Module, g wasm.Grants) *Driver {
	// Resolved once: a run calls parse for every batch of lines, and finding a core
	// module's export walks all of them.
	exports := make(map[string]string, len(abi.ProcessFuncs))
	for fn := range abi.ProcessFuncs {
		exports[fn] = ProcessExport(mod, fn)
	}
	return &Driver{h: e.Hold(mod, nothingGranted(g)), exports: exports}
}

// Close ends the driver's instance.
func (d *Driver) Close() { d.h.Close() }

func (d *Driver) call(ctx context.Context, fn string, args []any, use func([]any) error) error {
	return d.h.Call(ctx, fn, d.exports[fn], abi.ProcessFuncs[fn], args, use)
}

// Describe calls describe().
func (d *Driver) Describe(ctx context.Context) (desc abi.Description, err error) {
	err = d.call(ctx, abi.ProcessDescribe, nil, func(v []any) (err error) { desc, err = abi.ToDescription(v[0]); return err })
	return desc, err
}

// Launch plans a turn; refused is the driver's err answer.
func (d *Driver) Launch(ctx context.Context, req abi.LaunchRequest) (plan abi.LaunchPlan, refused string, err error) {
	err = d.call(ctx, abi.ProcessLaunch, []any{req.Value()}, func(v []any) (err error) { plan, refused, err = abi.ToLaunch(v[0]); return err })
	return plan, refused, err
}

// Parse reads a batch of stdout lines into events.
func (d *Driver) Parse(ctx context.Context, lines []string) (events []abi.Event, err error) {
	err = d.call(ctx, abi.ProcessParse, []any{abi.LinesValue(lines)}, func(v []any) (err error) { events, err = abi.ToEvents(v[0]); return err })
	return events, err
}

// ClassifyExit gives the final event of a run that ended without one.
func (d *Driver) ClassifyExit(ctx context.Context, x abi.ExitStatus) (ev abi.Event, err error) {
	err = d.call(ctx, abi.ProcessClassify, []any{x.Value()}, func(v []any) (err error) { ev, err = abi.ToEvent(v[0]); return err })
	return ev, err
}

// ReadLogin reads what the login check printed.
func (d *Driver) ReadLogin(ctx context.Context, o abi.LoginOutput) (state, detail string, err error) {
	err = d.call(ctx, abi.ProcessLogin, []any{o.Value()}, func(v []any) (err error) { state, detail, err = abi.ToLoginState(v[0]); return err })
	return state, detail, err
}
