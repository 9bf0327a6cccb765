// Package mcpbridge serves a capsule's tools to a harness CLI over MCP, per run.
//
// A harness CLI (Claude Code, Codex, …) runs the agent loop itself and reaches the
// capsule's tools as an MCP server. Start opens one such server for one run: Streamable
// HTTP on a loopback (or caller-chosen) listener, guarded by a fresh bearer token, that
// lists exactly the tools it is given and hands every call to the gateway's own
// dispatcher (Config.Dispatch), where hooks, trace and limits apply. Close ends it, and
// with it every session and call in flight.
//
// The HTTP front refuses, before the MCP layer sees the request: a Host that is not the
// bridge's own address or a loopback form of its port, an Origin that does not name such
// a host (DNS rebinding), a missing or wrong bearer token (401), a method other than
// POST, GET and DELETE (405), and a path other than the endpoint's (404). It sends no
// CORS headers, so browsers' preflights fail.
package mcpbridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Defaults for the Config fields left zero.
const (
	DefaultAddr          = "127.0.0.1:0"
	DefaultMaxBodyBytes  = 4 << 20
	DefaultMaxConcurrent = 8
	DefaultServerVersion = "0"
)

// Path is the URL path the MCP endpoint is served at.
const Path = "/mcp"

// tokenBytes is the size of the per-run bearer token before encoding: 256 bits.
const tokenBytes = 32

// maxNamesInError caps how many declared tool names an unknown-tool error lists, so a
// capsule with hundreds of tools does not produce a huge error message.
const maxNamesInError = 64

// errClosed is the error a call gets once the bridge is closed.
var errClosed = errors.New("mcpbridge: bridge closed")

// Tool is one tool the bridge lists: a capsule's declared tool or skill.
type Tool struct {
	// Name is the tool's name as the harness sees it (after its own server prefix):
	// 1–128 characters of A–Z, a–z, 0–9, '_', '-' and '.'.
	Name string
	// Description is the text the model reads to decide when to call the tool.
	Description string
	// InputSchema is the JSON Schema of the arguments, a JSON object whose "type" is
	// "object"; empty means any object.
	InputSchema json.RawMessage
}

// DispatchFunc runs one tool call: err is a protocol-level failure (the call could not
// be made), isError a tool-level one whose output the model reads.
type DispatchFunc func(ctx context.Context, name string, input json.RawMessage) (output string, isError bool, err error)

// Config configures one bridge.
type Config struct {
	// ServerName is the MCP server's name; harnesses prefix its tools with it, as
	// "<server-name>__<tool>". 1–64 characters of A–Z, a–z, 0–9, '_' and '-'.
	ServerName string
	// ServerVersion is reported at initialize; DefaultServerVersion when empty.
	ServerVersion string
	// Tools are exactly the tools listed, in this order.
	Tools []Tool
	// Dispatch runs the calls; required.
	Dispatch DispatchFunc
	// Addr is the TCP address to listen on when Listen is nil; DefaultAddr when empty.
	Addr string
	// Listen, when set, makes the listener instead of Addr: for an address reachable
	// from inside a network namespace, say. The bridge closes the listener.
	Listen func() (net.Listener, error)
	// MaxBodyBytes bounds one request body; DefaultMaxBodyBytes when zero.
	MaxBodyBytes int64
	// MaxConcurrent bounds the calls dispatched at once, others waiting for a slot;
	// DefaultMaxConcurrent when zero.
	MaxConcurrent int
	// OnCall, when set, is told of every call of a declared tool once it ends: its
	// duration as the harness sees it (waiting for a slot included) and whether it
	// failed, at tool level (isError) or protocol level.
	OnCall func(name string, dur time.Duration, isError bool)

	// slotWait, set by tests, is called when a call has to wait for a slot.
	slotWait func()
}

