package murmur

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// MaxInvokeDepth bounds nested tool-registry invokes within one call chain.
const MaxInvokeDepth = 8

// Imports is what the guest's imports can reach during one call: it travels in the call's context,
// so the host modules are defined once per engine (Install) and serve every capsule.
type Imports struct {
	// Invoke runs a tool for murmur:tool-registry/invoke; nil refuses every invoke.
	Invoke func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error)
	// HTTP serves capsulegate:http/outgoing; nil refuses every request.
	HTTP *Outgoing
	// Chunk receives the text the guest streams through murmur:stream/events (thinking
	// or not); nil drops it. The interface's tool-call-started and tool-call-input-bytes
	// are accepted and ignored (docs/reference/guest-abi.md "murmur:stream/events").
	Chunk func(thinking bool, text string)
	// RequestInput asks the A2A client for input; nil outside an A2A task.
	RequestInput func(ctx context.Context, prompt string) (string, error)
	// Hook serves a hook's imports; nil answers each as ungranted.
	Hook *HookImports
	// Artifacts serves murmur:artifact-manager/manage; nil answers every call with an
	// error the guest reads ("not-granted: …").
	Artifacts ArtifactManager
	// Peers serves murmur:message/send; nil answers every call with an error the guest
	// reads (E-PEER-007).
	Peers PeerSender
	// Who names the calling artifact in network-denial records.
	Who string
}

// ArtifactManager is Murmur's artifact manager as a capsule's guests reach it
// (murmur:artifact-manager/manage@0.1.0, docs/reference/guest-abi.md): every error is a
// string the guest reads, never a trap.
type ArtifactManager interface {
	List(ctx context.Context) []abi.ArtifactSummary
	Describe(ctx context.Context, name string) (abi.ArtifactInfo, error)
	Search(ctx context.Context, query string) ([]abi.ArtifactSummary, error)
	Pull(ctx context.Context, name, version string) (abi.ArtifactSummary, error)
	Remove(ctx context.Context, name string) (bool, error)
	Diagnostics(ctx context.Context) (abi.RuntimeState, error)
}

type importsKey struct{}
type depthKey struct{}
type bodiesKey struct{}

// WithImports returns ctx carrying h for the host imports of calls made with it.
func WithImports(ctx context.Context, h *Imports) context.Context {
	return context.WithValue(ctx, importsKey{}, h)
}

// MaxOpenBodies bounds the response bodies one call holds open
// (capsulegate:http/outgoing@0.2.0 open).
const MaxOpenBodies = 16

// bodies are the streamed response bodies one call opened, by handle. A call's bodies
// end with it: what the guest did not close is closed when the call returns.
type bodies struct {
	mu   sync.Mutex
	next uint32
	open map[uint32]*OutgoingStream
}

// withBodies returns ctx with a fresh body table for one call and the func that closes
// whatever the call left open.
func withBodies(ctx context.Context) (context.Context, func()) {
	b := &bodies{open: map[uint32]*OutgoingStream{}}
	return context.WithValue(ctx, bodiesKey{}, b), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for id, s := range b.open {
			s.Close()
			delete(b.open, id)
		}
	}
}

func (b *bodies) add(s *OutgoingStream) (uint32, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.open) >= MaxOpenBodies {
		return 0, fmt.Errorf("%d response bodies are open: close one first", MaxOpenBodies)
	}
	b.next++ // handles start at 1 so a zeroed record never names a body
	b.open[b.next] = s
	return b.next, nil
}

func (b *bodies) get(id uint32) *OutgoingStream {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.open[id]
}

func (b *bodies) remove(id uint32) *OutgoingStream {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.open[id]
	delete(b.open, id)
	return s
}

func importsFrom(ctx context.Context) *Imports {
	h, _ := ctx.Value(importsKey{}).(*Imports)
	if h == nil {
		return &Imports{}
	}
	return h
}

// ErrNoTask is the trap of murmur:task/task#request-input outside an A2A task.
var ErrNoTask = errors.New("murmur:task/task#request-input called outside an A2A task: there is no client to ask")

// ignore serves an import whose call the host accepts and drops.
func ignore(context.Context, *Imports, []any) ([]any, error) { return nil, nil }

