package wasm

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/internal/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
)

// TestCallHookOnStage: the Go SDK exports on-stage; CallHook lowers a stage-event (the
// shell-allow list) and lifts a write-manifests answer with every tool-manifest, in the
// guest's order; the guest's err is an answer; a hook without a Stage handler answers none.
func TestCallHookOnStage(t *testing.T) {
	e, _ := newEngine(t)
	ctx := context.Background()
	stage, err := e.Compile(ctx, "cap", "stage", manifest.RoleHook, guestbuild.Wasm(t, "../../internal/testguests/stagehook"))
	if err != nil {
		t.Fatal(err)
	}
	policy, err := e.Compile(ctx, "cap", "policy", manifest.RoleHook, guestbuild.Wasm(t, "../../internal/testguests/policyhook"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*Module{stage, policy} {
		if err := m.CheckHook(manifest.BindStage); err != nil {
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
		mod    *Module
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
			got, err := e.CallHook(ctx, tt.mod, Grants{MemoryBytes: 64 << 20}, manifest.BindStage, tt.record)
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
