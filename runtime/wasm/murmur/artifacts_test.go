package murmur

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/internal/testkit/wasmtest"
	"github.com/capsulegate/capsulegate/internal/testkit/watbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/runtime/wasm/guestfs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

const pullerDir = "../../../internal/testkit/testguests/puller"

// fakeArtifacts is an ArtifactManager that records each call and answers from its
// fields; err, when set, is every fallible call's answer.
type fakeArtifacts struct {
	mu      sync.Mutex
	calls   []string
	list    []abi.ArtifactSummary
	info    abi.ArtifactInfo
	found   []abi.ArtifactSummary
	pulled  abi.ArtifactSummary
	removed bool
	state   abi.RuntimeState
	err     error
}

func (f *fakeArtifacts) record(call ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, strings.Join(call, " "))
}

func (f *fakeArtifacts) List(context.Context) []abi.ArtifactSummary {
	f.record("list")
	return f.list
}

func (f *fakeArtifacts) Describe(_ context.Context, name string) (abi.ArtifactInfo, error) {
	f.record("describe", name)
	return f.info, f.err
}

func (f *fakeArtifacts) Search(_ context.Context, query string) ([]abi.ArtifactSummary, error) {
	f.record("search", fmt.Sprintf("%q", query))
	return f.found, f.err
}

func (f *fakeArtifacts) Pull(_ context.Context, name, version string) (abi.ArtifactSummary, error) {
	f.record("pull", name, version)
	return f.pulled, f.err
}

func (f *fakeArtifacts) Remove(_ context.Context, name string) (bool, error) {
	f.record("remove", name)
	return f.removed, f.err
}

func (f *fakeArtifacts) Diagnostics(context.Context) (abi.RuntimeState, error) {
	f.record("diagnostics")
	return f.state, f.err
}

func strPtr(s string) *string { return &s }

// artifactCase is one task of the puller guest against a manager.
type artifactCase struct {
	name   string
	task   string
	am     *fakeArtifacts // nil: Imports.Artifacts is nil
	invoke func(ctx context.Context, name string, in abi.ToolInput) (abi.ToolResult, error)
	want   string   // out/result.txt
	calls  []string // what the manager was called with
}

var refused = errors.New("registry: grep@9.9.9 is not published")

