package runtime

import (
	"slices"
	"strconv"

	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/netpolicy"
	"github.com/capsulegate/capsulegate/runtime/shell"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// The effective grants of a staged capsule (Explain): what session_start records as
// `grants` and `caddy capsule explain` prints — every artifact's reach, the shell
// sandbox's on this host and what it cannot protect here, limits, hooks and their
// verdict powers, peers — from the manifest and the staged artifacts alone, names and
// rules, never values.

// Grant is a capsule's effective grants (docs/reference/trace.md "session_start").
type Grant struct {
	// Network is the parsed rules of capabilities.network.allow, in canonical form.
	Network []string `json:"network"`
	// Env is the names of capabilities.env.allow, never values.
	Env             []string `json:"env"`
	FilesystemScope string   `json:"filesystem_scope"`
	// MemoryBytes and DeadlineSeconds are a tool call's limits.
	MemoryBytes     int64   `json:"memory_bytes"`
	DeadlineSeconds float64 `json:"deadline_seconds"`

	// Filesystem is what a guest sees: its "/" and the paths the host keeps there.
	Filesystem []GuestPath `json:"filesystem,omitempty"`
	// Reach says what each network rule lets a connection go to; Refused the address
	// classes a rule by name never reaches, whatever the name resolves to.
	Reach   []Reach  `json:"reach,omitempty"`
	Refused []string `json:"refused,omitempty"`
	// Artifacts are each artifact's own grants.
	Artifacts []ArtifactGrant `json:"artifacts,omitempty"`
	// Shell is the shell and native tools' sandbox; nil when the capsule has none.
	Shell *ShellGrant `json:"shell,omitempty"`
	// Limits are the capsule's limits beyond a tool call's.
	Limits *LimitGrant `json:"limits,omitempty"`
	// Hooks are the hooks and what their answers can do.
	Hooks []HookGrant `json:"hooks,omitempty"`
	// Peers are the capsules this one may message, and whether its rules grant each.
	Peers []PeerGrant `json:"peers,omitempty"`
	// Narrowing says how a route's policy may narrow the network reach of a task.
	Narrowing string `json:"narrowing,omitempty"`
}

// GuestPath is one path of the guest's file system.
type GuestPath struct {
	Path   string `json:"path"`
	What   string `json:"what"`
	Access string `json:"access"` // "read-write" or "read"
}

// Reach is what one network rule lets a connection go to.
type Reach struct {
	Rule   string `json:"rule"`
	Scheme string `json:"scheme"` // "http", "https" or "http or https"
	Host   string `json:"host"`   // a name, "*.suffix" or an address
	Port   string `json:"port"`   // a number, or "any"
	// Addresses says which addresses the rule reaches: any public address for a name,
	// loopback only for localhost, the named address alone for an address.
	Addresses string `json:"addresses"`
}

// ArtifactGrant is one artifact's grants.
type ArtifactGrant struct {
	Name string `json:"name"`
	Role string `json:"role"`
	// Runs says where: "wasm", "component", "native", "skill" (text for the model, no
	// code), "process driver".
	Runs            string   `json:"runs"`
	Env             []string `json:"env"`
	Network         []string `json:"network"`
	Filesystem      string   `json:"filesystem"`
	MemoryBytes     int64    `json:"memory_bytes,omitempty"`
	DeadlineSeconds float64  `json:"deadline_seconds,omitempty"`
}

// ShellGrant is the shell and native tools' sandbox on this host.
type ShellGrant struct {
	Binaries []string `json:"binaries"`
	MinTier  string   `json:"min_tier,omitempty"`
	// Tier is the strongest tier this host gives ("" when not detected), Reasons why a
	// stronger one is not, Unprotected what that tier does not protect here.
	Tier        string   `json:"tier,omitempty"`
	Reasons     []string `json:"reasons,omitempty"`
	Unprotected []string `json:"unprotected,omitempty"`
	Cgroups     string   `json:"cgroups,omitempty"`
}

// OnHost fills in what the host's tier r gives the sandbox and cannot protect; a zero r
// (not detected) leaves them empty.
func (sh *ShellGrant) OnHost(r shell.TierReport) {
	if r.Tier == "" {
		return
	}
	sh.Tier, sh.Reasons, sh.Cgroups, sh.Unprotected = r.Tier, r.Reasons, r.Cgroups, unprotected[r.Tier]
}

// LimitGrant is the capsule's limits beyond a tool call's.
type LimitGrant struct {
	MaxTurns  int `json:"max_turns,omitempty"`
	PeerDepth int `json:"peer_depth"`
	PeerCalls int `json:"peer_calls"`
}

// HookGrant is a hook, the event it answers and what its answer can do.
type HookGrant struct {
	Name    string `json:"name"`
	Binding string `json:"binding"` // the event, or "every event"
	Mode    string `json:"mode"`
	// Powers are what the host honours of its answer: "deny" (a tool call or shell
	// command), "reopen-task", "replace-context", or none.
	Powers []string `json:"powers"`
	Reads  []string `json:"reads"` // "task", "conversation"
	Env    []string `json:"env"`
}

// PeerGrant is a peer the capsule may message.
type PeerGrant struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	Granted bool   `json:"granted"` // capabilities.network.allow reaches it
}