// hostFunc is a murmur host function serving name with f's types by impl, which gets
// the call's Imports.
func hostFunc(name string, f *abi.Func, impl func(ctx context.Context, h *Imports, args []any) ([]any, error)) wasm.HostFunc {
	return wasm.HostFunc{Name: name, Func: f, Impl: func(ctx context.Context, args []any) ([]any, error) {
		return impl(ctx, importsFrom(ctx), args)
	}}
}

func emitChunk(thinking bool) func(context.Context, *Imports, []any) ([]any, error) {
	return func(_ context.Context, h *Imports, a []any) ([]any, error) {
		if h.Chunk != nil {
			h.Chunk(thinking, a[0].(string))
		}
		return nil, nil
	}
}

func requestInput(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.RequestInput == nil {
		return nil, ErrNoTask
	}
	answer, err := h.RequestInput(ctx, a[0].(string))
	if err != nil {
		return nil, err
	}
	return []any{answer}, nil
}

// hostModules are the murmur and capsulegate:http interfaces, as core modules import
// them (by module name) and as components do (by interface, any version of its level in
// importLevels, else 0.1.x), served by the same implementations. murmur:text/chunks is
// the component worlds' name for streamed text.
var hostModules = []wasm.HostModule{
	{Module: abi.ModuleRegistry, Interface: "murmur:tool-registry/invoke", Funcs: []wasm.HostFunc{hostFunc(abi.ImportInvoke, abi.Invoke, importInvoke)}},
	{Module: abi.ModuleHTTP, Funcs: []wasm.HostFunc{hostFunc(abi.ImportSend, abi.HTTPSend, importHTTPSend)}},
	{Module: abi.ModuleHTTP02, Funcs: []wasm.HostFunc{
		hostFunc(abi.ImportSend, abi.HTTPSend, importHTTPSend),
		hostFunc(abi.ImportOpen, abi.HTTPOpen, importHTTPOpen),
		hostFunc(abi.ImportReadBody, abi.HTTPRead, importHTTPRead),
		hostFunc(abi.ImportCloseBody, abi.HTTPClose, importHTTPClose),
	}},
	{Module: abi.ModuleStream, Funcs: []wasm.HostFunc{
		hostFunc(abi.ImportEmitChunk, abi.EmitChunk, emitChunk(false)),
		hostFunc(abi.ImportEmitThink, abi.EmitThink, emitChunk(true)),
		hostFunc(abi.ImportCallStarted, abi.CallStarted, ignore),
		hostFunc(abi.ImportInputBytes, abi.InputBytes, ignore),
	}},
	{Interface: "murmur:text/chunks", Funcs: []wasm.HostFunc{
		hostFunc(abi.ImportEmitChunk, abi.EmitChunk, emitChunk(false)),
		hostFunc(abi.ImportEmitThink, abi.EmitThink, emitChunk(true)),
	}},
	{Module: abi.ModuleTask, Interface: "murmur:task/task", Funcs: []wasm.HostFunc{hostFunc(abi.ImportRequest, abi.RequestIn, requestInput)}},
	{Module: abi.ModuleInference, Interface: "murmur:runtime/inference", Funcs: []wasm.HostFunc{hostFunc(abi.ImportRunInference, abi.RunInference, importRunInference)}},
	{Module: abi.ModuleTokens, Interface: "murmur:runtime/tokens", Funcs: []wasm.HostFunc{hostFunc(abi.ImportCount, abi.CountTokens, importCountTokens)}},
	{Module: abi.ModuleTaskIO, Interface: "murmur:task-io/read", Funcs: []wasm.HostFunc{
		hostFunc(abi.ImportInputLen, abi.InputLen, importInputLen),
		hostFunc(abi.ImportReadInput, abi.ReadInput, importReadInput),
		hostFunc(abi.ImportOutputLen, abi.OutputLen, importOutputLen),
		hostFunc(abi.ImportReadOutput, abi.ReadOutput, importReadOutput),
	}},
	{Module: abi.ModuleConversation, Interface: "murmur:conversation/read", Funcs: []wasm.HostFunc{hostFunc(abi.ImportReadMessages, abi.ReadMessages, importReadMessages)}},
	{Module: abi.ModuleArtifacts, Interface: artifactsInterface, Funcs: artifactFuncs},
	{Module: abi.ModuleMessage, Interface: messageInterface, Funcs: messageFuncs},
}

// componentImports are the interfaces of hostModules a component may import, by
// interface.
var componentImports = func() map[string][]wasm.HostFunc {
	m := map[string][]wasm.HostFunc{}
	for _, hm := range hostModules {
		if hm.Interface != "" {
			m[hm.Interface] = append(m[hm.Interface], hm.Funcs...)
		}
	}
	return m
}()