var artifactCases = []artifactCase{
	{name: "list", task: "list", am: &fakeArtifacts{list: []abi.ArtifactSummary{{Name: "grep", Version: "1.2.0"}, {Name: "jq", Version: "1.7.1", Runtime: abi.RuntimeNative}}},
		want:  `ok: [{"name":"grep","version":"1.2.0","runtime":"wasm"},{"name":"jq","version":"1.7.1","runtime":"native"}]`,
		calls: []string{"list"}},
	{name: "list empty", task: "list", am: &fakeArtifacts{}, want: `ok: []`, calls: []string{"list"}},
	{name: "describe", task: "describe grep", am: &fakeArtifacts{info: abi.ArtifactInfo{Name: "grep", Version: "1.2.0", Description: "searches text",
		Tags: []string{"text", "search"}, Runtime: abi.RuntimeWasm, InputSchema: strPtr(`{"type":"object"}`)}},
		want:  `ok: {"name":"grep","version":"1.2.0","description":"searches text","tags":["text","search"],"runtime":"wasm","input-schema":"{\"type\":\"object\"}","output-schema":null}`,
		calls: []string{"describe grep"}},
	{name: "describe refused", task: "describe nope", am: &fakeArtifacts{err: errors.New("no artifact nope is installed")},
		want: `error: no artifact nope is installed`, calls: []string{"describe nope"}},
	{name: "search", task: "search text tools", am: &fakeArtifacts{found: []abi.ArtifactSummary{{Name: "grep", Version: "1.2.0"}}},
		want: `ok: [{"name":"grep","version":"1.2.0","runtime":"wasm"}]`, calls: []string{`search "text tools"`}},
	{name: "search nothing", task: "search zzz", am: &fakeArtifacts{}, want: `ok: []`, calls: []string{`search "zzz"`}},
	{name: "pull", task: "pull grep 1.3.0", am: &fakeArtifacts{pulled: abi.ArtifactSummary{Name: "grep", Version: "1.3.0", Runtime: abi.RuntimeNative}},
		want: `ok: {"name":"grep","version":"1.3.0","runtime":"native"}`, calls: []string{"pull grep 1.3.0"}},
	{name: "pull refused", task: "pull grep 9.9.9", am: &fakeArtifacts{err: refused},
		want: `error: registry: grep@9.9.9 is not published`, calls: []string{"pull grep 9.9.9"}},
	{name: "remove", task: "remove grep", am: &fakeArtifacts{removed: true}, want: `ok: true`, calls: []string{"remove grep"}},
	{name: "remove absent", task: "remove grep", am: &fakeArtifacts{}, want: `ok: false`, calls: []string{"remove grep"}},
	{name: "diagnostics", task: "diagnostics", am: &fakeArtifacts{state: abi.RuntimeState{CapsuleID: "cap-1", Capabilities: `{"tools":["grep"]}`,
		Installed: []abi.ArtifactSummary{{Name: "grep", Version: "1.2.0"}}}},
		want:  `ok: {"capsule-id":"cap-1","installed":[{"name":"grep","version":"1.2.0","runtime":"wasm"}],"capabilities":"{\"tools\":[\"grep\"]}"}`,
		calls: []string{"diagnostics"}},
	{name: "diagnostics refused", task: "diagnostics", am: &fakeArtifacts{err: errors.New("diagnostics: the runtime is shutting down")},
		want: `error: diagnostics: the runtime is shutting down`, calls: []string{"diagnostics"}},
	{name: "answer that cannot be lowered", task: "describe odd", am: &fakeArtifacts{info: abi.ArtifactInfo{Name: "odd", Runtime: 7}},
		want: "error: artifact-manager: the host's answer cannot be passed to the guest: abi: artifact-info: runtime type 7 is neither wasm nor native", calls: []string{"describe odd"}},
	{name: "not granted", task: "list\ndescribe grep\nsearch grep\npull grep 1.0.0\nremove grep\ndiagnostics",
		want: "ok: []" + strings.Repeat("\nerror: not-granted: this capsule may not manage artifacts", 5)},
	{name: "invoke beside the manager", task: "invoke echo hello there\npull grep 1.3.0\nbogus\nremove",
		am: &fakeArtifacts{pulled: abi.ArtifactSummary{Name: "grep", Version: "1.3.0"}},
		invoke: func(_ context.Context, name string, in abi.ToolInput) (abi.ToolResult, error) {
			return abi.ToolResult{Status: abi.StatusPassed, Data: strPtr(name + " said " + *in.Data)}, nil
		},
		want: `ok: {"status":"passed","summary":null,"data":"echo said hello there"}` + "\n" +
			`ok: {"name":"grep","version":"1.3.0","runtime":"wasm"}` + "\n" +
			`error: puller: unknown command "bogus"` + "\n" +
			`error: puller: usage: remove NAME`,
		calls: []string{"pull grep 1.3.0"}},
}

// runPuller runs mod (the puller, as a core module or a component) on task with am
// and invoke, and returns its out/result.txt.
func runPuller(t *testing.T, e *wasm.Engine, mod *wasm.Module, tc artifactCase) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "task.md"), []byte(tc.task), 0o644); err != nil {
		t.Fatal(err)
	}
	gfs, err := guestfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &Imports{Invoke: tc.invoke}
	if tc.am != nil {
		h.Artifacts = tc.am
	}
	var stderr strings.Builder
	if err := RunScript(context.Background(), e, mod, wasm.Grants{FS: gfs, MemoryBytes: 64 << 20, Stderr: &stderr}, h); err != nil {
		t.Fatalf("%v\nstderr: %s", err, stderr.String())
	}
	out, err := os.ReadFile(filepath.Join(dir, "out", "result.txt"))
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func checkArtifactCases(t *testing.T, e *wasm.Engine, mod *wasm.Module) {
	for _, tc := range artifactCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.am != nil {
				tc.am.calls = nil
			}
			got := runPuller(t, e, mod, tc)
			if want := tc.want + "\n"; got != want {
				t.Errorf("result\n%s\nwant\n%s", got, want)
			}
			if tc.am != nil && !slices.Equal(tc.am.calls, tc.calls) {
				t.Errorf("manager called %q, want %q", tc.am.calls, tc.calls)
			}
		})
	}
}

