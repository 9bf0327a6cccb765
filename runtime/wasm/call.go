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
		return callLifted(ctx, inst, mod.Artifact, export, run, []any{in.Value()}, func(vals []any) (err error) {
			out, err = abi.ToToolResult(vals[0])
			return err
		})
	})
	return out, err
}

// callLifted calls export of inst through the canonical ABI with f's types: lowers args
// into the guest, calls, lifts the results for use, then calls the export's post-return
// (whose memory use must end before the guest is called again). use's error is an ABI
// error: the guest returned a value its type does not allow.
func callLifted(ctx context.Context, inst *Instance, artifact, export string, f *abi.Func, args []any, use func([]any) error) error {
	fn := inst.ExportedFunction(export)
	mem := inst.Memory()
	if fn == nil || mem == nil {
		return fmt.Errorf("%w: artifact %s exports no %s or no memory", abi.ErrABI, artifact, export)
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
