package wasm

import (
	"context"
	"errors"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestHostOnEveryRuntime: a host module of WithHost is served to core modules on the
// engine's runtime and on the fallback runtime it creates later, its implementation
// getting the lifted arguments and the call's context; an implementation's error traps
// the guest.
func TestHostOnEveryRuntime(t *testing.T) {
	type seenKey struct{}
	fail := errors.New("refused by the host")
	probe := HostModule{Module: "capsulegate-test:host/probe@0.1.0", Funcs: []HostFunc{{
		Name: "seen", Func: abi.NewFunc([]*abi.Type{abi.U32}, nil),
		Impl: func(ctx context.Context, args []any) ([]any, error) {
			if args[0].(uint32) == 13 {
				return nil, fail
			}
			*ctx.Value(seenKey{}).(*uint32) = args[0].(uint32)
			return nil, nil
		},
	}}}
	m := wasmtest.Module{
		Imports:     []wasmtest.Import{{Module: probe.Module, Name: "seen", Params: []byte{wasmtest.I32}}},
		Funcs:       []wasmtest.Func{{Export: "seven", Body: wasmtest.CallImport(0, 7)}, {Export: "thirteen", Body: wasmtest.CallImport(0, 13)}},
		MemoryPages: 1,
	}.Encode()
	ctx := context.Background()
	for _, fallback := range []bool{false, true} {
		if fallback {
			rewriteInterrupts = func([]byte) ([]byte, bool, error) { return nil, false, errors.New("unreadable") }
			defer func() { rewriteInterrupts = addInterrupts }()
		}
		e, _ := newEngine(t, WithHost(probe)) // a new one: the first compiled these bytes on its main runtime
		mod, err := e.Compile(ctx, "cap", "probe", "tool", nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if onFallback := e.fallback != nil && mod.rt == e.fallback; onFallback != fallback {
			t.Fatalf("on the fallback runtime: %v, want %v", onFallback, fallback)
		}
		var seen uint32
		cctx := context.WithValue(ctx, seenKey{}, &seen)
		if err := callExport(cctx, e, mod, Grants{MemoryBytes: 1 << 20}, "seven"); err != nil || seen != 7 {
			t.Fatalf("fallback %v: the host saw %d, err %v", fallback, seen, err)
		}
		var ge *GuestError
		if err := callExport(cctx, e, mod, Grants{MemoryBytes: 1 << 20}, "thirteen"); !errors.As(err, &ge) || !errors.Is(err, fail) {
			t.Fatalf("fallback %v: an implementation's error gave %v, want a guest error wrapping it", fallback, err)
		}
	}
}

// TestComponentNeedsWorld: a component compiled without a World is refused with a code
// before anything is built, as its main instance cannot be chosen without one.
func TestComponentNeedsWorld(t *testing.T) {
	e, _ := newEngine(t)
	_, err := e.Compile(context.Background(), "cap", "tool", "tool", nil, watbuild.Wasm(t, "component/testdata/tool.wat"))
	if errs.Code(err) != CodeCompExport {
		t.Fatalf("want %s, got %v", CodeCompExport, err)
	}
}
