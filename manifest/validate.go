package manifest

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/artname"
	"github.com/capsulegate/capsulegate/internal/mediatype"
	"github.com/capsulegate/capsulegate/netpolicy"
)

// reservedVersions may not name a capsule or artifact version: they mean "whatever is
// newest" in registries, so pinning to them would pin nothing.
var reservedVersions = map[string]bool{"latest": true, "stable": true, "edge": true}

// ValidName reports whether s is a valid capsule or artifact name: [a-z0-9-], 1–100
// characters, no leading or trailing '-'.
func ValidName(s string) bool { return artname.Valid(s) }

// CheckVersion returns why s cannot be a pinned version, or "" if it can: non-empty, not
// reserved, at most 128 printable characters that are safe as one path segment.
func CheckVersion(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case reservedVersions[s]:
		return fmt.Sprintf("%q is reserved (latest, stable and edge name moving targets)", s)
	case len(s) > 128:
		return "it is longer than 128 characters"
	case s == "." || s == ".." || strings.HasPrefix(s, "."):
		return "it starts with '.'"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-+_~", r)) {
			return fmt.Sprintf("it contains %q (allowed: letters, digits and . - + _ ~)", r)
		}
	}
	return ""
}

var enums = map[string][]string{
	"artifacts[].runtime":                 {"tool", "driver", "hook", "skill"},
	"artifacts[].init_snapshot":           {InitSnapshotAuto, InitSnapshotAlways, InitSnapshotNever},
	"inference.transport":                 {"http", "process"},
	"capabilities.harness.paths[].access": {"read", "read-write"},
	"lifecycle.task_acceptance":           {"none", "single", "queue"},
	"lifecycle.after_task":                {"exit", "sleep"},
	"lifecycle.conversation":              {"stateless", "threaded"},
	"trace.capture":                       {"none", "meta", "content"},
	"a2a.outputs[].as":                    {OutputFile, OutputData, OutputText},
	"artifact.runtime":                    {"tool", "driver", "hook", "skill"},
	"artifact.implementation":             {"wasm", "native"},
}

// validator applies the rules of docs/reference/manifest.md after decoding, reporting
// each at the position of the value that breaks it.
type validator struct {
	d    *decoder
	root *yaml.Node
	m    *Manifest
}

func (v *validator) has(p string) bool { _, ok := v.d.pos[p]; return ok }

// failedAt reports whether an error was found at p or below it.
func (v *validator) failedAt(p string) bool {
	for _, e := range v.d.errs {
		if e.Path == p || strings.HasPrefix(e.Path, p+"[") || strings.HasPrefix(e.Path, p+".") {
			return true
		}
	}
	return false
}

// where returns the position of the value at p, or of its nearest present parent.
func (v *validator) where(p string) string {
	for q := p; ; {
		if pos, ok := v.d.pos[q]; ok {
			return fmt.Sprintf("%s:%d:%d", v.d.file, pos.Line, pos.Col)
		}
		i := strings.LastIndexAny(q, ".[")
		if i <= 0 {
			return fmt.Sprintf("%s:%d:%d", v.d.file, v.root.Line, v.root.Column)
		}
		q = q[:i]
	}
}

func (v *validator) fail(p, code, msg, fix string) {
	v.d.errs = append(v.d.errs, &errs.Error{Code: code, Part: "manifest", Pos: v.where(p), Path: p, Msg: msg, Fix: fix})
}

func (v *validator) enum(p, enumKey, val string) {
	if val == "" && !v.has(p) {
		return
	}
	for _, ok := range enums[enumKey] {
		if val == ok {
			return
		}
	}
	v.fail(p, CodeEnum, fmt.Sprintf("%q is not one of %s", val, strings.Join(enums[enumKey], ", ")),
		"use one of: "+strings.Join(enums[enumKey], ", "))
}

func (v *validator) positive(p string, val int64, code string) {
	if v.has(p) && val <= 0 {
		v.fail(p, code, fmt.Sprintf("%d is not greater than zero", val),
			"write a positive number (zero or negative never means unlimited); remove the key for the default")
	}
}

