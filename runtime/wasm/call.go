package wasm

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// CallTool runs one call of a tool or driver module's murmur:tool/run (0.1.x or 0.2.x) in
// a fresh instance: lower the input, call, lift the result, then let the guest free it.
func (e *Engine) CallTool(ctx context.Context, mod *Module, g Grants, h *Imports, in abi.ToolInput) (abi.ToolResult, error) {
	var out abi.ToolResult
	world := string(mod.Role)
	export := mod.RunExport(world)
	run := toolRun(export)
	ctx, closeBodies := withBodies(ctx)
	defer closeBodies()
	err := e.Call(WithImports(ctx, h), mod, g, func(ctx context.Context, inst *Instance) error {
		fn := inst.ExportedFunction(export)
		if fn == nil {
			return fmt.Errorf("%w: artifact %s exports no murmur:tool/run", abi.ErrABI, mod.Artifact)
		}
		mem := inst.Memory()
		if mem == nil {
			return fmt.Errorf("%w: artifact %s exports no memory", abi.ErrABI, mod.Artifact)
		}
		flat, err := run.LowerParams(ctx, mem, guestRealloc(inst), []any{in.Value()})
		if err != nil {
			return err
		}
		res, err := fn.Call(ctx, flat...)
		if err != nil {
			return err
		}
		vals, err := run.LiftResults(mem, res)
		if err != nil {
			return err
		}
		if out, err = abi.ToToolResult(vals[0]); err != nil {
			return fmt.Errorf("%w: %v", abi.ErrABI, err)
		}
		if post := inst.ExportedFunction(abi.PostReturnPrefix + export); post != nil {
			if _, err := post.Call(ctx, res...); err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// RunScript runs a script capsule's murmur:capsule/run in a fresh instance.
func (e *Engine) RunScript(ctx context.Context, mod *Module, g Grants, h *Imports) error {
	export := mod.RunExport(ScriptWorld)
	ctx, closeBodies := withBodies(ctx)
	defer closeBodies()
	return e.Call(WithImports(ctx, h), mod, g, func(ctx context.Context, inst *Instance) error {
		fn := inst.ExportedFunction(export)
		if fn == nil {
			return fmt.Errorf("%w: capsule %s exports no murmur:capsule/run", abi.ErrABI, mod.Capsule)
		}
		_, err := fn.Call(ctx)
		return err
	})
}
