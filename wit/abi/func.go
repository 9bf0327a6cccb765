package abi

import (
	"context"
)

// Func is the canonical ABI of one WIT function: how its parameters and results cross
// between host and guest, in both directions (guest exports the host calls, and host
// imports the guest calls). Parameters flattening to more than MaxFlatParams core
// values travel as a pointer to a tuple in guest memory; results flattening to more
// than MaxFlatResults travel through a return area.
type Func struct {
	params, results []*Type
	pt, rt          *Type // params and results as tuples
}

// NewFunc describes a function with the given parameter and result types (a WIT
// function has zero or one result; more are treated as a tuple).
func NewFunc(params, results []*Type) *Func {
	return &Func{
		params:  append([]*Type(nil), params...),
		results: append([]*Type(nil), results...),
		pt:      Tuple(params...).Named("params"),
		rt:      Tuple(results...).Named("results"),
	}
}

// Params are the parameter types; the caller must not modify them.
func (f *Func) Params() []*Type { return f.params }

// Results are the result types; the caller must not modify them.
func (f *Func) Results() []*Type { return f.results }

func (f *Func) paramsSpill() bool  { return len(f.pt.flat) > MaxFlatParams }
func (f *Func) resultsSpill() bool { return len(f.rt.flat) > MaxFlatResults }

// ExportSignature is the core signature of a guest export implementing f.
func (f *Func) ExportSignature() (params, results []ValType) {
	params = f.flatParams()
	if f.resultsSpill() {
		return params, []ValType{I32}
	}
	return params, append([]ValType(nil), f.rt.flat...)
}

// ImportSignature is the core signature of a host import implementing f: when results
// spill, the guest passes a return-area pointer as the last parameter.
func (f *Func) ImportSignature() (params, results []ValType) {
	params = f.flatParams()
	if f.resultsSpill() {
		return append(params, I32), nil
	}
	return params, append([]ValType(nil), f.rt.flat...)
}

func (f *Func) flatParams() []ValType {
	if f.paramsSpill() {
		return []ValType{I32}
	}
	return append([]ValType(nil), f.pt.flat...)
}

// LowerParams lowers the arguments of a call into a guest export, ready to pass to it.
func (f *Func) LowerParams(ctx context.Context, mem Memory, realloc Realloc, values []any) ([]uint64, error) {
	if len(values) != len(f.params) {
		return nil, valueErr(f.pt, "%d arguments, want %d", len(values), len(f.params))
	}
	w := lowerer{ctx: ctx, mem: mem, realloc: realloc}
	if !f.paramsSpill() {
		return w.lowerFlat(f.pt, values, make([]uint64, 0, len(f.pt.flat)))
	}
	p, err := w.alloc(f.pt, f.pt.align, f.pt.size)
	if err != nil {
		return nil, err
	}
	if err := w.store(f.pt, p, values); err != nil {
		return nil, err
	}
	return []uint64{uint64(p)}, nil
}

// LiftResults lifts what a guest export returned: its core results.
func (f *Func) LiftResults(mem Memory, flat []uint64) ([]any, error) {
	l := lifter{mem: mem, lim: limits{}.withDefaults()}
	if f.resultsSpill() {
		if len(flat) != 1 {
			return nil, guestErr("%d core results, want 1 return-area pointer", len(flat))
		}
		v, err := l.load(f.rt, uint32(flat[0]))
		return tupleVals(v), err
	}
	if len(flat) != len(f.rt.flat) {
		return nil, guestErr("%d core results, want %d", len(flat), len(f.rt.flat))
	}
	v, err := l.liftFlat(f.rt, &flatReader{vals: flat})
	return tupleVals(v), err
}

// LiftParams lifts the arguments of a guest's call to a host import: its core
// parameters, including the trailing return-area pointer when results spill (see
// RetPtr).
func (f *Func) LiftParams(mem Memory, flat []uint64) ([]any, error) {
	want, _ := f.ImportSignature()
	if len(flat) != len(want) {
		return nil, guestErr("%d core params, want %d", len(flat), len(want))
	}
	l := lifter{mem: mem, lim: limits{}.withDefaults()}
	if f.paramsSpill() {
		v, err := l.load(f.pt, uint32(flat[0]))
		return tupleVals(v), err
	}
	v, err := l.liftFlat(f.pt, &flatReader{vals: flat[:len(f.pt.flat)]})
	return tupleVals(v), err
}

// RetPtr returns the return-area pointer of a call to a host import, if f's results
// spill and flat holds it.
func (f *Func) RetPtr(flat []uint64) (uint32, bool) {
	want, _ := f.ImportSignature()
	if !f.resultsSpill() || len(flat) != len(want) {
		return 0, false
	}
	return uint32(flat[len(flat)-1]), true
}

// LowerResults lowers a host import's results for the guest that called it: as core
// results when they fit, else stored into the guest's return area at retPtr (checked
// like any guest pointer) with no core results.
func (f *Func) LowerResults(ctx context.Context, mem Memory, realloc Realloc, values []any, retPtr uint32) ([]uint64, error) {
	if len(values) != len(f.results) {
		return nil, valueErr(f.rt, "%d results, want %d", len(values), len(f.results))
	}
	w := lowerer{ctx: ctx, mem: mem, realloc: realloc}
	if !f.resultsSpill() {
		return w.lowerFlat(f.rt, values, make([]uint64, 0, len(f.rt.flat)))
	}
	return nil, w.store(f.rt, retPtr, values)
}

func tupleVals(v any) []any {
	vals, _ := v.([]any)
	return vals
}