func (v *validator) validate() {
	m := v.m
	if !ValidName(m.Name) && m.Name != "" {
		v.fail("name", CodeName, fmt.Sprintf("capsule name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", m.Name),
			"use lowercase letters, digits and '-', e.g. "+suggestName(m.Name))
	}
	if m.Version != "" && reservedVersions[m.Version] {
		v.fail("version", CodeReservedVersion, fmt.Sprintf("version %q is reserved", m.Version), "give a concrete version such as 1.0.0")
	}
	v.artifacts()
	v.capabilities()
	v.inference()
	v.lifecycle()
	v.a2a()
	if m.Context != nil {
		v.positive("context.max_tokens", int64(m.Context.MaxTokens), CodeRange)
	}
	v.enum("trace.capture", "trace.capture", m.Trace.Capture)
	v.peers()
	if e := m.Observability.OtelEndpoint; e != "" {
		v.url("observability.otel_endpoint", e)
	}
}

func (v *validator) url(p, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.fail(p, CodeURL, fmt.Sprintf("%q is not an http(s) URL", raw), "write a base URL such as https://api.example.com")
	}
}

// name refuses a non-empty name (of what, at p) that breaks the naming rule, with code.
func (v *validator) name(p, code, what, name string) {
	if name != "" && !ValidName(name) {
		v.fail(p, code, fmt.Sprintf("%s name %q breaks the naming rule: [a-z0-9-], 1–100 characters, no leading or trailing '-'", what, name),
			"use lowercase letters, digits and '-', e.g. "+suggestName(name))
	}
}

func (v *validator) artifacts() {
	seen := map[string]int{}
	for i, a := range v.m.Artifacts {
		p := fmt.Sprintf("artifacts[%d]", i)
		v.name(p+".name", CodeName, "artifact", a.Name)
		if j, dup := seen[a.Name]; dup && a.Name != "" {
			v.fail(p+".name", CodeDuplicateArt, fmt.Sprintf("artifact %q is declared twice (also artifacts[%d])", a.Name, j), "keep one entry per artifact name")
		}
		seen[a.Name] = i
		v.enum(p+".runtime", "artifacts[].runtime", string(a.Runtime))
		role := a.Runtime
		if role == "" {
			role = RoleTool
		}
		switch {
		case a.Source != "":
			if role != RoleSkill {
				v.fail(p+".source", CodeSourceRole, fmt.Sprintf("artifact %q has a local source but runtime %q: only skills may come from a local source", a.Name, role),
					"publish the artifact to a registry and give its version, or set runtime: skill")
			}
			if a.Version != "" {
				v.fail(p+".version", CodeSourceRole, fmt.Sprintf("artifact %q has both source and version: a local source is never versioned or locked", a.Name),
					"remove version, or remove source to fetch it from the registry")
			}
			if filepath.IsAbs(a.Source) || path.IsAbs(filepath.ToSlash(a.Source)) {
				v.fail(p+".source", CodeSourcePath, fmt.Sprintf("source %q is absolute", a.Source), "write it relative to the manifest's folder")
			}
		case a.Version == "":
			if a.Name != "" {
				v.fail(p+".version", CodeVersion, fmt.Sprintf("artifact %q has no version", a.Name), "add `version: …` (or `source: …` for a local skill)")
			}
		default:
			if why := CheckVersion(a.Version); why != "" {
				code := CodeVersion
				if reservedVersions[a.Version] {
					code = CodeReservedVersion
				}
				v.fail(p+".version", code, fmt.Sprintf("artifact %q version %q is not usable: %s", a.Name, a.Version, why), "pin a concrete version such as 1.2.0")
			}
		}
		if a.Capabilities != nil {
			v.hookGrants(p+".capabilities", a.Name, role, a.Capabilities)
		}
		v.enum(p+".init_snapshot", "artifacts[].init_snapshot", a.InitSnapshot)
		if a.InitSnapshot != "" && role == RoleSkill {
			v.fail(p+".init_snapshot", CodeSnapshotRole, fmt.Sprintf("artifact %q has init_snapshot but runtime skill: a skill is text, it runs no guest", a.Name),
				"remove init_snapshot")
		}
		if a.Gateway != nil {
			if role != RoleDriver {
				v.fail(p+".gateway", CodeGatewayRole, fmt.Sprintf("artifact %q has a gateway but runtime %q: only drivers talk to a model endpoint", a.Name, role),
					"remove gateway, or set runtime: driver")
			}
			if a.Gateway.Endpoint != "" {
				v.url(p+".gateway.endpoint", a.Gateway.Endpoint)
			}
		}
	}
}