// importLevels are the levels of the imported interfaces not at 0.1.x.
var importLevels = map[string]string{
	"murmur:runtime/inference": "0.4",
	"murmur:runtime/tokens":    "0.4",
	"murmur:conversation/read": "0.2",
}

// importLevel is the level ("major.minor") of iface a component may import.
func importLevel(iface string) string {
	if l, ok := importLevels[iface]; ok {
		return l
	}
	return "0.1"
}

func importInvoke(ctx context.Context, h *Imports, a []any) ([]any, error) {
	name := a[0].(string)
	in, err := abi.ToToolInput(a[1])
	if err != nil {
		return nil, err
	}
	depth, _ := ctx.Value(depthKey{}).(int)
	var res abi.Result
	switch {
	case h.Invoke == nil:
		res = abi.Result{Err: true, Value: "tool-registry: this capsule may not invoke tools"}
	case depth >= MaxInvokeDepth:
		res = abi.Result{Err: true, Value: fmt.Sprintf("tool-registry: invoke nested more than %d deep", MaxInvokeDepth)}
	default:
		out, err := h.Invoke(context.WithValue(ctx, depthKey{}, depth+1), name, in)
		if err != nil {
			res = abi.Result{Err: true, Value: err.Error()}
		} else {
			res = abi.Result{Value: out.Value(false)}
		}
	}
	return []any{res}, nil
}

func importHTTPSend(ctx context.Context, h *Imports, a []any) ([]any, error) {
	req, err := abi.ToHTTPRequest(a[0])
	if err != nil {
		return nil, err
	}
	if h.HTTP == nil {
		return []any{abi.Result{Err: true, Value: "network policy: this capsule may not make HTTP requests"}}, nil
	}
	resp, err := h.HTTP.Send(ctx, h.Who, OutgoingRequest{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body})
	if err != nil {
		return []any{abi.Result{Err: true, Value: err.Error()}}, nil
	}
	return []any{abi.Result{Value: abi.HTTPResponse{Status: resp.Status, Headers: resp.Headers, Body: resp.Body}.Value()}}, nil
}

func importHTTPOpen(ctx context.Context, h *Imports, a []any) ([]any, error) {
	req, err := abi.ToHTTPRequest(a[0])
	if err != nil {
		return nil, err
	}
	fail := func(msg string) ([]any, error) { return []any{abi.Result{Err: true, Value: msg}}, nil }
	if h.HTTP == nil {
		return fail("network policy: this capsule may not make HTTP requests")
	}
	b, _ := ctx.Value(bodiesKey{}).(*bodies)
	if b == nil {
		return fail("open: this call cannot hold response bodies")
	}
	s, err := h.HTTP.Open(ctx, h.Who, OutgoingRequest{Method: req.Method, URL: req.URL, Headers: req.Headers, Body: req.Body})
	if err != nil {
		return fail(err.Error())
	}
	id, err := b.add(s)
	if err != nil {
		s.Close()
		return fail(err.Error())
	}
	return []any{abi.Result{Value: abi.HTTPHead{Body: id, Status: s.Status, Headers: s.Headers}.Value()}}, nil
}

// errNoBody traps a guest naming a body handle it does not hold: like a forged
// resource handle, it is a broken contract, not a failed request.
var errNoBody = fmt.Errorf("%w: no open response body has this handle", abi.ErrABI)

func importHTTPRead(ctx context.Context, _ *Imports, a []any) ([]any, error) {
	b, _ := ctx.Value(bodiesKey{}).(*bodies)
	var s *OutgoingStream
	if b != nil {
		s = b.get(a[0].(uint32))
	}
	if s == nil {
		return nil, errNoBody
	}
	data, err := s.Read(int(a[1].(uint32)))
	if err != nil {
		return []any{abi.Result{Err: true, Value: err.Error()}}, nil
	}
	return []any{abi.Result{Value: data}}, nil
}

func importHTTPClose(ctx context.Context, _ *Imports, a []any) ([]any, error) {
	b, _ := ctx.Value(bodiesKey{}).(*bodies)
	var s *OutgoingStream
	if b != nil {
		s = b.remove(a[0].(uint32))
	}
	if s == nil {
		return nil, errNoBody
	}
	s.Close()
	return nil, nil
}
