package wasm

import (
	"context"
	"strings"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// chunkKey carries, in a call's context, what receives the text a test guest streams.
type chunkKey struct{}

// withChunk returns ctx whose calls hand the text their guest streams to f.
func withChunk(ctx context.Context, f func(text string)) context.Context {
	return context.WithValue(ctx, chunkKey{}, f)
}

func emitChunk(ctx context.Context, a []any) ([]any, error) {
	if f, _ := ctx.Value(chunkKey{}).(func(string)); f != nil {
		f(a[0].(string))
	}
	return nil, nil
}

func dropCall(context.Context, []any) ([]any, error) { return nil, nil }

// testHost is what the engine's test guests import besides WASI (the Go SDK's tools
// link murmur:stream/events when they stream), served through WithHost as any host's
// interfaces are.
var testHost = HostModule{Module: abi.ModuleStream, Funcs: []HostFunc{
	{Name: abi.ImportEmitChunk, Func: abi.EmitChunk, Impl: emitChunk},
	{Name: abi.ImportEmitThink, Func: abi.EmitThink, Impl: emitChunk},
	{Name: abi.ImportCallStarted, Func: abi.CallStarted, Impl: dropCall},
	{Name: abi.ImportInputBytes, Func: abi.InputBytes, Impl: dropCall},
}}

// callTool calls the murmur:tool/run export of a test tool mod through CallLifted, as
// a host's tool protocol does.
func callTool(ctx context.Context, e *Engine, mod *Module, g Grants, in abi.ToolInput) (abi.ToolResult, error) {
	export, run := "", abi.ToolRun01
	for name := range mod.ExportedFunctions() {
		if strings.HasPrefix(name, "murmur:tool/run@") && strings.HasSuffix(name, "#run") && name > export {
			export = name
		}
	}
	if strings.HasPrefix(export, "murmur:tool/run@0.2.") {
		run = abi.ToolRun02
	}
	var out abi.ToolResult
	err := e.Call(ctx, mod, g, func(ctx context.Context, inst *Instance) error {
		return inst.CallLifted(ctx, export, run, []any{in.Value()}, func(vals []any) (err error) {
			out, err = abi.ToToolResult(vals[0])
			return err
		})
	})
	return out, err
}