// hookGrants checks a hook entry's capabilities: only a hook has them, and each stays
// within the capsule's grants (a hook's own capabilities can only narrow them).
func (v *validator) hookGrants(p, name string, role Role, g *HookGrants) {
	if role != RoleHook {
		v.fail(p, CodeHookGrants, fmt.Sprintf("artifact %q has capabilities but runtime %q: only a hook entry is granted capabilities of its own", name, role),
			"remove capabilities, or set runtime: hook; a tool or driver has the capsule's grants")
		return
	}
	caps := &v.m.Capabilities
	for i, n := range g.Env.Allow {
		if !slices.Contains(caps.Env.Allow, n) {
			v.fail(fmt.Sprintf("%s.env.allow[%d]", p, i), CodeHookGrants, fmt.Sprintf("hook %q is granted %s, which the capsule's capabilities.env.allow does not grant: a hook's grants can only narrow the capsule's", name, n),
				"add "+n+" to capabilities.env.allow, or remove it from the hook's")
		}
	}
	if mem, capsule := g.Limits.MemoryBytes, caps.Limits.MemoryBytes; mem < 0 || capsule > 0 && mem > capsule {
		v.fail(p+".limits.memory_bytes", CodeHookGrants, fmt.Sprintf("hook %q limits.memory_bytes %d is over the capsule's %d: a hook's limits can only lower the capsule's", name, mem, capsule),
			fmt.Sprintf("write at most %d, or raise capabilities.limits.memory_bytes", capsule))
	}
	if s, capsule := g.Limits.DeadlineSeconds, int(v.m.Deadline(RoleHook).Seconds()); s < 0 || s > capsule {
		v.fail(p+".limits.deadline_seconds", CodeHookGrants, fmt.Sprintf("hook %q limits.deadline_seconds %d is over the capsule's hook deadline of %d s: a hook's limits can only lower the capsule's", name, s, capsule),
			fmt.Sprintf("write 1–%d, or raise capabilities.limits.deadline_seconds", capsule))
	}
}

