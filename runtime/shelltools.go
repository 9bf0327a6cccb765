package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/shell"
)

// EventShell records one shell or native command (docs/reference/trace.md "shell").
const EventShell = "shell"

// ShellRun is the data of a shell event.
type ShellRun struct {
	Binary     string `json:"binary"`
	Command    string `json:"command"`
	ExitCode   int    `json:"exit_code"`
	Bytes      int64  `json:"bytes"`
	DurationMS int64  `json:"duration_ms"`
	// ran is the whole result of a shell (not native) command, for on-shell hooks; the
	// trace keeps only the fields above.
	ran *shellRan
}

// shellRan is what an on-shell hook is told of a shell command that ran.
type shellRan struct {
	turn int
	res  shell.Result
}

// shellTools is what a session's shell and native tools share: the OS sandbox and,
// when the capsule may reach the network, the session's policy proxy and pinning
// resolver, which are the commands' only way out.
type shellTools struct {
	sb      *shell.Sandbox
	proxy   *netpolicy.Proxy
	stopDNS func() error
	natives map[string]string // native tool name → its installed binary
}

// openShellTools installs the native tools under tools/ and starts the sandbox, only
// when the capsule has shell or native tools. The tier in force and the wrapper binary
// are reported on stderr and in bootstrap.log, with any W-SEC warning (W-SEC-004: the
// gateway's own binary is the wrapper, slower); a tier below shell.min_tier refuses the
// session.
func (s *session) openShellTools(o SessionConfig) (err error) {
	m := s.staged.Manifest
	natives := map[string]string{}
	for _, a := range s.staged.Artifacts {
		if a.Archive == nil || a.Archive.Payload().Kind != registry.PayloadNative {
			continue
		}
		data, err := a.Archive.ReadFile(a.Archive.Payload().Path)
		if err != nil {
			return fmt.Errorf("installing native tool %s: %w", a.Name, err)
		}
		dir := filepath.Join(s.layout.Tools, a.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		path := filepath.Join(dir, a.Name)
		if err := os.WriteFile(path, data, 0o755); err != nil {
			return fmt.Errorf("installing native tool %s: %w", a.Name, err)
		}
		natives[a.Name] = path
	}
	if len(m.Capabilities.Shell.Allow) == 0 && len(natives) == 0 && !m.IsProcess() {
		return nil
	}
	sp := &shellTools{natives: natives}
	defer func() {
		if err != nil {
			sp.close()
		}
	}()
	r := m.Capabilities.Resources
	cfg := shell.Config{Workdir: s.layout.Work, Records: s.layout.Root, Env: s.shellEnv(o), Allow: m.Capabilities.Shell.Allow,
		MinTier: m.Capabilities.Shell.MinTier, WrapperPath: o.SandboxHelper,
		Limits: shell.Limits{Processes: r.Processes, OpenFiles: r.OpenFiles, FileSize: r.FileSizeBytes, CPUSeconds: r.CPUSeconds, AddressSpace: r.AddressSpaceBytes},
		Cgroup: shell.CgroupLimits{MemoryBytes: r.CgroupMemoryBytes, Pids: r.CgroupPidsMax, CPUPercent: r.CgroupCPUPercent}}
	if len(m.Capabilities.NetworkRules) > 0 {
		onDeny := func(d netpolicy.Denial) { s.denied("subprocess", d.Source, d.Host, d.Port, d.Err) }
		res, err := netpolicy.NewResolver(netpolicy.ResolverConfig{Rules: m.Capabilities.NetworkRules, Upstream: o.DNSUpstream, OnDeny: onDeny})
		if err != nil {
			return err
		}
		dl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		if sp.stopDNS, err = res.Serve(nil, dl); err != nil {
			dl.Close()
			return err
		}
		if sp.proxy, err = netpolicy.NewProxy(netpolicy.ProxyConfig{Rules: m.Capabilities.NetworkRules, Resolver: res, OnDeny: onDeny, Logger: o.NetLogger, Traffic: &s.traffic}); err != nil {
			return err
		}
		pl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go sp.proxy.Serve(pl)
		cfg.ProxyAddr, cfg.DNSAddr = pl.Addr().String(), dl.Addr().String()
	}
	// The sandbox is built around the workdir: a new context's is made now, not at the
	// first command (its out/ and MURMUR.md still wait for that: beforeSubprocess).
	if _, err := s.work.Root(); err != nil {
		return err
	}
	if sp.sb, err = shell.New(cfg); err != nil {
		return err
	}
	rep := sp.sb.Report()
	line := fmt.Sprintf("%s: shell and native tools run in sandbox tier %s %v, wrapper %s", m.Name, rep.Tier, rep.Reasons, sp.sb.Wrapper())
	if rep.Cgroups != "" {
		line += ", cgroups " + rep.Cgroups
	}
	s.announce(o.Stderr, line)
	for _, w := range sp.sb.Warnings() {
		s.announce(o.Stderr, w.Error())
	}
	s.shell = sp
	return nil
}

// announce writes a line to the operator's stderr and the session's bootstrap.log.
func (s *session) announce(stderr io.Writer, line string) {
	if stderr != nil {
		fmt.Fprintln(stderr, line)
	}
	fmt.Fprintf(s.log("bootstrap.log"), "%s %s\n", time.Now().UTC().Format(time.RFC3339), line)
}

// shellEnv is the guests' environment (docs/reference/guest-abi.md "Environment")
// plus the host's locale and terminal type, which tools read to format output.
func (s *session) shellEnv(o SessionConfig) []string {
	env := append([]string(nil), s.env...)
	for _, k := range []string{"LANG", "LC_ALL", "TERM"} {
		if v, ok := o.LookupEnv(k); ok { // set by openSession
			env = append(env, k+"="+v)
		}
	}
	return env
}

func (sp *shellTools) close() {
	if sp.sb != nil {
		sp.sb.Close()
	}
	if sp.proxy != nil {
		sp.proxy.Close()
	}
	if sp.stopDNS != nil {
		sp.stopDNS()
	}
}

// runShellTool runs a native or shell tool call under the tool deadline and records
// it: a shell event with the command, then the tool call.
func (s *session) runShellTool(ctx context.Context, t *task, call agentBlock, native string) (string, bool) {
	m := s.staged.Manifest
	kind := KindShell
	if native != "" {
		kind = KindNative
	}
	if s.shell == nil {
		return fmt.Sprintf("tool %s: this session has no sandbox for %s tools", call.Name, kind), true
	}
	ctx, cancel := context.WithTimeout(ctx, m.Deadline("tool"))
	defer cancel()
	start := time.Now()
	var (
		r   shell.Result
		err error
	)
	if s.shell.proxy != nil {
		// The task's narrowing, when its caller's policy narrowed it, for this command.
		s.shell.proxy.SetNarrowing(t.narrow)
	}
	switch err = s.beforeSubprocess(); {
	case err != nil:
	case native != "":
		r, err = s.shell.sb.RunNative(ctx, call.Name, native, json.RawMessage(call.Input))
	default:
		r, err = s.shell.sb.RunShell(ctx, call.Name, call.Input)
	}
	s.toolCalls.Add(1)
	rec := ToolCall{Turn: t.turnNo(), ToolName: call.Name, Kind: kind, CallID: call.ID, InputBytes: len(call.Input), OutputBytes: len(r.Text),
		Status: r.Status, DurationMS: time.Since(start).Milliseconds()}
	if err != nil {
		rec.Status = "error"
	}
	run := ShellRun{Binary: r.Binary, Command: r.Command, ExitCode: r.ExitCode, Bytes: r.Bytes, DurationMS: r.Duration.Milliseconds()}
	if native == "" {
		s.shellCalls.Add(1)
		run.ran = &shellRan{turn: t.turnNo(), res: r}
	}
	s.stream.Emit(EventShell, t.parent(), run, nil)
	s.stream.Emit(EventToolCall, t.parent(), rec, map[string]string{"input": string(call.Input), "output": r.Text})
	if err != nil {
		return fmt.Sprintf("tool %s: %v", call.Name, err), true
	}
	return r.Text, r.Status != "passed"
}
