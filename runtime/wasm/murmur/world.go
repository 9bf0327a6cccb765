package murmur

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/component"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Interfaces this host serves, by "namespace:package/interface", with their levels.
var (
	// served lists the exported interfaces' levels ("major.minor"): a guest may export any
	// version of a level (0.1.0, 0.1.3), whose records are the same.
	served = map[string][]string{
		"murmur:tool/run":    {"0.1", "0.2"},
		"murmur:capsule/run": {"0.1"},
		abi.HookInterface:    {"0.9"},
	}
	// hostImports are the host interfaces, by "namespace:package/interface@version".
	hostImports = map[string]bool{
		"murmur:tool-registry/invoke@0.1.0": true,
		"murmur:stream/events@0.1.0":        true,
		"murmur:task/task@0.1.0":            true,
		"capsulegate:http/outgoing@0.1.0":   true,
		"capsulegate:http/outgoing@0.2.0":   true,
		abi.ModuleInference:                 true,
		abi.ModuleTokens:                    true,
		abi.ModuleTaskIO:                    true,
		abi.ModuleConversation:              true,
		abi.ModuleArtifacts:                 true,
		abi.ModuleMessage:                   true,
	}
	// worlds lists what each role may import (docs/reference/guest-abi.md "Worlds")
	// besides WASI preview1, and which interface it must export.
	worlds = map[string]struct {
		imports []string
		export  string
	}{
		// A script capsule may also manage its runtime's artifacts, as upstream Murmur's
		// runtime-host world imports artifact-manager beside tool-registry.
		"script":                    {[]string{"murmur:tool-registry/invoke@0.1.0", abi.ModuleArtifacts, abi.ModuleMessage, "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:capsule/run"},
		string(manifest.RoleTool):   {[]string{"murmur:task/task@0.1.0", "murmur:stream/events@0.1.0", abi.ModuleMessage, "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:tool/run"},
		string(manifest.RoleDriver): {[]string{"murmur:stream/events@0.1.0", "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:tool/run"},
		// A hook imports what Murmur's hook world offers: it answers events, it does
		// not act (no network, no tools).
		string(manifest.RoleHook): {[]string{abi.ModuleInference, abi.ModuleTokens, abi.ModuleTaskIO, abi.ModuleConversation}, abi.HookInterface},
	}
)

// RoleCapsule labels a script capsule's own module in metrics and errors.
const RoleCapsule manifest.Role = "capsule"

// ScriptWorld names the world of a script capsule's own module in CheckWorld.
const ScriptWorld = "script"

// wasiP1 is the WASI preview1 import module, which every core module's world offers.
const wasiP1 = "wasi_snapshot_preview1"

// Compile compiles wasm for the artifact of capsule, of role, in the world of its role
// (for a component, checked here: it picks the core instance its calls are made on).
func Compile(ctx context.Context, e *wasm.Engine, capsule, artifact string, role manifest.Role, code []byte) (*wasm.Module, error) {
	return CompileWorld(ctx, e, capsule, artifact, role, worldOf(role), code)
}

// CompileWorld is Compile for an artifact of role that runs world, which need not be
// its role's own (a process driver: role driver, world ProcessWorld); a core module's
// world is checked only by CheckWorld.
func CompileWorld(ctx context.Context, e *wasm.Engine, capsule, artifact string, role manifest.Role, world string, code []byte) (*wasm.Module, error) {
	return e.Compile(ctx, capsule, artifact, string(role), func(plan *component.Plan, artifact string) (int, map[string]string, error) {
		return checkComponentWorld(plan, artifact, world)
	}, code)
}

// parseExport splits "ns:pkg/iface@ver#func" into "ns:pkg/iface", ver and func; ok is false
// for names not in that form (plain exports such as cabi_realloc or _initialize).
func parseExport(name string) (iface, version, fn string, ok bool) {
	hash := strings.LastIndexByte(name, '#')
	at := strings.LastIndexByte(name, '@')
	if hash < 0 || at < 0 || at > hash || !strings.Contains(name[:at], ":") || !strings.Contains(name[:at], "/") {
		return "", "", "", false
	}
	return name[:at], name[at+1 : hash], name[hash+1:], true
}

// RunExport returns the full export name of the world's run function in mod, after
// CheckWorld accepted it; of a module exporting several served versions, the last in
// name order (the highest, 0.2.0 over 0.1.0), so the choice does not vary between calls.
func RunExport(m *wasm.Module, world string) string {
	want := worlds[world].export
	best := ""
	for name := range m.ExportedFunctions() {
		if iface, ver, fn, ok := parseExport(name); ok && iface == want && fn == "run" && serves(iface, ver) && name > best {
			best = name
		}
	}
	return best
}

// CheckWorld refuses, before anything runs, a module that exports an interface version
// the host does not serve, lacks its world's run export, or imports a host interface its
// world does not offer.
func CheckWorld(m *wasm.Module, world string) error {
	if world == ProcessWorld {
		return checkProcessWorld(m)
	}
	if world == string(manifest.RoleDriver) {
		if err := checkHTTPDriver(m); err != nil {
			return err
		}
	}
	if plan := m.Plan(); plan != nil {
		_, _, err := checkComponentWorld(plan, m.Artifact, world)
		return err
	}
	w, ok := worlds[world]
	if !ok {
		return errs.New(CodeImport, "runtime", fmt.Sprintf("artifact %s: role %q runs no wasm world in this release", m.Artifact, world),
			"use a tool, driver or script capsule")
	}
	var problems errs.List
	found := false
	for name := range m.ExportedFunctions() {
		iface, ver, fn, ok := parseExport(name)
		if !ok {
			continue
		}
		if _, known := served[iface]; !known {
			continue // an interface of another world: harmless, never called
		}
		if !serves(iface, ver) {
			problems = append(problems, errs.New(CodeExportVersion, "runtime",
				fmt.Sprintf("artifact %s exports %q, version %s of %s, which this host does not serve (it %s)", m.Artifact, name, ver, iface, servedLevels(iface)),
				"rebuild the guest against a served version of the interface"))
			continue
		}
		if iface == w.export && (fn == "run" || world == string(manifest.RoleHook) && abi.HookFuncs[fn] != nil) {
			found = true
		}
	}
	if !found && len(problems) == 0 && world == string(manifest.RoleHook) {
		problems = append(problems, errs.New(CodeHookExport, "runtime",
			fmt.Sprintf("artifact %s exports no function of %s, which a hook module must (this host %s)", m.Artifact, w.export, servedLevels(w.export)),
			"export the lifecycle functions the hook answers (the Go SDK's wit/guest/hook package does)"))
	}
	if !found && len(problems) == 0 {
		problems = append(problems, errs.New(CodeExport, "runtime",
			fmt.Sprintf("artifact %s exports no %s@<version>#run, which a %s module must (this host %s)", m.Artifact, w.export, world, servedLevels(w.export)),
			"export the world's run function (the Go SDK's tool or capsule package does)"))
	}
	allowed := map[string]bool{}
	for _, i := range w.imports {
		allowed[i] = true
	}
	var bad []string
	for _, f := range m.ImportedFunctions() {
		mod, _, _ := f.Import()
		if mod == wasiP1 || allowed[mod] {
			continue
		}
		bad = append(bad, mod)
	}
	for _, mod := range dedupe(bad) {
		why := "is not offered to a " + world
		if !hostImports[mod] {
			why = "is not served by this host"
		}
		problems = append(problems, errs.New(CodeImport, "runtime",
			fmt.Sprintf("artifact %s imports %q, which %s (a %s may import: wasi_snapshot_preview1, %s)", m.Artifact, mod, why, world, strings.Join(w.imports, ", ")),
			"rebuild the guest without that import, or against a served version"))
	}
	if len(problems) > 0 {
		return problems
	}
	return nil
}

// serves reports whether version of the exported interface iface is of a level served.
func serves(iface, version string) bool {
	for _, level := range served[iface] {
		if isMinor(version, level) {
			return true
		}
	}
	return false
}

// servedLevels names the levels of iface served, for refusals:
// "serves murmur:tool/run 0.1.x and 0.2.x".
func servedLevels(iface string) string {
	levels := make([]string, len(served[iface]))
	for i, l := range served[iface] {
		levels[i] = l + ".x"
	}
	list := strings.Join(levels, ", ")
	if n := len(levels); n > 1 {
		list = strings.Join(levels[:n-1], ", ") + " and " + levels[n-1]
	}
	return "serves " + iface + " " + list
}

// toolRun is the function type of a murmur:tool/run export: the 0.2 result adds
// attachments.
func toolRun(export string) *abi.Func {
	if _, ver, _, ok := parseExport(export); ok && isMinor(ver, "0.2") {
		return abi.ToolRun02
	}
	return abi.ToolRun01
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
