package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/internal/errs"
	"github.com/capsulegate/capsulegate/manifest"
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
	return wasm.Grants{MemoryBytes: m.Capabilities.Limits.MemoryBytes, Deadline: m.Deadline(manifest.RoleHook)}
}
