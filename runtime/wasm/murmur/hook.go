package murmur

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// HookExport returns the core export name of lifecycle function fn in a hook module, ""
// when it does not export fn at a served version; of several, the highest in name order.
// For a hook component, it is the export of its main instance that fn lifts (checked at
// Compile), "" when the component does not export fn.
func HookExport(m *wasm.Module, fn string) string {
	if m.Plan() != nil {
		return m.Lift(fn)
	}
	best := ""
	for name := range m.ExportedFunctions() {
		if iface, ver, f, ok := parseExport(name); ok && iface == abi.HookInterface && f == fn && serves(iface, ver) && name > best {
			best = name
		}
	}
	return best
}

// CheckHook refuses, at stage, a hook module or component that exports none of the
// lifecycle functions its binding calls: the one named, or — no binding — any of them. A
// hook answering nothing would be a hook in name only.
func CheckHook(m *wasm.Module, binding string) error {
	if binding != "" {
		if HookExport(m, binding) == "" {
			return errs.New(CodeHookExport, "runtime", fmt.Sprintf("artifact %s is bound to %s and exports no %s@0.9.x#%s", m.Artifact, binding, abi.HookInterface, binding),
				"export that function (register its handler with the Go SDK's wit/guest/hook), or change the hook's binding")
		}
		return nil
	}
	for fn := range abi.HookFuncs {
		if HookExport(m, fn) != "" {
			return nil
		}
	}
	return errs.New(CodeHookExport, "runtime", fmt.Sprintf("artifact %s exports no function of %s", m.Artifact, abi.HookInterface),
		"export the lifecycle functions the hook answers")
}

// HookAnswer is what one lifecycle call answered: a hook-output case and its string,
// or the guest's err(string).
type HookAnswer struct {
	Case, Text string
	// Failed is set when the guest answered err(Text).
	Failed bool
	// Manifests is a write-manifests answer's payload, in the guest's order.
	Manifests []abi.ToolManifest
}

// CallHook calls lifecycle function fn of a hook module in a fresh instance with record,
// the generic value of fn's event record (abi.HookFuncs). A module not exporting fn
// answers none without being instantiated: a hook with no binding answers what it
// exports.
func CallHook(ctx context.Context, e *wasm.Engine, mod *wasm.Module, g wasm.Grants, fn string, record any) (HookAnswer, error) {
	f := abi.HookFuncs[fn]
	if f == nil {
		return HookAnswer{}, fmt.Errorf("%w: no lifecycle function %q", abi.ErrValue, fn)
	}
	export := HookExport(mod, fn)
	if export == "" {
		return HookAnswer{Case: abi.HookOutputCases[0]}, nil
	}
	var out HookAnswer
	err := e.Call(ctx, mod, g, func(ctx context.Context, inst *wasm.Instance) error {
		return inst.CallLifted(ctx, export, f, []any{record}, func(vals []any) (err error) {
			if out.Case, out.Text, out.Failed, err = abi.ToHookOutput(vals[0]); err != nil {
				return err
			}
			out.Manifests, err = abi.HookManifests(vals[0])
			return err
		})
	})
	return out, err
}
