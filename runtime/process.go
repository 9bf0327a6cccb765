package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/propagation"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/ids"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/mcpbridge"
	"github.com/capsulegate/capsulegate/runtime/credgate"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Codes of a process driver's refusals at stage that its describe() answer draws
// (docs/errors.md); the module checks' are in runtime/wasm.
const (
	CodeProcessDescribe   = "E-PRC-006" // describe() failed, or answered no harness or an unusable binary
	CodeProcessEnvName    = "E-PRC-007" // a required-env name is not a usable variable name
	CodeProcessEnvMissing = "E-PRC-008" // required-env names capabilities.env.allow does not grant
	CodeProcessPath       = "E-PRC-009" // a harness-needs path capabilities.harness.paths does not grant
	CodeProcessHost       = "E-PRC-010" // a harness-needs host capabilities.network.allow does not grant
	CodeProcessLoginCheck = "E-PRC-011" // a login-check with no arguments
)

// checkProcessDriver calls describe() of a process capsule's driver, as staging does
// once per staging, and checks its answer against the manifest: everything the harness
// needs must be granted before anything runs (docs/reference/process-drivers.md).
func (r *Runtime) checkProcessDriver(ctx context.Context, m *manifest.Manifest, mod *wasm.Module) (abi.Description, error) {
	d, err := murmur.Describe(ctx, r.engine, mod, driverGrants(m))
	if err != nil {
		return d, errs.New(CodeProcessDescribe, "runtime", fmt.Sprintf("process driver %s: describe() failed: %v", mod.Artifact, err),
			"fix the driver: describe() must answer at once, granted nothing")
	}
	if problems := checkDescription(m, mod.Artifact, d); len(problems) > 0 {
		return d, problems
	}
	return d, nil
}

// checkDescription lists what in d the manifest does not allow, each with its code.
func checkDescription(m *manifest.Manifest, driver string, d abi.Description) errs.List {
	var problems errs.List
	bad := func(code, msg, fix string) {
		problems = append(problems, errs.New(code, "runtime", "process driver "+driver+": "+msg, fix))
	}
	if strings.TrimSpace(d.Harness) == "" {
		bad(CodeProcessDescribe, "describe() names no harness", "answer the harness's name in description.harness")
	}
	if d.Binary == "" || strings.ContainsAny(d.Binary, "\x00\n\r") || d.Binary != strings.TrimSpace(d.Binary) {
		bad(CodeProcessDescribe, fmt.Sprintf("describe() names binary %q, which cannot be run", d.Binary),
			"answer the harness's executable name (or absolute path) in description.binary")
	}
	var missing []string
	for _, n := range d.RequiredEnv {
		if n == "" || strings.ContainsAny(n, "=\x00") {
			bad(CodeProcessEnvName, fmt.Sprintf("required-env holds %q, which is not a usable variable name (empty, or holding '=' or NUL)", n),
				"list variable names only in description.required-env")
			continue
		}
		if !slices.Contains(m.Capabilities.Env.Allow, n) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		bad(CodeProcessEnvMissing, fmt.Sprintf("the harness cannot run without %s, which capabilities.env.allow does not grant", strings.Join(missing, ", ")),
			"add "+strings.Join(missing, ", ")+" to capabilities.env.allow")
	}
	if d.HasLogin && len(d.LoginCheck) == 0 {
		bad(CodeProcessLoginCheck, "describe() has a login-check with no arguments", "give login-check the arguments that print the login state, or answer none")
	}
	for _, need := range d.NeedsPaths {
		granted := slices.ContainsFunc(m.Capabilities.Harness.Paths, func(h manifest.HarnessPath) bool { return h.Grants(need.Path, need.Access) })
		if !granted {
			bad(CodeProcessPath, fmt.Sprintf("the harness needs %s access to %s, which capabilities.harness.paths does not grant", need.Access, need.Path),
				fmt.Sprintf("add {path: %s, access: %s} to capabilities.harness.paths", need.Path, need.Access))
		}
	}
	for _, host := range d.NeedsHosts {
		if _, ok := m.Capabilities.NetworkRules.MatchHost(host); !ok {
			bad(CodeProcessHost, fmt.Sprintf("the harness reaches %s, which capabilities.network.allow does not grant", host),
				"add "+host+" to capabilities.network.allow")
		}
	}
	return problems
}

// driverGrants are a process driver's limits, the hook-call ones: it is granted
// nothing else (docs/reference/process-drivers.md "Granted nothing").
func driverGrants(m *manifest.Manifest) wasm.Grants {
	return wasm.Grants{MemoryBytes: m.Capabilities.Limits.MemoryBytes, Deadline: m.Deadline(manifest.RoleHook),
		Snapshot: snapshotPolicy(m.Artifact(m.Inference.Driver.Artifact))}
}

// Run-time refusals of a process capsule's task (docs/reference/process-drivers.md "The run").
const (
	CodeProcessLaunch = "E-PRC-013" // launch refused the turn, or its plan is unusable
	CodeProcessSpawn  = "E-PRC-014" // the harness binary is missing, or the sandbox could not start it
)