// Host is what Explain knows of the machine beyond the capsule: the shell sandbox's
// tier there (zero: not detected).
type Host struct {
	Tier shell.TierReport
}

// unprotected is what each tier short of sealed cannot protect (docs/sandbox.md).
var unprotected = map[string][]string{
	shell.TierScoped: {"the network: commands reach it around the policy proxy (no network namespace)",
		"the gateway's processes: signals and /proc of processes of the same user (no pid namespace)"},
	shell.TierEnvOnly: {"files outside the workdir (no Landlock, no mount namespace)",
		"the network: commands reach it around the policy proxy (no network namespace)",
		"the gateway's processes: signals and /proc of processes of the same user (no pid namespace)",
		"kernel interfaces seccomp would refuse"},
}

// Explain returns s's effective grants on host.
func Explain(s *Staged, host Host) Grant {
	m := s.Manifest
	g := Grant{Network: []string{}, Env: append([]string{}, m.Capabilities.Env.Allow...), FilesystemScope: m.Capabilities.Filesystem.Scope,
		MemoryBytes: m.Capabilities.Limits.MemoryBytes, DeadlineSeconds: m.Deadline(manifest.RoleTool).Seconds()}
	for _, r := range m.Capabilities.NetworkRules {
		g.Network = append(g.Network, r.String())
		g.Reach = append(g.Reach, reachOf(r))
	}
	g.Refused = []string{netpolicy.ReasonLoopback, netpolicy.ReasonPrivate, netpolicy.ReasonLinkLocal, netpolicy.ReasonMetadata,
		netpolicy.ReasonCGNAT, netpolicy.ReasonUnspecified, netpolicy.ReasonMulticast, netpolicy.ReasonBroadcast, netpolicy.ReasonReserved}
	g.Filesystem = []GuestPath{
		{Path: "/", What: "the context's workdir (<work_root>/<capsule>/<session>/work): the only folder a guest or tool sees", Access: "read-write"},
		{Path: "/task.md", What: "the task's text", Access: "read-write"},
		{Path: "/in/", What: "the task message's files and data parts", Access: "read-write"},
		{Path: "/out/", What: "what the capsule leaves for its client: files become artifacts", Access: "read-write"},
		{Path: "/MURMUR.md", What: "the capsule's notes kept across the context's tasks", Access: "read-write"},
	}
	if len(m.Peers) > 0 {
		g.Filesystem = append(g.Filesystem, GuestPath{Path: "/peers/", What: "peers' answers and files, by task", Access: "read-write"})
	}
	g.Limits = &LimitGrant{PeerDepth: m.Capabilities.Limits.PeerDepth, PeerCalls: m.Capabilities.Limits.PeerCalls}
	if m.Inference != nil {
		g.Limits.MaxTurns = m.Inference.MaxTurns
	}
	for _, a := range m.Artifacts {
		g.Artifacts = append(g.Artifacts, artifactGrant(s, a, g.Network))
	}
	if len(m.Capabilities.Shell.Allow) > 0 || hasNative(s) || m.IsProcess() {
		g.Shell = &ShellGrant{Binaries: append([]string{}, m.Capabilities.Shell.Allow...), MinTier: m.Capabilities.Shell.MinTier}
		g.Shell.OnHost(host.Tier)
	}
	for _, r := range s.Artifacts {
		if r.Role != manifest.RoleHook || r.Archive == nil {
			continue
		}
		if ref := m.Artifact(r.Name); ref != nil {
			g.Hooks = append(g.Hooks, hookGrant(*ref, *r.Archive.Manifest()))
		}
	}
	for _, p := range m.Peers {
		g.Peers = append(g.Peers, PeerGrant{Name: p.Name, URL: p.URL, Granted: checkPeerURL(m.Capabilities.NetworkRules, nil, p.URL) == nil})
	}
	g.Narrowing = "a route's policy (egress) may narrow a task's reach to fewer of these rules by who asked, never to more"
	return g
}

