package abi

import (
	"context"
	"testing"
)

// TestHandles checks own and borrow: one i32 each, named after their resource, and
// carried as uint32 through memory and flat values alike.
func TestHandles(t *testing.T) {
	own, borrow := Own("output-stream"), Borrow("output-stream")
	for _, tt := range []struct {
		typ  *Type
		kind Kind
		str  string
	}{{own, KindOwn, "own<output-stream>"}, {borrow, KindBorrow, "borrow<output-stream>"}} {
		if tt.typ.Kind() != tt.kind || tt.typ.String() != tt.str || tt.typ.Resource() != "output-stream" {
			t.Errorf("%v: kind %v resource %q", tt.typ, tt.typ.Kind(), tt.typ.Resource())
		}
		if tt.typ.size != 4 || tt.typ.align != 4 || len(tt.typ.flat) != 1 || tt.typ.flat[0] != I32 {
			t.Errorf("%v: size %d align %d flat %v", tt.typ, tt.typ.size, tt.typ.align, tt.typ.flat)
		}
	}
	if got := ResultOf(own, nil).String(); got != "result<own<output-stream>, _>" {
		t.Errorf("result of own renders %q", got)
	}

	// func(self: borrow<output-stream>, h: own<output-stream>) -> option<own<output-stream>>
	f := NewFunc([]*Type{borrow, own}, []*Type{OptionOf(own)})
	if p, r := f.ImportSignature(); len(p) != 3 || len(r) != 0 {
		t.Errorf("import signature %v -> %v", p, r)
	}
	m := newMem(64)
	flat, err := f.LowerParams(context.Background(), m, newBump(m, 8).realloc, []any{uint32(3), uint32(7)})
	if err != nil {
		t.Fatal(err)
	}
	if len(flat) != 2 || flat[0] != 3 || flat[1] != 7 {
		t.Fatalf("lowered %v", flat)
	}
	vals, err := f.LiftParams(m, append(flat, 32)) // the results spill: a return-area pointer follows
	if err != nil {
		t.Fatal(err)
	}
	if vals[0] != uint32(3) || vals[1] != uint32(7) {
		t.Errorf("lifted %v", vals)
	}
	if _, err := f.LowerParams(context.Background(), m, nil, []any{3, uint32(7)}); err == nil {
		t.Error("an int was lowered as a handle")
	}
	if err := store(context.Background(), m, nil, OptionOf(own), 16, Option{Some: true, Value: uint32(9)}); err != nil {
		t.Fatal(err)
	}
	v, err := load(m, OptionOf(own), 16, limits{}.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := v.(Option); !ok || !o.Some || o.Value != uint32(9) {
		t.Errorf("option<own> read back %#v", v)
	}
}