// TestArtifactManagerCore runs the puller guest (a Go script capsule, a core module)
// through every murmur:artifact-manager/manage function against a fake manager: the
// manager sees what the guest passed, the guest reads what it answered, and a refusal
// (an ungranted capsule's included) is an err string, not a trap.
func TestArtifactManagerCore(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	mod, err := Compile(context.Background(), e, "cap", "capsule", RoleCapsule, guestbuild.Wasm(t, pullerDir))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckWorld(mod, ScriptWorld); err != nil {
		t.Fatal(err)
	}
	var imported []string
	for _, f := range mod.ImportedFunctions() {
		if m, name, _ := f.Import(); m != wasiP1 {
			imported = append(imported, m+"#"+name)
		}
	}
	want := []string{abi.ModuleArtifacts + "#describe", abi.ModuleArtifacts + "#diagnostics", abi.ModuleArtifacts + "#list",
		abi.ModuleArtifacts + "#pull", abi.ModuleArtifacts + "#remove", abi.ModuleArtifacts + "#search", abi.ModuleRegistry + "#invoke"}
	if slices.Sort(imported); !slices.Equal(imported, want) {
		t.Errorf("the puller imports %q, want %q", imported, want)
	}
	checkArtifactCases(t, e, mod)
}

// TestArtifactManagerListTraps: list has no error channel, so a host answer that cannot
// be lowered traps rather than reaching the guest.
func TestArtifactManagerListTraps(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	mod, err := Compile(context.Background(), e, "cap", "capsule", RoleCapsule, guestbuild.Wasm(t, pullerDir))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "task.md"), []byte("list"), 0o644); err != nil {
		t.Fatal(err)
	}
	gfs, err := guestfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := &Imports{Artifacts: &fakeArtifacts{list: []abi.ArtifactSummary{{Name: "x", Runtime: 3}}}}
	err = RunScript(context.Background(), e, mod, wasm.Grants{FS: gfs, MemoryBytes: 64 << 20}, h)
	if err == nil || !strings.Contains(err.Error(), "runtime type 3 is neither wasm nor native") {
		t.Fatalf("want a trap naming the bad runtime type, got %v", err)
	}
}

