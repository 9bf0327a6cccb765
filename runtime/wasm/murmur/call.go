package murmur

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// CallTool runs one call of a tool or driver module's murmur:tool/run (0.1.x or 0.2.x) in
// a fresh instance: lower the input, call, lift the result, then let the guest free it.
func CallTool(ctx context.Context, e *wasm.Engine, mod *wasm.Module, g wasm.Grants, h *Imports, in abi.ToolInput) (abi.ToolResult, error) {
	var out abi.ToolResult
	export := RunExport(mod, mod.Role)
	run := toolRun(export)
	ctx, closeBodies := withBodies(ctx)
	defer closeBodies()
	err := e.Call(WithImports(ctx, h), mod, withHTTP(mod, g, h), func(ctx context.Context, inst *wasm.Instance) error {
		return inst.CallLifted(ctx, export, run, []any{in.Value()}, func(vals []any) (err error) {
			out, err = abi.ToToolResult(vals[0])
			return err
		})
	})
	return out, err
}

// RunScript runs a script capsule's murmur:capsule/run in a fresh instance.
func RunScript(ctx context.Context, e *wasm.Engine, mod *wasm.Module, g wasm.Grants, h *Imports) error {
	export := RunExport(mod, ScriptWorld)
	ctx, closeBodies := withBodies(ctx)
	defer closeBodies()
	return e.Call(WithImports(ctx, h), mod, withHTTP(mod, g, h), func(ctx context.Context, inst *wasm.Instance) error {
		fn := inst.ExportedFunction(export)
		if fn == nil {
			return fmt.Errorf("%w: capsule %s exports no murmur:capsule/run", abi.ErrABI, mod.Capsule)
		}
		_, err := fn.Call(ctx)
		return err
	})
}

// withHTTP is g with a component's wasi:http/outgoing-handler served by h's outgoing HTTP,
// under the same rules as capsulegate:http/outgoing; a core module's g is unchanged, so
// its calls make no senders they would not use.
func withHTTP(mod *wasm.Module, g wasm.Grants, h *Imports) wasm.Grants {
	if mod.Plan() != nil && h != nil && h.HTTP != nil {
		g.HTTP, g.HTTPCheck = h.HTTP.WASIP2(h.Who), h.HTTP.WASIP2Check(h.Who)
	}
	return g
}