// Bridge is one running MCP server for one run.
type Bridge struct {
	cfg      Config
	token    string
	url      string
	hosts    map[string]bool // Host header values accepted, lower case
	declared map[string]bool
	names    []string

	srv    *http.Server
	mcp    *mcp.Server
	sem    chan struct{}
	ctx    context.Context // cancelled by Close; every call's context derives from it
	cancel context.CancelFunc
	served chan struct{} // closed when Serve returns
	stop   func() bool   // unregisters the close on Start's ctx

	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Start validates cfg, listens and serves until Close or until ctx is done. ctx's values
// reach every Dispatch call.
func Start(ctx context.Context, cfg Config) (*Bridge, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mcpbridge: start: %w", err)
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	token, err := newToken()
	if err != nil {
		return nil, err
	}
	b := &Bridge{
		cfg:      cfg,
		token:    token,
		declared: make(map[string]bool, len(cfg.Tools)),
		sem:      make(chan struct{}, cfg.MaxConcurrent),
		served:   make(chan struct{}),
	}
	for _, t := range cfg.Tools {
		b.declared[t.Name] = true
		b.names = append(b.names, t.Name)
	}
	if err := b.buildServer(); err != nil {
		return nil, err
	}

	ln, err := b.listen()
	if err != nil {
		return nil, err
	}
	b.url, b.hosts, err = addresses(ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}

	b.ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.mcp }, &mcp.StreamableHTTPOptions{
		MaxRequestBodyBytes: cfg.MaxBodyBytes,
	})
	b.srv = &http.Server{
		Handler:           &guard{b: b, next: h},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return b.ctx },
		// A harness probing or dropping connections is not worth a line on stderr.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() {
		defer close(b.served)
		b.srv.Serve(ln) // returns http.ErrServerClosed once Close runs
	}()
	// shutdown, not Close: Close reads b.stop, which this very line is setting.
	b.stop = context.AfterFunc(ctx, func() { b.shutdown() })
	return b, nil
}

// fill checks cfg and sets its defaults.
func (cfg *Config) fill() error {
	if !validName(cfg.ServerName, 64, false) {
		return fmt.Errorf("mcpbridge: server name %q: want 1–64 characters of A–Z, a–z, 0–9, '_' and '-'", cfg.ServerName)
	}
	if cfg.Dispatch == nil {
		return errors.New("mcpbridge: Config.Dispatch is nil")
	}
	if cfg.ServerVersion == "" {
		cfg.ServerVersion = DefaultServerVersion
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	switch {
	case cfg.MaxBodyBytes == 0:
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	case cfg.MaxBodyBytes < 0:
		// The SDK reads a negative limit as "none"; a bridge always has one.
		return fmt.Errorf("mcpbridge: MaxBodyBytes %d is negative", cfg.MaxBodyBytes)
	}
	switch {
	case cfg.MaxConcurrent == 0:
		cfg.MaxConcurrent = DefaultMaxConcurrent
	case cfg.MaxConcurrent < 0:
		return fmt.Errorf("mcpbridge: MaxConcurrent %d is negative", cfg.MaxConcurrent)
	}
	seen := make(map[string]bool, len(cfg.Tools))
	tools := make([]Tool, len(cfg.Tools))
	for i, t := range cfg.Tools {
		if !validName(t.Name, 128, true) {
			return fmt.Errorf("mcpbridge: tool %q: want a name of 1–128 characters of A–Z, a–z, 0–9, '_', '-' and '.'", t.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("mcpbridge: tool %q declared twice", t.Name)
		}
		seen[t.Name] = true
		schema, err := objectSchema(t.InputSchema)
		if err != nil {
			return fmt.Errorf("mcpbridge: tool %q: %w", t.Name, err)
		}
		t.InputSchema = schema
		tools[i] = t
	}
	cfg.Tools = tools // a copy: the caller's slice may change after Start
	return nil
}

// validName reports whether s is 1–maxLen characters of A–Z, a–z, 0–9, '_', '-' and, when
// dot is set, '.': the MCP tool-name alphabet, and without the dot what harnesses accept
// in the server part of a prefixed name.
func validName(s string, maxLen int, dot bool) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		case r == '.' && dot:
		default:
			return false
		}
	}
	return true
}

