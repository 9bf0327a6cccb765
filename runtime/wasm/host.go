package wasm

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// HostFunc is one host function guests import: its name in the interface, its
// canonical ABI type, and its implementation, which gets the lifted arguments and
// returns the results to lower. Per-call state reaches Impl through the call's context.
type HostFunc struct {
	Name string
	Func *abi.Func
	// Impl's error traps the guest; wazero returns it (wrapped with %w) from the guest's
	// call, where it is classified.
	Impl func(ctx context.Context, args []any) ([]any, error)
}

// HostModule is a host interface the engine serves to guests: to core modules under the
// import module name Module, to components lowering functions of Interface.
type HostModule struct {
	// Module is the import module name of core modules ("murmur:stream/events@0.1.0");
	// "" serves the functions to components only.
	Module string
	// Interface is the interface name, without version, components lower the functions
	// from ("murmur:text/chunks"); "" serves them to core modules only. Which versions a
	// component may import is its world's check (World).
	Interface string
	Funcs     []HostFunc
}

// WithHost serves mods to the guests of every runtime the engine creates, as wazero's
// WASI packages are instantiated on a runtime; later options add to earlier ones.
func WithHost(mods ...HostModule) EngineOption {
	return func(c *engineConfig) { c.host = append(c.host, mods...) }
}

// hostSet is the host modules an engine serves, with the components' functions by
// interface.
type hostSet struct {
	mods   []HostModule
	byIfce map[string][]HostFunc
}

func newHostSet(mods []HostModule) *hostSet {
	h := &hostSet{mods: mods, byIfce: map[string][]HostFunc{}}
	for _, m := range mods {
		if m.Interface != "" {
			h.byIfce[m.Interface] = append(h.byIfce[m.Interface], m.Funcs...)
		}
	}
	return h
}

// componentFunc is the function name of interface iface a component may lower.
func (h *hostSet) componentFunc(iface, name string) (HostFunc, bool) {
	for _, f := range h.byIfce[iface] {
		if f.Name == name {
			return f, true
		}
	}
	return HostFunc{}, false
}

// define instantiates on rt a host module for each import module name of the set.
func (h *hostSet) define(ctx context.Context, rt wazero.Runtime) error {
	for _, m := range h.mods {
		if m.Module == "" {
			continue
		}
		b := rt.NewHostModuleBuilder(m.Module)
		for _, f := range m.Funcs {
			params, results := f.Func.ImportSignature()
			b.NewFunctionBuilder().
				WithGoModuleFunction(importFunc(f), valueTypes(params), valueTypes(results)).
				Export(f.Name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("define host module %s: %w", m.Module, err)
		}
	}
	return nil
}

// importFunc adapts a host function to wazero: lift the guest's arguments, run its
// implementation, lower its results (into the guest's return area when they spill). A
// guest that breaks the ABI, or an implementation's error, traps the guest.
func importFunc(f HostFunc) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		mem := mod.Memory()
		if mem == nil {
			panic(fmt.Errorf("%w: the module exports no memory", abi.ErrABI))
		}
		if err := serveImport(ctx, f, mem, guestRealloc(mod), stack); err != nil {
			panic(err)
		}
	}
}

// serveImport runs one host call over mem and realloc: the calling module's for a core
// module, the lowering's canon options for a component.
func serveImport(ctx context.Context, f HostFunc, mem abi.Memory, realloc abi.Realloc, stack []uint64) error {
	nParams, _ := f.Func.ImportSignature()
	flat := append([]uint64(nil), stack[:len(nParams)]...)
	args, err := f.Func.LiftParams(mem, flat)
	if err != nil {
		return err
	}
	results, err := f.Impl(ctx, args)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// The call's deadline passed (or it was canceled) while the host worked:
		// the guest stops here, classified by the context.
		return fmt.Errorf("the call's context ended in a host call: %w", err)
	}
	retPtr, _ := f.Func.RetPtr(flat)
	out, err := f.Func.LowerResults(ctx, mem, realloc, results, retPtr)
	if err != nil {
		return err
	}
	copy(stack, out)
	return nil
}

// guestRealloc calls the module's cabi_realloc; a module without one can receive no
// strings or lists.
func guestRealloc(mod api.Module) abi.Realloc {
	f := mod.ExportedFunction(abi.ExportRealloc)
	return func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error) {
		if f == nil {
			return 0, fmt.Errorf("%w: the module exports no %s", abi.ErrABI, abi.ExportRealloc)
		}
		res, err := f.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
		if err != nil {
			return 0, err
		}
		return uint32(res[0]), nil
	}
}

func valueTypes(v []abi.ValType) []api.ValueType {
	out := make([]api.ValueType, len(v))
	for i, t := range v {
		out[i] = api.ValueType(t)
	}
	return out
}

// CallLifted calls export of inst through the canonical ABI with f's types: lowers args
// into the guest, calls, lifts the results for use, then calls the export's post-return
// (whose memory use must end before the guest is called again). use's error is an ABI
// error: the guest returned a value its type does not allow.
func (inst *Instance) CallLifted(ctx context.Context, export string, f *abi.Func, args []any, use func([]any) error) error {
	fn := inst.ExportedFunction(export)
	mem := inst.Memory()
	if fn == nil || mem == nil {
		return fmt.Errorf("%w: artifact %s exports no %s or no memory", abi.ErrABI, inst.mod.Artifact, export)
	}
	flat, err := f.LowerParams(ctx, mem, guestRealloc(inst), args)
	if err != nil {
		return err
	}
	res, err := fn.Call(ctx, flat...)
	if err != nil {
		return err
	}
	vals, err := f.LiftResults(mem, res)
	if err != nil {
		return err
	}
	if err := use(vals); err != nil {
		return fmt.Errorf("%w: %v", abi.ErrABI, err)
	}
	if post := inst.ExportedFunction(abi.PostReturnPrefix + export); post != nil {
		if _, err := post.Call(ctx, res...); err != nil {
			return err
		}
	}
	return nil
}