// pullerWIT is a WIT file of one package: the puller's world, importing the real
// murmur:artifact-manager/manage and murmur:tool-registry/invoke (with the murmur:tool
// types it uses) and exporting murmur:capsule/run, each in a nested package.
func pullerWIT(t *testing.T) string {
	t.Helper()
	body := func(file string) string {
		b, err := os.ReadFile(filepath.Join("../../../wit", file))
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		head, rest, _ := strings.Cut(s, "\n")
		pkg := strings.TrimSuffix(strings.TrimPrefix(head, "package "), ";")
		if i := strings.Index(rest, "\n/// A tool"); i >= 0 { // murmur:tool's worlds import what is not here
			rest = rest[:i]
		}
		return "package " + pkg + " {\n" + rest + "\n}\n"
	}
	src := "package capsulegate:puller-test;\n\n" +
		body("murmur-tool-0.1.0.wit") + body("murmur-tool-registry-0.1.0.wit") + body("murmur-artifact-manager-0.1.0.wit") +
		"package murmur:capsule@0.1.0 {\n  interface run {\n    run: func();\n  }\n}\n\n" +
		"world puller {\n  import murmur:tool-registry/invoke@0.1.0;\n  import murmur:artifact-manager/manage@0.1.0;\n  export murmur:capsule/run@0.1.0;\n}\n"
	path := filepath.Join(t.TempDir(), "puller.wit")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestArtifactManagerComponent runs the same cases on the puller made a component by
// jco (wit-component and the preview1 reactor adapter): its lowered imports of
// murmur:artifact-manager/manage reach the same manager.
func TestArtifactManagerComponent(t *testing.T) {
	core := guestbuild.Wasm(t, pullerDir)
	comp := watbuild.Component(t, core, pullerWIT(t), "puller")
	e, _ := newEngine(t)
	mod, err := Compile(context.Background(), e, "cap", "capsule", RoleCapsule, comp)
	if err != nil {
		t.Fatal(err)
	}
	if mod.Plan() == nil {
		t.Fatal("the puller component compiled as a core module")
	}
	if err := CheckWorld(mod, ScriptWorld); err != nil {
		t.Fatal(err)
	}
	checkArtifactCases(t, e, mod)
}

// TestArtifactManagerWorlds: only a script capsule may import the artifact manager, as
// a core module or a component; the refusal names the import and what the world offers.
func TestArtifactManagerWorlds(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	fn := func(export string) wasmtest.Func { return wasmtest.Func{Export: export, Body: wasmtest.Nop} }
	amImport := []wasmtest.Import{{Module: abi.ModuleArtifacts, Name: "list", Params: []byte{wasmtest.I32}}}
	for _, tc := range []struct {
		world, export string
	}{
		{string(manifest.RoleTool), "murmur:tool/run@0.1.0#run"},
		{string(manifest.RoleDriver), "murmur:tool/run@0.1.0#run"},
		{string(manifest.RoleHook), "murmur:hook/lifecycle@0.9.0#on-tool-call"},
	} {
		t.Run("core "+tc.world, func(t *testing.T) {
			mod, err := Compile(ctx, e, "cap", "a", manifest.RoleTool, wasmtest.Module{Imports: amImport, Funcs: []wasmtest.Func{fn(tc.export)}}.Encode())
			if err != nil {
				t.Fatal(err)
			}
			err = CheckWorld(mod, tc.world)
			says := fmt.Sprintf("imports %q, which is not offered to a %s", abi.ModuleArtifacts, tc.world)
			if errs.Find(err, CodeImport) == nil || !strings.Contains(err.Error(), says) {
				t.Fatalf("want %s saying %q, got %v", CodeImport, says, err)
			}
		})
	}
	t.Run("core script", func(t *testing.T) {
		mod, err := Compile(ctx, e, "cap", "a", RoleCapsule, wasmtest.Module{Imports: amImport, Funcs: []wasmtest.Func{fn("murmur:capsule/run@0.1.0#run")}}.Encode())
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckWorld(mod, ScriptWorld); err != nil {
			t.Fatal(err)
		}
	})

	amComp := compImport{iface: abi.ModuleArtifacts, name: "describe", id: "describe"}
	capsuleMain := capsuleRun + ")\n"
	toolMain := `    (func (export "murmur:tool/run@0.1.0#run") (param i32 i32 i32 i32 i32 i32) (result i32) (i32.const 0))
    (func (export "cabi_post_murmur:tool/run@0.1.0#run") (param i32))
`
	t.Run("component script", func(t *testing.T) {
		spec := compSpec{world: "script", imports: []compImport{amComp}, main: capsuleMain}
		mod, err := Compile(ctx, e, "cap", "c", RoleCapsule, spec.build(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckWorld(mod, ScriptWorld); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("component tool", func(t *testing.T) {
		spec := compSpec{world: "tool", imports: []compImport{amComp}, main: toolMain}
		_, err := Compile(ctx, e, "cap", "c", manifest.RoleTool, spec.build(t))
		says := "imports " + abi.ModuleArtifacts + ", which is not offered to a tool"
		if errs.Find(err, wasm.CodeCompImport) == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("want %s saying %q, got %v", wasm.CodeCompImport, says, err)
		}
	})
}