// objectSchema returns schema checked to be a JSON object of "type" "object", or the
// schema of any object when it is empty. Checked here because the SDK panics on others.
func objectSchema(schema json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return json.RawMessage(`{"type":"object"}`), nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(schema, &m); err != nil || m == nil {
		return nil, fmt.Errorf("input schema is not a JSON object: %w", errOr(err, "null"))
	}
	var typ string
	if err := json.Unmarshal(m["type"], &typ); err != nil || typ != "object" {
		return nil, fmt.Errorf(`input schema: "type" must be "object", got %s`, orNothing(m["type"]))
	}
	return append(json.RawMessage(nil), schema...), nil
}

func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}

func orNothing(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "nothing"
	}
	return string(raw)
}

// newToken returns a fresh random bearer token.
func newToken() (string, error) {
	buf := make([]byte, tokenBytes)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("mcpbridge: token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(buf), nil
}

// buildServer makes the MCP server holding exactly the configured tools.
func (b *Bridge) buildServer() (err error) {
	b.mcp = mcp.NewServer(&mcp.Implementation{Name: b.cfg.ServerName, Version: b.cfg.ServerVersion}, &mcp.ServerOptions{
		// Tools only, and a fixed list: no logging, no list_changed notifications.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	b.mcp.AddReceivingMiddleware(b.refuseUnknown)
	defer func() {
		// fill checked what the SDK checks; this is for what a newer SDK might add.
		if r := recover(); r != nil {
			err = fmt.Errorf("mcpbridge: adding tools: %v", r)
		}
	}()
	for _, t := range b.cfg.Tools {
		b.mcp.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, b.handler(t.Name))
	}
	return nil
}

// listen makes the listener from Config.Listen or Config.Addr.
func (b *Bridge) listen() (net.Listener, error) {
	if b.cfg.Listen != nil {
		ln, err := b.cfg.Listen()
		if err != nil {
			return nil, fmt.Errorf("mcpbridge: listen: %w", err)
		}
		return ln, nil
	}
	ln, err := net.Listen("tcp", b.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("mcpbridge: listen: %w", err)
	}
	return ln, nil
}

// addresses returns the endpoint URL for the listener's address and the Host header
// values accepted: that address, and the loopback forms of its port.
func addresses(addr net.Addr) (string, map[string]bool, error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", nil, fmt.Errorf("mcpbridge: listener address %q: %w", addr, err)
	}
	hosts := map[string]bool{}
	for _, h := range []string{"127.0.0.1", "localhost", "::1"} {
		hosts[net.JoinHostPort(h, port)] = true
	}
	// An unspecified address is no host to put in a URL; the loopback one is.
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	own := strings.ToLower(net.JoinHostPort(host, port))
	hosts[own] = true
	return "http://" + own + Path, hosts, nil
}

// URL returns the endpoint's URL, as a harness's MCP configuration wants it.
func (b *Bridge) URL() string { return b.url }

// Token returns the per-run bearer token a client must send as "Authorization: Bearer <token>".
func (b *Bridge) Token() string { return b.token }

// Close stops the bridge: it cancels the calls in flight, closes the listener and
// connections, ends the sessions, and waits for the Dispatch calls under way to return (a
// Dispatch that ignores its context holds Close up). Once it returns, Dispatch is not
// called again. Later calls return the first one's result.
func (b *Bridge) Close() error {
	b.stop()
	return b.shutdown()
}

// shutdown is Close but for unregistering the close on Start's context.
func (b *Bridge) shutdown() error {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		b.cancel()
		if err := b.srv.Close(); err != nil {
			b.closeErr = fmt.Errorf("mcpbridge: close: %w", err)
		}
		<-b.served
		// Closing a session waits for its handlers, as the wait below does for calls
		// between the HTTP and MCP layers: so a Dispatch must honour its context.
		for ss := range b.mcp.Sessions() {
			ss.Close()
		}
		b.inflight.Wait()
	})
	return b.closeErr
}

