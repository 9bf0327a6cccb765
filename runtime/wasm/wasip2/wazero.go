package wasip2

import (
	"context"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// GuestBinding binds a lowering to mod's exported memory and cabi_realloc: the common
// case of a component whose main module owns both.
func GuestBinding(mod api.Module) Binding {
	b := Binding{Memory: mod.Memory()}
	if b.Memory == nil {
		b.Memory = noMemory{}
	}
	if f := mod.ExportedFunction(abi.ExportRealloc); f != nil {
		b.Realloc = func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error) {
			res, err := f.Call(ctx, uint64(oldPtr), uint64(oldSize), uint64(align), uint64(newSize))
			if err != nil {
				return 0, err
			}
			return uint32(res[0]), nil
		}
	}
	return b
}

// GoFunc adapts f to a wazero host function: bind gives the canon options of the call
// (the caller is not necessarily the module that owns them; resolve the binding once per
// lowering, as looking exports up costs more than most calls), and an error traps the
// guest.
func (f Func) GoFunc(bind func(caller api.Module) Binding) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		if err := f.Call(ctx, bind(mod), stack); err != nil {
			panic(err)
		}
	}
}

// DefineImports instantiates on rt one host module per WASI 0.2 interface the given
// imports name (those whose module starts with "wasi:"), serving exactly those functions;
// bind gives each call its canon options. An import this host does not serve, or whose
// core signature differs from the canonical ABI's, is refused with CodeNotServed.
func (h *Host) DefineImports(ctx context.Context, rt wazero.Runtime, imports []api.FunctionDefinition, bind func(caller api.Module) Binding) error {
	byModule := map[string][]Func{}
	var order []string
	for _, d := range imports {
		module, name, _ := d.Import()
		if len(module) < 5 || module[:5] != "wasi:" {
			continue
		}
		f, ok := h.Func(module, name)
		if !ok {
			return errs.New(CodeNotServed, "wasip2", fmt.Sprintf("import %s#%s is not a WASI 0.2 function this host serves", module, name), "build against WASI 0.2.x; see docs/guests.md \"WASI 0.2 interfaces\"")
		}
		if !slices.Equal(f.Params, d.ParamTypes()) || !slices.Equal(f.Results, d.ResultTypes()) {
			return errs.New(CodeNotServed, "wasip2", fmt.Sprintf("import %s#%s has core type %v -> %v; the canonical ABI of %s is %v -> %v", module, name, d.ParamTypes(), d.ResultTypes(), f.WIT, f.Params, f.Results), "")
		}
		if _, seen := byModule[module]; !seen {
			order = append(order, module)
		}
		if slices.ContainsFunc(byModule[module], func(g Func) bool { return g.Name == name }) {
			continue
		}
		byModule[module] = append(byModule[module], f)
	}
	for _, module := range order {
		b := rt.NewHostModuleBuilder(module)
		for _, f := range byModule[module] {
			b.NewFunctionBuilder().WithGoModuleFunction(f.GoFunc(bind), f.Params, f.Results).Export(f.Name)
		}
		if _, err := b.Instantiate(ctx); err != nil {
			return fmt.Errorf("wasip2: define host module %s: %w", module, err)
		}
	}
	return nil
}
