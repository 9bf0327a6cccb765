package wasm

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// spinLoop, the body of an (i32) -> i32 function, loops forever when its argument is
// spinForever and returns 0 otherwise.
var spinLoop = cat([]byte{0x03, 0x40}, op(0x20, 0), i32c(spinForever), []byte{0x46}, op(0x0d, 0), []byte{0x0b}, i32c(0), []byte{0x0b})

const spinForever = 12345

// TestAddInterrupts rewrites modules of every shape the rewrite changes: it must compile,
// compute what the original does, export a mutable flag, move a start function, and trap
// a looping function once the flag is set.
func TestAddInterrupts(t *testing.T) {
	run := []gType{{[]byte{tI32}, []byte{tI32}}, {nil, nil}}
	tests := []struct {
		name  string
		m     gModule
		start bool
	}{
		{"no global or export section", gModule{types: run, funcs: []gFunc{{typ: 0, body: spinLoop}}, noExport: true, start: -1}, false},
		{"globals, exports, a loop", gModule{types: run, funcs: []gFunc{{typ: 0, body: spinLoop}},
			globals: []gGlobal{{tI32, true, 3}}, exports: []gExport{{"spin", 0, 0}}, start: -1}, false},
		{"imports and a start function", gModule{types: run,
			imports: []gImport{{module: "env", name: "f", kind: 0, typ: 0}, {module: "env", name: "g", kind: 3, global: tI32}},
			funcs: []gFunc{
				{typ: 0, body: spinLoop},
				{typ: 1, body: cat(op(0x23, 0), i32c(1), []byte{0x6a}, op(0x10, 0), op(0x24, 1), []byte{0x0b})}, // ga = f(g+1)
				{typ: 0, body: cat(op(0x23, 1), []byte{0x0b})},
			},
			globals: []gGlobal{{tI32, true, 0}}, exports: []gExport{{"spin", 0, 1}, {"ga", 3, 1}, {"get", 0, 3}}, start: 2, memory: 1}, true},
		{"table and indirect calls", generate([]byte{0x09, 4, 2, 2, 2, 2, 1, 1, 1, 7, 7, 7}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wasm := tt.m.encode()
			compareRewrite(t, wasm)
			out, moved, err := addInterrupts(wasm)
			if err != nil {
				t.Fatal(err)
			}
			if moved != tt.start {
				t.Errorf("start moved: %v, want %v", moved, tt.start)
			}
			ctx := context.Background()
			m, err := comparisonRuntime(t).InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName(""))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			in := newInterrupter(m)
			if in == nil {
				t.Fatal("no mutable interrupt flag exported")
			}
			spin := m.ExportedFunction("spin")
			if spin == nil {
				return
			}
			in.flag.Set(1)
			if _, err := spin.Call(ctx, spinForever); err == nil {
				t.Fatal("a spinning function ran past the set flag")
			}
		})
	}
	if _, _, err := addInterrupts([]byte("\x00asm\x01\x00\x00\x00\x0a\x04\x01\x02\x00\xff")); err == nil {
		t.Error("an unknown opcode was rewritten")
	}
}

// blockModule calls an import that blocks until the call's context ends and then
// returns as if nothing happened: only the check after the call can stop the guest.
var blockModule = gModule{
	types:   []gType{{nil, nil}},
	imports: []gImport{{module: "capsulegate-test", name: "block", kind: 0, typ: 0}},
	funcs:   []gFunc{{typ: 0, body: cat(op(0x10, 0), []byte{0x0b})}},
	exports: []gExport{{"block", 0, 1}},
	start:   -1,
}

// recursionModule's "recurse" calls f(40), where f(n) calls f(n-1) twice: shallow, with
// no loop, and far longer than any deadline; "overflow" recurses without end.
var recursionModule = gModule{
	types: []gType{{nil, nil}, {[]byte{tI32}, nil}},
	funcs: []gFunc{
		{typ: 0, body: cat(i32c(40), op(0x10, 1), []byte{0x0b})},
		{typ: 1, body: cat(op(0x20, 0), []byte{0x45, 0x04, 0x40, 0x0f, 0x0b},
			op(0x20, 0), i32c(1), []byte{0x6b}, op(0x10, 1), op(0x20, 0), i32c(1), []byte{0x6b}, op(0x10, 1), []byte{0x0b})},
		{typ: 0, body: cat(op(0x10, 2), []byte{0x0b})},
	},
	exports: []gExport{{"recurse", 0, 0}, {"overflow", 0, 2}},
	start:   -1,
}

