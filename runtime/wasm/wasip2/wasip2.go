// Package wasip2 is the host side of WASI 0.2 (wasi:cli, wasi:io, wasi:clocks,
// wasi:random, wasi:filesystem, wasi:http) at the canonical ABI's core level: the
// functions a wasm32-wasip2 component's main module imports, each with its flattened core
// signature, as `canon lower` with a memory, cabi_realloc and UTF-8 strings lowers them.
//
// One Host serves one component instance: it owns the instance's resource table (every
// WASI resource is host-defined) and what the handles hold (open files, request bodies,
// responses in flight). The instantiator looks each core import up with Host.Func, binds
// the canon options of that lowering (which memory, which cabi_realloc) in a Binding, and
// calls Func.Call from its wazero host function; a non-nil error must trap the guest.
// Versions: any 0.2.x module name is served by the same functions and the same table, as
// a component built against several 0.2 minors imports them (wit-component unifies them).
//
// Every value from the guest is hostile: handles are checked (type, liveness, children),
// lists and strings are lifted by package abi with every bound checked, the table and
// buffers are bounded, blocking calls end with the call's context. Limits and what is
// refused are in docs/guests.md "WASI 0.2 interfaces"; codes in docs/errors.md.
package wasip2

import (
	"context"
	"crypto/rand"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero/api"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// Limits of one Host; Env fields of the same name override them when positive.
const (
	// DefaultMaxWrite is what output-stream.check-write grants per call (and so the most
	// one write or write-zeroes takes): stdout and stderr always grant it, so a guest never
	// waits on them.
	DefaultMaxWrite = 64 << 10
	// MaxBlockingWrite is the spec's bound on blocking-write-and-flush and
	// blocking-write-zeroes-and-flush.
	MaxBlockingWrite = 4096
	// DefaultMaxRead is the most one read, blocking-read or skip returns.
	DefaultMaxRead = 1 << 20
	// DefaultMaxBuffered bounds the bytes the host holds for the guest at once: header
	// fields, outgoing request bodies and received response bodies.
	DefaultMaxBuffered = 64 << 20
	// DefaultMaxRequestBody caps one outgoing request body (as the capsulegate:http
	// import does).
	DefaultMaxRequestBody = 16 << 20
	// DefaultMaxInFlight bounds outgoing-handler.handle requests in flight: from handle
	// until their answer is refused or its body is let go (each holds a connection).
	DefaultMaxInFlight = 8
	// MaxFieldEntries bounds the entries of one fields resource.
	MaxFieldEntries = 1024
)

// Clock is the source of wall-clock and monotonic time.
type Clock interface {
	// Now is the wall-clock time.
	Now() time.Time
	// Monotonic is nanoseconds since an arbitrary fixed point; it never goes back.
	Monotonic() uint64
}

// Env is what one component instance may reach through WASI 0.2.
type Env struct {
	// FS is the guest's filesystem, preopened as "." (nil: no preopens at all). The
	// engine passes Grants.FS, runtime/wasm/guestfs over os.Root, so escapes are refused
	// exactly as in preview1.
	FS experimentalsys.FS
	// Env is the environment, in order, as KEY=VALUE.
	Env []string
	// Args are the arguments, the program name first.
	Args []string
	// InitialCwd is answered by environment.initial-cwd ("" answers none).
	InitialCwd string
	// Stdin is all the guest can read from stdin.
	Stdin []byte
	// Stdout and Stderr receive the guest's output (nil: discarded).
	Stdout, Stderr io.Writer
	// HTTP sends outgoing requests (nil: every request is denied).
	HTTP HTTPSender
	// HTTPCheck, if set, checks a request's URL against the network policy before
	// outgoing-handler.handle returns: a refusal (matching ErrDenied) makes handle itself
	// fail with HTTP-request-denied, as Wasmtime's hosts do, instead of its future.
	HTTPCheck func(url string) error
	// Clock gives the time (nil: the host's clocks).
	Clock Clock
	// Random feeds wasi:random (nil: crypto/rand).
	Random io.Reader
	// Context returns the context of the call the instance serves, when the instance
	// outlives one call (a warm instance); blocking calls end when it or the context
	// passed to Func.Call ends. Nil: the latter only.
	Context func() context.Context
	// Interrupt, if set, is called when a blocking call returns because the context
	// ended, before the trap (the engine sets its interrupt flag there).
	Interrupt func()

	// MaxHandles bounds the resource table (0: DefaultMaxHandles).
	MaxHandles int
	// MaxWrite is check-write's grant (0: DefaultMaxWrite).
	MaxWrite int
	// MaxRead caps one read (0: DefaultMaxRead).
	MaxRead int
	// MaxBuffered bounds the bytes held for the guest (0: DefaultMaxBuffered).
	MaxBuffered int64
	// MaxRequestBody caps one outgoing body (0: DefaultMaxRequestBody).
	MaxRequestBody int64
	// MaxInFlight bounds outgoing requests in flight (0: DefaultMaxInFlight).
	MaxInFlight int
}

// Binding is the canon options of one lowered import: the memory its pointers index and
// the cabi_realloc lists and strings returned to the guest are allocated with.
type Binding struct {
	Memory abi.Memory
	// Realloc is nil when the lowering names none: a function returning a list or a
	// string then traps.
	Realloc abi.Realloc
}

// Host serves WASI 0.2 to one component instance.
type Host struct {
	env    Env
	tab    *table
	clock  Clock
	random io.Reader

	maxWrite, maxRead int
	maxBuffered       int64
	buffered          atomic.Int64 // bytes held against maxBuffered
	inFlight          atomic.Int32

	stdin          *memInput // shared by every get-stdin handle
	stdout, stderr *writerSink

	// done ends with Close: requests in flight stop.
	done   context.Context
	cancel context.CancelFunc
	once   sync.Once
}

// New returns a Host serving env to one component instance; Close releases it.
func New(env Env) *Host {
	h := &Host{env: env, tab: newTable(env.MaxHandles), clock: env.Clock, random: env.Random}
	if h.clock == nil {
		h.clock = hostClock{start: time.Now()}
	}
	if h.random == nil {
		h.random = rand.Reader
	}
	h.maxWrite = pos(env.MaxWrite, DefaultMaxWrite)
	h.maxRead = pos(env.MaxRead, DefaultMaxRead)
	h.maxBuffered = pos64(env.MaxBuffered, DefaultMaxBuffered)
	if h.env.MaxRequestBody <= 0 {
		h.env.MaxRequestBody = DefaultMaxRequestBody
	}
	if h.env.MaxInFlight <= 0 {
		h.env.MaxInFlight = DefaultMaxInFlight
	}
	h.stdin = &memInput{data: env.Stdin}
	h.stdout = &writerSink{w: env.Stdout}
	h.stderr = &writerSink{w: env.Stderr}
	h.done, h.cancel = context.WithCancel(context.Background())
	return h
}

func pos(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

func pos64(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// Close ends the instance's resources: open files are closed, requests in flight stop.
func (h *Host) Close() error {
	h.once.Do(func() {
		h.cancel()
		h.tab.closeAll()
	})
	return nil
}

// Handles is the number of live handles in the instance's table.
func (h *Host) Handles() int { return h.tab.count() }

// charge takes n bytes of the buffer budget; false when that would exceed it.
func (h *Host) charge(n int64) bool {
	if n <= 0 {
		return true
	}
	if h.buffered.Add(n) > h.maxBuffered {
		h.buffered.Add(-n)
		return false
	}
	return true
}

func (h *Host) release(n int64) {
	if n > 0 {
		h.buffered.Add(-n)
	}
}

type hostClock struct{ start time.Time }

func (c hostClock) Now() time.Time    { return time.Now() }
func (c hostClock) Monotonic() uint64 { return uint64(time.Since(c.start)) }

// Func is one WASI 0.2 function as a core import: its flattened signature, its WIT type
// and the host implementation.
type Func struct {
	// Module and Name are the core import's names, as asked.
	Module, Name string
	// WIT is the function's component-level type, e.g.
	// "func(self: borrow<output-stream>, contents: list<u8>) -> result<_, stream-error>".
	WIT string
	// Params and Results are the core signature (results spilled to a return area show
	// as a trailing i32 parameter).
	Params, Results []api.ValueType

	h *Host
	s *spec
}

// Call runs the function for a guest: stack holds the core parameters and receives the
// core results (wazero's GoModuleFunc convention). A non-nil error must trap the guest;
// it carries a code (docs/errors.md) and, when the guest broke the canonical ABI, matches
// abi.ErrABI. An exit of the guest is a *sys.ExitError of wazero.
func (f Func) Call(ctx context.Context, b Binding, stack []uint64) error {
	if f.h == nil || f.s == nil {
		return trap(CodeNotServed, "call of an unresolved function", false)
	}
	if b.Memory == nil {
		b.Memory = noMemory{}
	}
	n := len(f.Params)
	if len(stack) < max(n, len(f.Results)) {
		return trapf(CodeABI, true, "%s: stack of %d values, want %d", f.Name, len(stack), max(n, len(f.Results)))
	}
	flat := stack[:n:n]
	if f.s.pre != nil {
		if err := f.s.pre(f.h, flat); err != nil {
			return err
		}
	}
	args, err := f.s.f.LiftParams(b.Memory, flat)
	if err != nil {
		return abiTrap(f.Name+": lifting the arguments", err)
	}
	c := &call{ctx: ctx, h: f.h}
	res, err := f.s.impl(c, args)
	if err != nil {
		return err
	}
	var results []any
	if f.s.result != nil {
		results = []any{res}
	}
	retPtr, _ := f.s.f.RetPtr(flat)
	out, err := f.s.f.LowerResults(ctx, b.Memory, b.Realloc, results, retPtr)
	if err != nil {
		return abiTrap(f.Name+": lowering the results", err)
	}
	copy(stack, out)
	return nil
}

// noMemory stands in for a lowering without a memory: every access is out of bounds.
type noMemory struct{}

func (noMemory) Size() uint32                       { return 0 }
func (noMemory) Read(uint32, uint32) ([]byte, bool) { return nil, false }
func (noMemory) Write(uint32, []byte) bool          { return false }

// Func looks up the core import module.name ("wasi:io/streams@0.2.0",
// "[method]output-stream.write"); false when this host does not serve it.
func (h *Host) Func(module, name string) (Func, bool) {
	iface, ok := splitModule(module)
	if !ok {
		return Func{}, false
	}
	s, ok := registry()[iface+"#"+name]
	if !ok {
		return Func{}, false
	}
	p, r := s.f.ImportSignature()
	return Func{Module: module, Name: name, WIT: s.wit, Params: valueTypes(p), Results: valueTypes(r), h: h, s: s}, true
}

// Served lists the functions this host serves, as "wasi:io/streams#[method]output-stream.write"
// (any 0.2.x version of the interface), sorted.
func Served() []string {
	out := make([]string, 0, len(registry()))
	for k := range registry() {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}

// splitModule returns the interface of a WASI 0.2.x module name: "wasi:io/streams@0.2.3"
// gives "wasi:io/streams".
func splitModule(m string) (string, bool) {
	iface, ver, ok := strings.Cut(m, "@")
	if !ok || !strings.HasPrefix(iface, "wasi:") {
		return "", false
	}
	patch, ok := strings.CutPrefix(ver, "0.2.")
	if !ok || patch == "" || len(patch) > 4 {
		return "", false
	}
	for _, c := range patch {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return iface, true
}

func valueTypes(v []abi.ValType) []api.ValueType {
	out := make([]api.ValueType, len(v))
	for i, t := range v {
		out[i] = api.ValueType(t)
	}
	return out
}

// call is one host call in progress.
type call struct {
	ctx context.Context
	h   *Host
}

// ABI is the function's canonical ABI description (its WIT type, structurally).
func (f Func) ABI() *abi.Func {
	if f.s == nil {
		return nil
	}
	return f.s.f
}