// refuseUnknown answers a call of an undeclared tool with an error naming it and the
// declared ones, so the model can correct itself; the SDK's own names only the tool.
func (b *Bridge) refuseUnknown(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/call" {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && p != nil && !b.declared[p.Name] {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: b.unknownMessage(p.Name)}
			}
		}
		return next(ctx, method, req)
	}
}

func (b *Bridge) unknownMessage(name string) string {
	if len(b.names) == 0 {
		return fmt.Sprintf("unknown tool %q: this server declares no tools", name)
	}
	names := b.names
	more := ""
	if len(names) > maxNamesInError {
		more = fmt.Sprintf(" and %d more", len(names)-maxNamesInError)
		names = names[:maxNamesInError]
	}
	return fmt.Sprintf("unknown tool %q: declared tools are %s%s", name, strings.Join(names, ", "), more)
}

// handler returns the MCP handler of the declared tool name.
func (b *Bridge) handler(name string) mcp.ToolHandler {
	return func(reqCtx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		start := time.Now()
		b.mu.Lock()
		if b.closed {
			b.mu.Unlock()
			return nil, errClosed
		}
		b.inflight.Add(1)
		b.mu.Unlock()
		defer b.inflight.Done()

		// The call ends with the bridge (Close) or with the request (the client's
		// cancellation), whichever comes first; values come from Start's context.
		ctx, cancel := context.WithCancel(b.ctx)
		defer cancel()
		defer context.AfterFunc(reqCtx, cancel)()

		res, isError, err := b.call(ctx, name, req.Params.Arguments)
		if b.cfg.OnCall != nil {
			b.cfg.OnCall(name, time.Since(start), isError || err != nil)
		}
		return res, err
	}
}

// call waits for a slot, checks the arguments and dispatches.
func (b *Bridge) call(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, bool, error) {
	if !b.acquire(ctx) {
		return nil, false, fmt.Errorf("mcpbridge: tool %q: waiting for a call slot: %w", name, ctx.Err())
	}
	defer func() { <-b.sem }()
	input, ok := objectArgs(args)
	if !ok {
		return textResult("arguments must be a JSON object", true), true, nil
	}
	out, isError, err := b.dispatch(ctx, name, input)
	if err != nil {
		return nil, false, fmt.Errorf("mcpbridge: tool %q: %w", name, err)
	}
	return textResult(out, isError), isError, nil
}

// dispatch calls Config.Dispatch, turning a panic into an error: the SDK runs handlers
// on goroutines of its own, with no recovery, so a panic there would end the gateway.
func (b *Bridge) dispatch(ctx context.Context, name string, input json.RawMessage) (out string, isError bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, isError, err = "", false, fmt.Errorf("dispatch panicked: %v", r)
		}
	}()
	return b.cfg.Dispatch(ctx, name, input)
}

// acquire takes a call slot, waiting for one until ctx is done.
func (b *Bridge) acquire(ctx context.Context) bool {
	select {
	case b.sem <- struct{}{}:
		return true
	default:
	}
	if b.cfg.slotWait != nil {
		b.cfg.slotWait()
	}
	select {
	case b.sem <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// objectArgs returns the call's arguments if they are a JSON object; absent or null
// arguments are the empty object, as clients omit them for tools without parameters.
func objectArgs(args json.RawMessage) (json.RawMessage, bool) {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return json.RawMessage(`{}`), true
	}
	// The SDK has parsed the request, so the arguments are valid JSON: an object is
	// what starts with a brace.
	return args, trimmed[0] == '{'
}

func textResult(text string, isError bool) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
}