// pollModule sleeps an hour in one WASI poll_oneoff (a clock subscription at 0, the
// timeout at offset 24).
var pollModule = gModule{
	types:   []gType{{[]byte{tI32, tI32, tI32, tI32}, []byte{tI32}}, {nil, nil}},
	imports: []gImport{{module: "wasi_snapshot_preview1", name: "poll_oneoff", kind: 0, typ: 0}},
	funcs: []gFunc{{typ: 1, body: cat(i32c(24), i64c(int64(time.Hour)), op(0x37, 3, 0),
		i32c(0), i32c(64), i32c(1), i32c(128), op(0x10, 0), []byte{0x1a, 0x0b})}},
	exports: []gExport{{"sleep", 0, 1}},
	memory:  1,
	start:   -1,
}

// TestDeadlineStopsGuests runs every way a guest can hold its call — a spin loop, a
// call-heavy loop, a sleep, a blocking host call, a recursion without loops — under a
// short deadline: each ends soon after it, classified deadline (or canceled, when the
// caller cancels), counted once, and by the interrupt flag, not by wazero.
func TestDeadlineStopsGuests(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	host := e.rt.NewHostModuleBuilder("capsulegate-test")
	host.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, _ api.Module, _ []uint64) {
		<-ctx.Done()
	}), nil, nil).Export("block")
	ctx := context.Background()
	if _, err := host.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	compile := func(name string, wasm []byte) *Module {
		mod, err := e.Compile(ctx, "cap", name, "tool", nil, wasm)
		if err != nil {
			t.Fatal(err)
		}
		return mod
	}
	hostileMod := compile("hostile", hostile.Encode())
	callHeavy := compile("call-heavy", wasmtest.Module{Funcs: []wasmtest.Func{
		{Body: wasmtest.Nop},
		{Export: "work", Locals: 1, Body: wasmtest.CallLoop(0, 1<<31-1)},
	}}.Encode())
	blockMod := compile("block", blockModule.encode())
	recursion := compile("recursion", recursionModule.encode())
	poll := compile("poll", pollModule.encode())
	goSpin := compile("go-spin", guestbuild.Wasm(t, "../../internal/testkit/testguests/hostile-spin"))

	export := func(mod *Module, name string) func(context.Context, Grants) error {
		return func(ctx context.Context, g Grants) error {
			return e.Call(ctx, mod, g, func(ctx context.Context, inst *Instance) error {
				if newInterrupter(inst.Module) == nil {
					t.Error("the instance has no interrupt flag")
				}
				_, err := inst.ExportedFunction(name).Call(ctx)
				return err
			})
		}
	}
	goTool := func(input string) func(context.Context, Grants) error {
		return func(ctx context.Context, g Grants) error {
			_, err := callTool(ctx, e, goSpin, g, abi.ToolInput{Data: &input})
			return err
		}
	}
	const deadline = 200 * time.Millisecond
	tests := []struct {
		name     string
		artifact string
		call     func(context.Context, Grants) error
		cancel   bool
		reason   string
	}{
		{"spin loop", "hostile", export(hostileMod, "spin"), false, ReasonDeadline},
		{"call-heavy loop", "call-heavy", export(callHeavy, "work"), false, ReasonDeadline},
		{"blocking host call that ignores the deadline", "block", export(blockMod, "block"), false, ReasonDeadline},
		{"recursion without loops", "recursion", export(recursion, "recurse"), false, ReasonDeadline},
		{"WASI sleep", "poll", export(poll, "sleep"), false, ReasonDeadline},
		{"Go guest spinning", "go-spin", goTool("spin"), false, ReasonDeadline},
		{"Go guest sleeping", "go-spin", goTool("sleep 60"), false, ReasonDeadline},
		{"spin loop canceled", "hostile", export(hostileMod, "spin"), true, ReasonCanceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			g := Grants{MemoryBytes: 64 << 20, Deadline: deadline}
			if tt.cancel {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(deadline, cancel)
				g.Deadline = time.Minute
			}
			before := testutil.ToFloat64(e.metrics.Traps.WithLabelValues("cap", tt.artifact, "tool", tt.reason))
			if tt.reason == ReasonCanceled {
				before = testutil.ToFloat64(e.metrics.Calls.WithLabelValues("cap", tt.artifact, "tool", tt.reason))
			}
			start := time.Now()
			err := tt.call(ctx, g)
			elapsed := time.Since(start)
			var ge *GuestError
			if !errors.As(err, &ge) || ge.Reason != tt.reason {
				t.Fatalf("want reason %s, got %v", tt.reason, err)
			}
			if !errors.Is(err, errInterrupted) {
				t.Errorf("not stopped by the interrupt flag: %v", err)
			}
			if elapsed > deadline+time.Second {
				t.Errorf("took %v, over deadline + 1s", elapsed)
			}
			after := testutil.ToFloat64(e.metrics.Traps.WithLabelValues("cap", tt.artifact, "tool", tt.reason))
			if tt.reason == ReasonCanceled {
				after = testutil.ToFloat64(e.metrics.Calls.WithLabelValues("cap", tt.artifact, "tool", tt.reason))
			}
			if after != before+1 {
				t.Errorf("%s counted %v times", tt.reason, after-before)
			}
		})
	}
	t.Run("recursion without end", func(t *testing.T) {
		err := export(recursion, "overflow")(ctx, Grants{MemoryBytes: 64 << 20, Deadline: time.Minute})
		var ge *GuestError
		if !errors.As(err, &ge) || ge.Reason != ReasonTrap {
			t.Fatalf("want a stack overflow trap, got %v", err)
		}
	})
	t.Run("a normal guest", func(t *testing.T) {
		err := export(hostileMod, "ok")(ctx, Grants{MemoryBytes: 64 << 20, Deadline: deadline})
		if err != nil {
			t.Fatal(err)
		}
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fallback != nil {
		t.Error("a module went to the fallback runtime")
	}
}

// TestInterruptRearm: a flag set by an ended context is cleared when the instance is
// armed for its next call, and disarm reports whether it was set.
func TestInterruptRearm(t *testing.T) {
	out, _, err := addInterrupts(wasmtest.Module{Funcs: []wasmtest.Func{{Export: "spin", Body: wasmtest.Spin}}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := comparisonRuntime(t).InstantiateWithConfig(ctx, out, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(ctx)
	in := newInterrupter(m)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if fired := in.arm(ended)(); !fired || in.flag.Get() != 1 {
		t.Fatalf("ended context: fired %v, flag %d", fired, in.flag.Get())
	}
	if fired := in.arm(ctx)(); fired || in.flag.Get() != 0 {
		t.Fatalf("live context: fired %v, flag %d", fired, in.flag.Get())
	}
}

// TestGarbageCollectionWhileSpinning: compiled wasm cannot be preempted, so a guest that
// never left its machine code would hold off a garbage collection (which stops every
// goroutine) — and with it the timer that would stop the guest — for ever. The countdown's
// trips to Go let a collection finish while a guest spins.
func TestGarbageCollectionWhileSpinning(t *testing.T) {
	e, _ := newEngine(t)
	started := make(chan struct{})
	host := e.rt.NewHostModuleBuilder("capsulegate-test")
	host.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
		close(started)
	}), nil, nil).Export("started")
	ctx := context.Background()
	if _, err := host.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	m := gModule{
		types:   []gType{{nil, nil}},
		imports: []gImport{{module: "capsulegate-test", name: "started", kind: 0, typ: 0}},
		funcs:   []gFunc{{typ: 0, body: cat(op(0x10, 0), []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b})}},
		exports: []gExport{{"spin", 0, 1}},
		start:   -1,
	}
	mod, err := e.Compile(ctx, "cap", "spin-gc", "tool", nil, m.encode())
	if err != nil {
		t.Fatal(err)
	}
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- callExport(callCtx, e, mod, Grants{MemoryBytes: 1 << 20}, "spin") }()
	<-started
	begin := time.Now()
	runtime.GC()
	if took := time.Since(begin); took > time.Second {
		t.Errorf("a collection during a spin took %v", took)
	}
	cancel()
	var ge *GuestError
	if err := <-done; !errors.As(err, &ge) || ge.Reason != ReasonCanceled {
		t.Fatalf("want canceled, got %v", err)
	}
}

