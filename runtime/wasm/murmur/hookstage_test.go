package murmur

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// TestCallHookOnStage: the Go SDK exports on-stage; CallHook lowers a stage-event (the
// shell-allow list) and lifts a write-manifests answer with every tool-manifest, in the
// guest's order; the guest's err is an answer; a hook without a Stage handler answers none.
func TestCallHookOnStage(t *testing.T) {
	e, _ := newEngine(t, sharedCache)
	ctx := context.Background()
	stage, err := Compile(ctx, e, "cap", "stage", manifest.RoleHook, guestbuild.Wasm(t, "../../../internal/testkit/testguests/stagehook"))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := Compile(ctx, e, "cap", "policy", manifest.RoleHook, guestbuild.Wasm(t, "../../../examples/guests/policy-hook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*wasm.Module{stage, policy} {
		if err := CheckHook(m, manifest.BindStage); err != nil {
			t.Fatalf("%s bound to on-stage: %v", m.Artifact, err)
		}
	}
	allow := func(bins ...string) any {
		l := make([]any, len(bins))
		for i, b := range bins {
			l[i] = b
		}
		return []any{l}
	}
	tests := []struct {
		name   string
		mod    *wasm.Module
		record any
		want   HookAnswer
		names  []string // the manifests' binary names, when want has none spelled out
	}{
		{"write-manifests", stage, allow("jq", "git"), HookAnswer{Case: "write-manifests"}, []string{"jq", "git"}},
		{"one more than allowed", stage, allow("sneak"), HookAnswer{Case: "write-manifests"}, []string{"sneak", "curl"}},
		{"empty list", stage, allow(), HookAnswer{Case: "write-manifests"}, nil},
		{"err", stage, allow("boom"), HookAnswer{Text: "stagehook: asked to fail", Failed: true}, nil},
		{"no Stage handler", policy, allow("jq"), HookAnswer{Case: "none"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CallHook(ctx, e, tt.mod, wasm.Grants{MemoryBytes: 64 << 20}, manifest.BindStage, tt.record)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, m := range got.Manifests {
				names = append(names, m.BinaryName)
				if !strings.Contains(m.Content, "description: "+m.BinaryName+" as stagehook describes it") {
					t.Errorf("manifest of %s: %q", m.BinaryName, m.Content)
				}
			}
			got.Manifests, got.Text = nil, strings.TrimSpace(got.Text)
			if tt.want.Case == "write-manifests" {
				got.Text = "" // the contents, joined: not what callers read
			}
			if !reflect.DeepEqual(got, tt.want) || !reflect.DeepEqual(names, tt.names) {
				t.Errorf("%+v with manifests %v; want %+v with %v", got, names, tt.want, tt.names)
			}
		})
	}
}

// stageMain is a hook component's main module whose on-stage answers
// ok(write-manifests([{binary-name: "jq", content: "name: jq\n"}])) whatever the
// shell-allow list: the list at 0x500, its one record's strings at 0x600 and 0x610.
const stageMain = `
    (data (i32.const 0x600) "jq")
    (data (i32.const 0x610) "name: jq\n")
    (func (export "murmur:hook/lifecycle@0.9.0#on-stage") (param i32 i32) (result i32)
      (i32.store8 (i32.const 0x100) (i32.const 0))
      (i32.store8 (i32.const 0x104) (i32.const 2))
      (i32.store (i32.const 0x108) (i32.const 0x500))
      (i32.store (i32.const 0x10c) (i32.const 1))
      (i32.store (i32.const 0x500) (i32.const 0x600))
      (i32.store (i32.const 0x504) (i32.const 2))
      (i32.store (i32.const 0x508) (i32.const 0x610))
      (i32.store (i32.const 0x50c) (i32.const 9))
      (i32.const 0x100))
`

// TestComponentHookOnStage: a hook component exporting on-stage (wit-component's shape)
// is accepted bound to on-stage, and CallHook lifts its write-manifests answer with the
// tool manifests, as for a core module.
func TestComponentHookOnStage(t *testing.T) {
	const iface = "murmur:hook/lifecycle@0.9.0"
	wat := "(component\n  (core module $main\n" + mainPrelude + stageMain + "  )\n" +
		"  (core instance $main-i (instantiate $main))\n" +
		"  (alias core export $main-i \"memory\" (core memory $memory))\n" +
		"  (alias core export $main-i \"cabi_realloc\" (core func $realloc))\n" +
		hookTypes +
		"  (type $stage-event (record (field \"shell-allow\" (list string))))\n" +
		"  (alias core export $main-i \"" + iface + "#on-stage\" (core func $core))\n" +
		"  (func $f (param \"event\" $stage-event) (result (result $hook-output (error string))) (canon lift (core func $core) (memory $memory) (realloc $realloc)))\n" +
		"  (instance $e" + hookTypeExports + " (export \"stage-event\" (type $stage-event)) (export \"on-stage\" (func $f)))\n" +
		"  (export \"" + iface + "\" (instance $e))\n)\n"
	e, _ := newEngine(t, sharedCache)
	ctx := context.Background()
	mod, err := Compile(ctx, e, "cap", "comp-stage", manifest.RoleHook, buildHookComp(t, wat))
	if err != nil {
		t.Fatal(err)
	}
	for _, binding := range []string{"", manifest.BindStage} {
		if err := CheckHook(mod, binding); err != nil {
			t.Errorf("bound to %q: %v", binding, err)
		}
	}
	got, err := CallHook(ctx, e, mod, wasm.Grants{MemoryBytes: 1 << 20}, manifest.BindStage, []any{[]any{"jq", "git"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Case != "write-manifests" || got.Failed || !reflect.DeepEqual(got.Manifests, []abi.ToolManifest{{BinaryName: "jq", Content: "name: jq\n"}}) {
		t.Errorf("on-stage answered %+v", got)
	}
}