// reachOf says what r lets a connection go to.
func reachOf(r netpolicy.Rule) Reach {
	x := Reach{Rule: r.String(), Scheme: r.Scheme, Host: r.Host, Port: "any"}
	if x.Scheme == "" {
		x.Scheme = "http or https"
	}
	if r.Wildcard {
		x.Host = "*." + r.Host
	}
	if r.Port != 0 {
		x.Port = strconv.Itoa(r.Port)
	}
	switch {
	case r.IP.IsValid():
		x.Addresses = "this address only"
	case r.Host == "localhost":
		x.Addresses = "loopback only"
	default:
		x.Addresses = "any public address the name resolves to (the restricted classes never)"
	}
	return x
}

// artifactGrant is a's grants as the session gives them; network is the capsule's rules
// in canonical form (Grant.Network).
func artifactGrant(s *Staged, a manifest.ArtifactRef, network []string) ArtifactGrant {
	m := s.Manifest
	g := ArtifactGrant{Name: a.Name, Role: string(a.Runtime), Env: []string{}, Network: []string{}, Filesystem: "/ (the workdir)"}
	role := a.Runtime
	if role == "" {
		role = manifest.RoleTool
	}
	switch {
	case role == manifest.RoleSkill:
		g.Runs, g.Filesystem = "skill", "none: text for the model, no code"
		return g
	case s.Modules[a.Name] != nil || s.Hooks[a.Name] != nil:
		g.Runs = "wasm"
		if mod := compiled(s, a.Name); mod != nil && mod.Plan() != nil {
			g.Runs = "component"
		}
	case role == manifest.RoleDriver && m.Inference != nil && m.Inference.Transport == "process":
		g.Runs = "process driver"
	default:
		g.Runs = "native"
	}
	g.MemoryBytes, g.DeadlineSeconds = m.Capabilities.Limits.MemoryBytes, m.Deadline(role).Seconds()
	g.Env = append(g.Env, m.Capabilities.Env.Allow...)
	g.Network = append(g.Network, network...)
	if role == manifest.RoleDriver && a.Gateway != nil && a.Gateway.Endpoint != "" {
		g.Network = append(g.Network, a.Gateway.Endpoint+" (its provider, the key added by the host)")
	}
	if role == manifest.RoleHook {
		g.Env, g.Network = []string{}, []string{} // a hook's own grants: hookGrant
		if c := a.Capabilities; c != nil {
			g.Env = append(g.Env, c.Env.Allow...)
			if c.Limits.MemoryBytes > 0 {
				g.MemoryBytes = c.Limits.MemoryBytes
			}
			if c.Limits.DeadlineSeconds > 0 {
				g.DeadlineSeconds = float64(c.Limits.DeadlineSeconds)
			}
		}
	}
	return g
}

// compiled is the artifact's compiled module, tool, driver or hook.
func compiled(s *Staged, name string) *wasm.Module {
	if m := s.Modules[name]; m != nil {
		return m
	}
	return s.Hooks[name]
}

// hasNative reports whether the capsule has native tools, which run in the sandbox.
func hasNative(s *Staged) bool {
	for _, r := range s.Artifacts {
		if r.Archive != nil && r.Archive.Manifest().Implementation == "native" {
			return true
		}
	}
	return false
}

// hookGrant is what a hook answers and may do.
func hookGrant(ref manifest.ArtifactRef, am manifest.ArtifactManifest) HookGrant {
	h := HookGrant{Name: ref.Name, Binding: am.Binding, Mode: am.ExecutionMode, Powers: []string{}, Reads: []string{}, Env: []string{}}
	if h.Binding == "" {
		h.Binding = "every event"
	}
	switch am.CommitPolicy {
	case manifest.CommitDeny:
		h.Powers = append(h.Powers, "deny")
	case manifest.CommitReopenTask:
		h.Powers = append(h.Powers, "reopen-task")
	case manifest.CommitReplaceContext:
		h.Powers = append(h.Powers, "replace-context")
	}
	if c := ref.Capabilities; c != nil {
		if c.TaskIO.Read {
			h.Reads = append(h.Reads, "task")
		}
		if c.Conversation.Read {
			h.Reads = append(h.Reads, "conversation")
		}
		h.Env = append(h.Env, c.Env.Allow...)
	}
	slices.Sort(h.Env)
	return h
}
