package wasm

import (
	"fmt"
	"sort"
	"strings"

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/manifest"
)

// Interfaces this host serves, by "namespace:package/interface", with their versions.
var (
	served = map[string][]string{
		"murmur:tool/run":    {"0.1.0"},
		"murmur:capsule/run": {"0.1.0"},
	}
	// hostImports are the host interfaces, by "namespace:package/interface@version".
	hostImports = map[string]bool{
		"murmur:tool-registry/invoke@0.1.0": true,
		"murmur:stream/events@0.1.0":        true,
		"murmur:task/task@0.1.0":            true,
		"capsulegate:http/outgoing@0.1.0":   true,
		"capsulegate:http/outgoing@0.2.0":   true,
	}
	// worlds lists what each role may import (docs/reference/guest-abi.md "Worlds")
	// besides WASI preview1, and which interface it must export.
	worlds = map[string]struct {
		imports []string
		export  string
	}{
		"script":                    {[]string{"murmur:tool-registry/invoke@0.1.0", "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:capsule/run"},
		string(manifest.RoleTool):   {[]string{"murmur:task/task@0.1.0", "murmur:stream/events@0.1.0", "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:tool/run"},
		string(manifest.RoleDriver): {[]string{"murmur:stream/events@0.1.0", "capsulegate:http/outgoing@0.1.0", "capsulegate:http/outgoing@0.2.0"}, "murmur:tool/run"},
	}
)

// RoleCapsule labels a script capsule's own module in metrics and errors.
const RoleCapsule manifest.Role = "capsule"

// ScriptWorld names the world of a script capsule's own module in CheckWorld.
const ScriptWorld = "script"

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
// CheckWorld accepted it.
func (m *Module) RunExport(world string) string {
	want := worlds[world].export
	for name := range m.module.ExportedFunctions() {
		if iface, _, fn, ok := parseExport(name); ok && iface == want && fn == "run" {
			return name
		}
	}
	return ""
}

// CheckWorld refuses, before anything runs, a module that exports an interface version
// the host does not serve, lacks its world's run export, or imports a host interface its
// world does not offer.
func (m *Module) CheckWorld(world string) error {
	if m.comp != nil {
		_, err := checkComponentWorld(m.comp.plan, m.Artifact, world)
		return err
	}
	w, ok := worlds[world]
	if !ok {
		return errs.New(CodeImport, "runtime", fmt.Sprintf("artifact %s: role %q runs no wasm world in this release", m.Artifact, world),
			"use a tool, driver or script capsule")
	}
	var problems errs.List
	found := false
	for name := range m.module.ExportedFunctions() {
		iface, ver, fn, ok := parseExport(name)
		if !ok {
			continue
		}
		vers, known := served[iface]
		if !known {
			continue // an interface of another world: harmless, never called
		}
		if !contains(vers, ver) {
			problems = append(problems, errs.New(CodeExportVersion, "runtime",
				fmt.Sprintf("artifact %s exports %q, version %s of %s, which this host does not serve (served: %s)", m.Artifact, name, ver, iface, strings.Join(vers, ", ")),
				"rebuild the guest against a served version of the interface"))
			continue
		}
		if iface == w.export && fn == "run" {
			found = true
		}
	}
	if !found && len(problems) == 0 {
		problems = append(problems, errs.New(CodeExport, "runtime",
			fmt.Sprintf("artifact %s exports no %s@{%s}#run, which a %s module must", m.Artifact, w.export, strings.Join(served[w.export], ","), world),
			"export the world's run function (the Go SDK's tool or capsule package does)"))
	}
	allowed := map[string]bool{}
	for _, i := range w.imports {
		allowed[i] = true
	}
	var bad []string
	for _, f := range m.module.ImportedFunctions() {
		mod, _, _ := f.Import()
		if mod == "wasi_snapshot_preview1" || allowed[mod] {
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
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