func (v *validator) capabilities() {
	c := &v.m.Capabilities
	for i, hp := range c.Harness.Paths {
		p := fmt.Sprintf("capabilities.harness.paths[%d]", i)
		if hp.Path == "" || !path.IsAbs(hp.Path) || path.Clean(hp.Path) != hp.Path {
			v.fail(p+".path", CodeHarnessPath, fmt.Sprintf("harness path %q is not an absolute, clean path", hp.Path),
				"write the path the harness needs as an absolute path without . or .. segments, e.g. /opt/claude")
		}
		v.enum(p+".access", "capabilities.harness.paths[].access", hp.Access)
	}
	if v.has("capabilities.network.allow") {
		rules, err := netpolicy.ParseRules(c.Network.Allow)
		for _, e := range asList(err) {
			p := "capabilities.network.allow" + e.Path
			e = e.At(v.where(p), p)
			e.Part = "manifest"
			v.d.errs = append(v.d.errs, e)
		}
		c.NetworkRules = rules
	}
	if v.has("capabilities.filesystem.scope") {
		v.scope(c.Filesystem.Scope)
	}
	if v.has("capabilities.shell.allow") && len(c.Shell.Allow) == 0 {
		v.fail("capabilities.shell.allow", CodeShellEmpty, "shell.allow is written as an empty list",
			"remove the key to grant no binaries, or list the binaries to allow")
	}
	for i, b := range c.Shell.Allow {
		if b == "" || strings.ContainsAny(b, `/\`) || b == "." || b == ".." || strings.ContainsAny(b, " \t\n\x00") {
			v.fail(fmt.Sprintf("capabilities.shell.allow[%d]", i), CodeShellName, fmt.Sprintf("%q is not a bare binary name", b),
				"write the name only (e.g. git, not /usr/bin/git): it is looked up on the sandbox's PATH")
		}
	}
	switch c.Shell.MinTier {
	case "", "env-only", "scoped", "sealed":
	default:
		v.fail("capabilities.shell.min_tier", CodeMinTier, fmt.Sprintf("%q is not a sandbox tier", c.Shell.MinTier),
			"write env-only, scoped or sealed (strongest), or remove the key to accept any tier")
	}
	for i, g := range c.Shell.StripEnv {
		if !validStripGlob(g) {
			v.fail(fmt.Sprintf("capabilities.shell.strip_env[%d]", i), CodeStripGlob, fmt.Sprintf("%q is not a valid glob: a variable name with `*` only at the start and/or end", g),
				"write e.g. MY_* or *_CREDENTIALS")
		}
	}
	for i, name := range c.Env.Allow {
		p := fmt.Sprintf("capabilities.env.allow[%d]", i)
		switch {
		case !validEnvVar(name):
			v.fail(p, CodeEnvName, fmt.Sprintf("%q is not an environment variable name", name), "write a name such as LANG or MY_SETTING")
		case CredentialShaped(name, c.Shell.StripEnv):
			v.fail(p, CodeCredentialEnv, fmt.Sprintf("%q is credential-shaped and is never passed to guests or subprocesses", name),
				"remove it; give a model key to a driver through `gateway.api_key`, where the host adds it to requests and the guest never sees it")
		}
	}
	v.install(c.Install)
	v.positive("capabilities.limits.memory_bytes", c.Limits.MemoryBytes, CodeLimit)
	v.positive("capabilities.limits.deadline_seconds", int64(c.Limits.DeadlineSeconds), CodeLimit)
	v.positive("capabilities.limits.peer_depth", int64(c.Limits.PeerDepth), CodeLimit)
	v.positive("capabilities.limits.peer_calls", int64(c.Limits.PeerCalls), CodeLimit)
	r := reflect.ValueOf(c.Resources)
	for _, f := range structFields(r.Type()) {
		v.positive("capabilities.resources."+f.key, r.Field(f.index).Int(), CodeLimit)
	}
}

// peers checks each peer: a name by the naming rule, once; an http(s) URL without
// credentials, query or fragment, which capabilities.network.allow grants.
func (v *validator) peers() {
	seen := map[string]bool{}
	for i, p := range v.m.Peers {
		at := fmt.Sprintf("peers[%d]", i)
		v.name(at+".name", CodePeer, "peer", p.Name)
		if seen[p.Name] {
			v.fail(at+".name", CodePeer, fmt.Sprintf("peer %q is listed twice", p.Name), "give each peer one entry and a name of its own")
		}
		seen[p.Name] = true
		if p.URL == "" {
			continue
		}
		u, err := url.Parse(p.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			v.fail(at+".url", CodePeer, fmt.Sprintf("peer url %q is not an A2A endpoint URL: http(s), a host, no credentials, query or fragment", p.URL),
				"write the URL the peer's agent card is served under, e.g. https://agents.example.com/agents/summarizer/")
			continue
		}
		if v.failedAt("capabilities.network.allow") {
			continue // the allowlist did not parse: its own error says why
		}
		if err := v.m.Capabilities.NetworkRules.CheckURL(u); err != nil {
			v.fail(at+".url", CodePeerNotAllowed, fmt.Sprintf("peer url %q is not granted by capabilities.network.allow", p.URL),
				fmt.Sprintf("add %s://%s to capabilities.network.allow", u.Scheme, u.Host))
		}
	}
}

// install checks each capabilities.install entry against the entry grammar
// (docs/reference/manifest.md "Install grants").
func (v *validator) install(in Install) {
	for _, l := range []struct {
		key     string
		entries []string
	}{{"tool", in.Tool}, {"skill", in.Skill}} {
		for i, e := range l.entries {
			why := installPatternProblem(e)
			if why == "" {
				continue
			}
			fix := "write an artifact name such as wordcount, a prefix such as text-*, or * for every name"
			if s := suggestInstall(e); s != "" {
				fix = fmt.Sprintf("write %s instead, or another artifact name, prefix* or *", s)
			}
			v.fail(fmt.Sprintf("capabilities.install.%s[%d]", l.key, i), CodeInstallPattern,
				fmt.Sprintf("install entry %q is refused: %s; an entry is %s", e, why, installForms), fix)
		}
	}
}

func (v *validator) scope(s string) {
	p := "capabilities.filesystem.scope"
	slashed := filepath.ToSlash(s)
	switch {
	case s == "":
		v.fail(p, CodeScope, "filesystem.scope is empty", `write "." for the whole workdir, or a folder inside it`)
	case path.IsAbs(slashed) || filepath.IsAbs(s) || strings.HasPrefix(slashed, "~"):
		v.fail(p, CodeScope, fmt.Sprintf("filesystem.scope %q is absolute", s), "write a path relative to the workdir, e.g. data")
	case containsDotDot(slashed):
		v.fail(p, CodeScope, fmt.Sprintf("filesystem.scope %q contains '..'", s), "write a folder inside the workdir, without '..'")
	case strings.ContainsRune(s, 0):
		v.fail(p, CodeScope, "filesystem.scope contains a NUL byte", "write a plain relative path")
	}
}

func containsDotDot(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return true
		}
	}
	return false
}

func (v *validator) inference() {
	inf := v.m.Inference
	if inf == nil {
		return
	}
	v.enum("inference.transport", "inference.transport", inf.Transport)
	if (inf.Transport == "" || inf.Transport == "http") && inf.Model == "" {
		v.fail("inference.model", CodeModel, "inference.model is required for the http transport", "add `model: …` naming the provider's model")
	}
	if name := inf.Driver.Artifact; name != "" {
		a := v.m.Artifact(name)
		switch {
		case a == nil:
			v.fail("inference.driver.artifact", CodeDriverRef, fmt.Sprintf("driver %q is not declared in artifacts", name),
				fmt.Sprintf("add an artifact {name: %s, version: …, runtime: driver}", name))
		case a.Runtime != RoleDriver:
			v.fail("inference.driver.artifact", CodeDriverRef, fmt.Sprintf("artifact %q has runtime %q, not driver", name, orTool(a.Runtime)),
				fmt.Sprintf("set runtime: driver on artifact %s, or name a driver artifact", name))
		case a.Gateway != nil && inf.Endpoint != "" && a.Gateway.Endpoint != "" && a.Gateway.Endpoint != inf.Endpoint:
			v.fail("inference.endpoint", CodeEndpointConflict, fmt.Sprintf("inference.endpoint %q differs from driver %q's gateway.endpoint %q", inf.Endpoint, name, a.Gateway.Endpoint),
				"keep only the driver's gateway.endpoint")
		case a.Gateway != nil && inf.APIKey != "" && a.Gateway.APIKey != "" && a.Gateway.APIKey != inf.APIKey:
			v.fail("inference.api_key", CodeEndpointConflict, fmt.Sprintf("inference.api_key differs from driver %q's gateway.api_key", name),
				"keep only the driver's gateway.api_key")
		}
	}
	if inf.Endpoint != "" {
		v.url("inference.endpoint", inf.Endpoint)
	}
	var sources []string
	for _, k := range []string{"system_prompt", "system_prompt_file", "system_prompt_artifact"} {
		if v.has("inference." + k) {
			sources = append(sources, k)
		}
	}
	if len(sources) > 1 {
		v.fail("inference."+sources[1], CodePromptSources, "more than one system prompt source: "+strings.Join(sources, ", "),
			"keep exactly one of system_prompt, system_prompt_file, system_prompt_artifact")
	}
	if f := inf.SystemPromptFile; f != "" && (filepath.IsAbs(f) || path.IsAbs(filepath.ToSlash(f))) {
		v.fail("inference.system_prompt_file", CodeSourcePath, fmt.Sprintf("system_prompt_file %q is absolute", f), "write it relative to the manifest's folder")
	}
	if name := inf.SystemPromptArtifact; name != "" {
		if a := v.m.Artifact(name); a == nil || a.Runtime != RoleSkill {
			v.fail("inference.system_prompt_artifact", CodePromptArtifact, fmt.Sprintf("%q is not a declared skill artifact", name),
				fmt.Sprintf("declare {name: %s, runtime: skill, …} in artifacts, or use system_prompt", name))
		}
	}
	v.positive("inference.max_turns", int64(inf.MaxTurns), CodeRange)
	v.positive("inference.max_tokens", int64(inf.MaxTokens), CodeRange)
	if c := inf.Compaction; c != nil && v.has("inference.compaction.threshold") && (c.Threshold <= 0 || c.Threshold > 1) {
		v.fail("inference.compaction.threshold", CodeRange, fmt.Sprintf("%g is outside (0, 1]", c.Threshold), "write a fraction such as 0.9")
	}
}

func (v *validator) lifecycle() {
	l := v.m.Lifecycle
	v.enum("lifecycle.task_acceptance", "lifecycle.task_acceptance", l.TaskAcceptance)
	v.enum("lifecycle.after_task", "lifecycle.after_task", l.AfterTask)
	v.enum("lifecycle.conversation", "lifecycle.conversation", l.Conversation)
	v.positive("lifecycle.queue_depth", int64(l.QueueDepth), CodeRange)
	v.positive("lifecycle.input_timeout_secs", int64(l.InputTimeoutSecs), CodeRange)
	v.positive("lifecycle.max_task_reopens", int64(l.MaxTaskReopens), CodeRange)
}

func orTool(r Role) Role {
	if r == "" {
		return RoleTool
	}
	return r
}

// suggestName turns s into the nearest valid name, for the fix text.
func suggestName(s string) string {
	if out := nameChars(s, 100); out != "" {
		return out
	}
	return "my-capsule"
}

// nameChars keeps s's name characters, lower case, with one '-' for each run of others,
// at most max long; "" when none are left.
func nameChars(s string, max int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > max {
		out = strings.Trim(out[:max], "-")
	}
	return out
}

func asList(err error) errs.List {
	if err == nil {
		return nil
	}
	switch e := err.(type) {
	case errs.List:
		return e
	case *errs.Error:
		return errs.List{e}
	}
	return errs.List{errs.Wrap(err, CodeType, "manifest", "invalid network rule", "")}
}

// a2a checks the a2a section: media types, limits, output files that stay in out/.
func (v *validator) a2a() {
	a := v.m.A2A
	modes := func(key string, list []string) {
		for i, mt := range list {
			if !mediatype.ValidRange(mt) {
				v.fail(fmt.Sprintf("%s[%d]", key, i), CodeMediaType, fmt.Sprintf("%q is not a media type", mt),
					"write type/subtype (application/pdf), type/* (image/*) or */*")
			}
		}
	}
	modes("a2a.input_modes", a.InputModes)
	modes("a2a.output_modes", a.OutputModes)
	v.positive("a2a.max_file_bytes", a.MaxFileBytes, CodeRange)
	v.positive("a2a.max_message_bytes", a.MaxMessageBytes, CodeRange)
	seen := map[string]bool{}
	for i, o := range a.Outputs {
		p := fmt.Sprintf("a2a.outputs[%d]", i)
		switch {
		case o.File == "":
		case !OutputName(o.File):
			v.fail(p+".file", CodeOutputFile, fmt.Sprintf("output file %q is not a clean name below out/", o.File),
				"write the file's name relative to out/, such as report.pdf or charts/a.png, without .., a leading / or a trailing /")
		case seen[o.File]:
			v.fail(p+".file", CodeOutputFile, fmt.Sprintf("output file %q is listed twice", o.File), "list each file once")
		}
		seen[o.File] = true
		if o.MediaType != "" && (!mediatype.ValidRange(o.MediaType) || strings.Contains(o.MediaType, "*")) {
			v.fail(p+".media_type", CodeMediaType, fmt.Sprintf("%q is not a media type", o.MediaType), "write type/subtype, such as application/pdf")
		}
		v.enum(p+".as", "a2a.outputs[].as", o.As)
	}
}

// OutputName reports whether name is a clean file name below out/, as a2a.outputs and a
// task's answer file (out/a2a.json) name files: relative, without .., a leading or
// trailing / or a backslash.
func OutputName(name string) bool {
	clean := path.Clean(name)
	return fs.ValidPath(clean) && clean != "." && clean == name && !strings.Contains(name, `\`)
}

// CardOutputModes are the media types a capsule's tasks may answer with beyond text/plain:
// a2a.output_modes, then those of a2a.outputs (a file's, or application/json for data).
func (a A2A) CardOutputModes() []string {
	out := slices.Clone(a.OutputModes)
	for _, o := range a.Outputs {
		mt := o.MediaType
		switch {
		case o.As == OutputData:
			mt = "application/json"
		case mt == "" && o.As == OutputText:
			mt = "text/plain"
		case mt == "":
			mt = mediatype.OfFile("", o.File) // as the runtime types the artifact
		}
		if mt != "" && !slices.Contains(out, mt) {
			out = append(out, mt)
		}
	}
	return out
}
