package wasm

import "github.com/tetratelabs/wazero/api"

// funcCache keeps a warm instance's exported functions across its calls. wazero's
// ExportedFunction builds a new call engine, with its own stack of some KiB, on every
// lookup; a tool call (murmur.CallTool) looks up three exports, which for a small guest on a warm
// instance was most of the call's allocation and, through the GC it caused, of its time
// (BenchmarkTinyToolCall). An api.Function is not safe for concurrent use, but an
// instance serves one call at a time, and an instance whose call failed is closed rather
// than kept, so its functions go with it.
type funcCache struct {
	byName map[string]api.Function
}

// ExportedFunction returns the export name of the instance, from the warm instance's
// cache when it has one. A missing export is cached too: it stays missing.
func (i *Instance) ExportedFunction(name string) api.Function {
	if i.fns == nil {
		return i.Module.ExportedFunction(name)
	}
	if f, ok := i.fns.byName[name]; ok {
		return f
	}
	f := i.Module.ExportedFunction(name)
	if i.fns.byName == nil {
		i.fns.byName = map[string]api.Function{}
	}
	i.fns.byName[name] = f
	return f
}
