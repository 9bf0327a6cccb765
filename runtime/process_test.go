package runtime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/murmur"
)

// processModule is a core module exporting the named process functions at version,
// each a no-op, importing imports.
func processModule(version string, fns []string, imports ...wasmtest.Import) []byte {
	m := wasmtest.Module{Imports: imports, MemoryPages: 1}
	for _, fn := range fns {
		m.Funcs = append(m.Funcs, wasmtest.Func{Export: "murmur:driver/process@" + version + "#" + fn, Body: wasmtest.Nop})
	}
	return m.Encode()
}

var allProcessFuncs = []string{"describe", "launch", "parse", "classify-exit", "read-login"}

// TestProcessDriverRefusals is the refusal table of a process driver at stage: each
// refusal of the driver's module (its interface level, its imports, the transport) and
// of its describe() answer against the manifest (required env, login check, the paths
// and hosts the harness needs) has its code, and a driver passing them all stages.
func TestProcessDriverRefusals(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "procdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/procdriver"))
	publishWasm(t, reg, "badprocdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/badprocdriver"))
	publishWasm(t, reg, "recdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/recdriver"))
	// The procdriver made a component with the preview1 reactor adapter, as Murmur ships its drivers.
	publishWasm(t, reg, "compprocdriver", "driver", procDriverComponent(t))
	publishWasm(t, reg, "oldproc", "driver", processModule("0.5.0", allProcessFuncs))
	publishWasm(t, reg, "halfproc", "driver", processModule("0.6.0", []string{"describe", "launch"}))
	publishWasm(t, reg, "importingproc", "driver", processModule("0.6.0", allProcessFuncs,
		wasmtest.Import{Module: "murmur:task/task@0.1.0", Name: "request-input"}))
	publishWasm(t, reg, "trapproc", "driver", processModule("0.6.0", allProcessFuncs))

	granted := "  env: {allow: [PROC_MODE, PROC_HINT]}\n  harness: {paths: [{path: /usr}]}\n  network: {allow: [harness.example]}\n"
	tests := []struct {
		name, driver, transport, caps string
		want                          []string // codes, in order
		says                          string   // a part of the first refusal
	}{
		{"an http driver exporting the process interface", "procdriver", "http", granted, []string{murmur.CodeProcessUnderHTTP}, "murmur:driver/process@0.6.0"},
		{"process interface missing", "recdriver", "process", granted, []string{murmur.CodeProcessMissing}, "exports no murmur:driver/process"},
		{"another level", "oldproc", "process", granted, []string{murmur.CodeProcessLevel}, "at 0.5.0"},
		{"part of the level", "halfproc", "process", granted, []string{murmur.CodeProcessLevel}, "not all of its functions"},
		{"a murmur import", "importingproc", "process", granted, []string{murmur.CodeProcessImport}, "murmur:task/task@0.1.0#request-input"},
		{"describe fails", "trapproc", "process", granted, []string{CodeProcessDescribe}, "describe() failed"},
		{"required env missing", "procdriver", "process", "  harness: {paths: [{path: /usr}]}\n  network: {allow: [harness.example]}\n",
			[]string{CodeProcessEnvMissing}, "cannot run without PROC_MODE, PROC_HINT,"},
		{"required env partly granted", "procdriver", "process", "  env: {allow: [PROC_HINT]}\n  harness: {paths: [{path: /usr}]}\n  network: {allow: [harness.example]}\n",
			[]string{CodeProcessEnvMissing}, "cannot run without PROC_MODE,"},
		{"harness path not granted", "procdriver", "process", "  env: {allow: [PROC_MODE, PROC_HINT]}\n  harness: {paths: [{path: /opt/other}]}\n  network: {allow: [harness.example]}\n",
			[]string{CodeProcessPath}, "read access to /usr/share"},
		{"harness host not granted", "procdriver", "process", "  env: {allow: [PROC_MODE, PROC_HINT]}\n  harness: {paths: [{path: /usr/share, access: read-write}]}\n",
			[]string{CodeProcessHost}, "reaches harness.example"},
		{"an unusable description", "badprocdriver", "process", granted,
			[]string{CodeProcessDescribe, CodeProcessDescribe, CodeProcessEnvName, CodeProcessEnvName, CodeProcessEnvName, CodeProcessLoginCheck}, "names no harness"},
		{"every check passes", "procdriver", "process", granted, nil, ""},
		{"a component: every check passes", "compprocdriver", "process", granted, nil, ""},
		{"a component: its describe is checked", "compprocdriver", "process", "  harness: {paths: [{path: /usr}]}\n  network: {allow: [harness.example]}\n",
			[]string{CodeProcessEnvMissing}, "cannot run without PROC_MODE, PROC_HINT,"},
		{"a component: an http driver exporting the process interface", "compprocdriver", "http", granted, []string{murmur.CodeProcessUnderHTTP}, "murmur:driver/process@0.6.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			mpath := filepath.Join(dir, "murmur.yaml")
			os.WriteFile(mpath, []byte(`name: proc
version: 1.0.0
artifacts:
  - {name: `+tt.driver+`, version: 1.0.0, runtime: driver}
inference:
  transport: `+tt.transport+`
  driver: {artifact: `+tt.driver+`}
  model: m
capabilities:
`+tt.caps), 0o644)
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Stage(context.Background(), m, StageOptions{Registry: reg})
			got := errs.Codes(err)
			var first string
			if l := asProblems(err); len(l) > 0 {
				first = l[0].Error()
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("codes %v, want %v: %v", got, tt.want, err)
			}
			if !strings.Contains(first, tt.says) {
				t.Errorf("%q does not say %q", first, tt.says)
			}
		})
	}
}
