package wasm

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// ProcessWorld names the world of a process driver (inference.transport: process) in
// CheckWorld: it exports murmur:driver/process@0.6.x and imports nothing but WASI
// preview1, which it is granted nothing of.
const ProcessWorld = "process-driver"

// ProcessLevel is the level of murmur:driver/process this host serves.
const ProcessLevel = "0.6"

// Codes of process driver refusals at stage (docs/errors.md).
const (
	CodeProcessUnderHTTP = "E-PRC-001" // a driver of transport http exports murmur:driver/process
	CodeProcessLevel     = "E-PRC-002" // a process driver exports only versions of murmur:driver/process not served
	CodeProcessMissing   = "E-PRC-003" // a process driver exports no murmur:driver/process
	CodeProcessImport    = "E-PRC-004" // a process driver imports something besides WASI preview1
	CodeProcessComponent = "E-PRC-005" // a process driver is a component, which this release does not run as one
)

// processVersions are the versions of murmur:driver/process whose functions mod
// exports, sorted, and whether it exports all five of the served level.
func (m *Module) processVersions() (versions []string, complete bool) {
	fns := map[string]int{}
	for name := range m.module.ExportedFunctions() {
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
// the highest of the served level in name order.
func (m *Module) ProcessExport(fn string) string {
	best := ""
	for name := range m.module.ExportedFunctions() {
		if iface, ver, f, ok := parseExport(name); ok && iface == abi.ProcessInterface && f == fn && isMinor(ver, ProcessLevel) && name > best {
			best = name
		}
	}
	return best
}

// checkHTTPDriver refuses a driver of the http transport that exports any version of
// the process interface: it was built to drive a harness, and would be called as a
// tool/run driver it is not.
func (m *Module) checkHTTPDriver() error {
	if m.comp != nil {
		return nil
	}
	if vs, _ := m.processVersions(); len(vs) > 0 {
		return errs.List{errs.New(CodeProcessUnderHTTP, "runtime",
			fmt.Sprintf("artifact %s exports %s@%s, a process driver's interface, but inference.transport is http", m.Artifact, abi.ProcessInterface, strings.Join(vs, ", ")),
			"set inference.transport: process to drive its harness, or name an http driver")}
	}
	return nil
}

// checkProcessWorld refuses a process driver that does not export the served level of
// the process interface whole (a level mismatch and a missing interface are told apart),
// or that imports anything but WASI preview1 — it is granted nothing, and a murmur
// import would be a capability.
func (m *Module) checkProcessWorld() error {
	if m.comp != nil {
		return errs.List{errs.New(CodeProcessComponent, "runtime",
			fmt.Sprintf("artifact %s is a component; this release runs process drivers built as core modules only", m.Artifact),
			"build the driver with the Go SDK (wit/guest/process, GOOS=wasip1 GOARCH=wasm -buildmode=c-shared)")}
	}
	var problems errs.List
	versions, complete := m.processVersions()
	switch {
	case len(versions) == 0:
		problems = append(problems, errs.New(CodeProcessMissing, "runtime",
			fmt.Sprintf("artifact %s is named by inference.driver under transport process but exports no %s (this host serves %s.x)", m.Artifact, abi.ProcessInterface, ProcessLevel),
			"build the driver against murmur:driver/process@0.6.0 (the Go SDK's wit/guest/process exports it)"))
	case !complete:
		problems = append(problems, errs.New(CodeProcessLevel, "runtime",
			fmt.Sprintf("artifact %s exports %s at %s, not all of its functions (describe, launch, parse, classify-exit, read-login) at %s.x, the level this host serves",
				m.Artifact, abi.ProcessInterface, strings.Join(versions, ", "), ProcessLevel),
			"rebuild the driver against murmur:driver/process@0.6.0"))
	}
	var bad []string
	for _, f := range m.module.ImportedFunctions() {
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

// Describe calls describe() of a process driver in an instance of its own, granted
// nothing, under g's deadline and memory.
func (e *Engine) Describe(ctx context.Context, mod *Module, g Grants) (abi.Description, error) {
	d := e.OpenDriver(mod, g)
	defer d.Close()
	return d.Describe(ctx)
}

// nothingGranted keeps only g's limits: no filesystem, environment or output.
func nothingGranted(g Grants) Grants {
	return Grants{MemoryBytes: g.MemoryBytes, Deadline: g.Deadline}
}

// Driver is a process driver held for one run: its calls share one instance, each
// bounded by the hook-call deadline the driver was opened with (Held).
type Driver struct {
	h *Held
}

// OpenDriver holds an instance of the process driver mod for a run, granted nothing
// but g's memory limit and per-call deadline.
func (e *Engine) OpenDriver(mod *Module, g Grants) *Driver {
	return &Driver{h: e.Hold(mod, nothingGranted(g))}
}

// Close ends the driver's instance.
func (d *Driver) Close() { d.h.Close() }

func (d *Driver) call(ctx context.Context, fn string, args []any, use func([]any) error) error {
	return d.h.Call(ctx, fn, d.h.mod.ProcessExport(fn), abi.ProcessFuncs[fn], args, use)
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