// TestFallbackRuntime: a module the rewrite cannot read runs on the fallback runtime,
// where wazero's close-on-context-done still stops it at its deadline; an invalid module
// still fails with its own error and starts no fallback runtime.
func TestFallbackRuntime(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	if _, err := e.Compile(ctx, "cap", "junk", "tool", nil, []byte("\x00asm\x01\x00\x00\x00\x0a\x01")); err == nil {
		t.Fatal("an invalid module compiled")
	}
	if e.fallback != nil {
		t.Fatal("an invalid module started the fallback runtime")
	}
	rewriteInterrupts = func([]byte) ([]byte, bool, error) { return nil, false, errors.New("unreadable") }
	defer func() { rewriteInterrupts = addInterrupts }()
	mod, err := e.Compile(ctx, "cap", "hostile", "tool", nil, hostile.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if e.fallback == nil || mod.rt != e.fallback {
		t.Fatal("the module is not on the fallback runtime")
	}
	g := Grants{MemoryBytes: 4 << 20, Deadline: 200 * time.Millisecond}
	if err := callExport(ctx, e, mod, g, "ok"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = callExport(ctx, e, mod, g, "spin")
	var ge *GuestError
	if !errors.As(err, &ge) || ge.Reason != ReasonDeadline || errors.Is(err, errInterrupted) {
		t.Fatalf("want a deadline by close-on-context-done, got %v", err)
	}
	if took := time.Since(start); took > g.Deadline+time.Second {
		t.Errorf("took %v", took)
	}
}

// lateAfterFuncCtx is a context whose end is seen (Done closed, Err set) before the
// AfterFuncs registered on it run — here, never: stop always wins. It stages the race
// the standard library's contexts leave open for an instant, between closing Done and
// scheduling their AfterFuncs.
type lateAfterFuncCtx struct {
	context.Context
	done chan struct{}
}

func (c *lateAfterFuncCtx) Done() <-chan struct{} { return c.done }

func (c *lateAfterFuncCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// AfterFunc never calls f; its stop reports f stopped (context.AfterFunc uses it).
func (c *lateAfterFuncCtx) AfterFunc(f func()) func() bool { return func() bool { return true } }

// TestInterruptedWhenStopWinsTheRace: a host call that returns as the context ends
// (ignoring it otherwise), with the guest returning before the interrupt flag's
// AfterFunc ran, is still the call's deadline — not a success. The host function ends
// the context itself, so the race is taken every time.
func TestInterruptedWhenStopWinsTheRace(t *testing.T) {
	e, _ := newEngine(t)
	ctx := &lateAfterFuncCtx{Context: context.Background(), done: make(chan struct{})}
	host := e.rt.NewHostModuleBuilder("capsulegate-test")
	host.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(context.Context, api.Module, []uint64) {
		close(ctx.done)
	}), nil, nil).Export("block")
	if _, err := host.Instantiate(context.Background()); err != nil {
		t.Fatal(err)
	}
	mod, err := e.Compile(context.Background(), "cap", "block", "tool", nil, blockModule.encode())
	if err != nil {
		t.Fatal(err)
	}
	err = e.Call(ctx, mod, Grants{MemoryBytes: 64 << 20}, func(ctx context.Context, inst *Instance) error {
		_, err := inst.ExportedFunction("block").Call(ctx)
		return err
	})
	var ge *GuestError
	if !errors.As(err, &ge) || ge.Reason != ReasonDeadline || !errors.Is(err, errInterrupted) {
		t.Fatalf("want an interrupted deadline, got %v", err)
	}
}