// harnessBy marks a thread's continuation as a harness session id of driver key.
func harnessBy(driverKey string) string { return "harness:" + driverKey }

// processTask runs one task of a process capsule: its driver plans the turn, the harness
// runs in the session's sandbox with the credential gateway as its provider, its stdout
// is parsed into the session's events, and its answer is the task's result.
func (s *session) processTask(ctx context.Context, t *task, text string, history []Turn) (result, state string, err error) {
	m := s.staged.Manifest
	inf := m.Inference
	mod := s.staged.Modules[inf.Driver.Artifact]
	desc := s.staged.Process
	if mod == nil || desc == nil || s.shell == nil {
		return "", StateFailed, fmt.Errorf("process driver %s is not staged to run", inf.Driver.Artifact)
	}
	g := driverGrants(m)
	g.Meter = &s.meter
	d := murmur.OpenDriver(s.rt.engine, mod, g)
	defer d.Close()
	system, err := s.systemPrompt()
	if err != nil {
		return "", StateFailed, err
	}
	by := harnessBy(s.driverKey())
	req := abi.LaunchRequest{SystemPrompt: system, Task: text, SessionID: ids.New("hs_")}
	if n := len(history); n > 0 && history[n-1].Continuation != "" && history[n-1].ContinuationBy == by {
		req.SessionID, req.Resume = history[n-1].Continuation, true
	}
	if inf.Model != "" {
		req.Model = &inf.Model
	}
	if inf.Driver.Config != nil {
		cfg := string(mustJSON(inf.Driver.Config))
		req.Config = &cfg
	}
	var reach []string
	var gw *credgate.Server
	if a := m.Artifact(inf.Driver.Artifact); a != nil && a.Gateway != nil && a.Gateway.Endpoint != "" {
		if gw, err = credgate.Start(credgate.Config{Endpoint: a.Gateway.Endpoint, Out: s.driverHTTP, Who: inf.Driver.Artifact}); err != nil {
			return "", StateFailed, err
		}
		defer gw.Close()
		reach = append(reach, strings.TrimPrefix(gw.URL(), "http://"))
	}
	// The harness's tools are fixed for its turn: what the capsule pulled is read once, now.
	s.turnPulled = s.staged.artifacts.pulled(ctx)
	if tools := s.offeredTools(); len(tools) > 0 {
		b, err := s.toolBridge(ctx, t, tools)
		if err != nil {
			return "", StateFailed, err
		}
		defer b.Close()
		names := make([]string, len(tools))
		for i, tl := range tools {
			names[i] = tl.Name
		}
		req.Bridge = &abi.Bridge{ServerName: BridgeServerName, URL: b.URL(), BearerToken: b.Token(), ToolNames: names}
		reach = append(reach, strings.TrimPrefix(strings.TrimSuffix(b.URL(), mcpbridge.Path), "http://"))
	}
	plan, refused, err := d.Launch(ctx, req)
	switch {
	case err != nil:
		return "", StateFailed, err
	case refused != "":
		return "", StateFailed, errs.New(CodeProcessLaunch, "runtime", fmt.Sprintf("process driver %s refused the turn: %s", inf.Driver.Artifact, refused), "see the driver's message")
	}
	spec, err := s.harnessSpec(desc, plan, gw)
	if err != nil {
		return "", StateFailed, err
	}
	// The harness learns the task's trace context, as OpenTelemetry's environment
	// carrier names it, so its own spans and requests can join the trace.
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(s.traced(ctx, t), carrier) // nothing without a span
	for k, v := range map[string]string{"TRACEPARENT": carrier["traceparent"], "TRACESTATE": carrier["tracestate"]} {
		if v != "" {
			spec.Env = append(spec.Env, k+"="+v)
		}
	}
	spec.Reach = reach
	run := &harnessRun{s: s, t: t, d: d, desc: desc, plan: plan, sessionID: req.SessionID, bridged: map[string]bool{}}
	if req.Bridge != nil {
		for _, n := range req.Bridge.ToolNames {
			run.bridged[n] = true
		}
	}
	return run.run(ctx, spec, by)
}

// toolBridge serves tools to the harness of task t over MCP for one run: each call goes
// through the same dispatch as a model's tool call under the http transport (hooks,
// trace, limits, the sandbox).
func (s *session) toolBridge(ctx context.Context, t *task, tools []agentTool) (*mcpbridge.Bridge, error) {
	list := make([]mcpbridge.Tool, len(tools))
	for i, tl := range tools {
		list[i] = mcpbridge.Tool{Name: tl.Name, Description: tl.Description, InputSchema: tl.Parameters}
	}
	dispatch := func(ctx context.Context, name string, input json.RawMessage) (string, bool, error) {
		out, isErr := s.dispatchGated(ctx, t, agentBlock{Type: "tool_call", ID: ids.New("call_"), Name: name, Input: input})
		return out, isErr, nil
	}
	b, err := mcpbridge.Start(context.WithoutCancel(ctx), mcpbridge.Config{ServerName: BridgeServerName, Tools: list, Dispatch: dispatch})
	if err != nil {
		return nil, fmt.Errorf("the tool bridge: %w", err)
	}
	return b, nil
}
