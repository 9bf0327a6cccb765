package abi

import (
	"context"
	"reflect"
	"strings"
	"testing"
)

func sampleInfo() ArtifactInfo {
	return ArtifactInfo{Name: "grep", Version: "1.2.0", Description: "searches", Tags: []string{"text", "search"},
		Runtime: RuntimeNative, InputSchema: ptr(`{"type":"object"}`)}
}

func sampleState() RuntimeState {
	return RuntimeState{CapsuleID: "cap-1", Capabilities: `{"network":[]}`,
		Installed: []ArtifactSummary{{Name: "a", Version: "0.1.0"}, {Name: "b", Version: "2.0.0", Runtime: RuntimeNative}}}
}

// TestArtifactValues lowers each artifact-manager record through memory and back and
// converts it to its Go type again.
func TestArtifactValues(t *testing.T) {
	ctx := context.Background()
	roundTrip := func(t *testing.T, typ *Type, v any) any {
		t.Helper()
		m := newMem(1 << 16)
		a := newBump(m, 8)
		p, err := a.realloc(ctx, 0, 0, typ.align, typ.size)
		if err != nil {
			t.Fatal(err)
		}
		if err := store(ctx, m, a.realloc, typ, p, v); err != nil {
			t.Fatalf("store: %v", err)
		}
		got, err := load(m, typ, p, limits{})
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		return got
	}
	t.Run("summary", func(t *testing.T) {
		want := ArtifactSummary{Name: "x", Version: "1.0.0", Runtime: RuntimeNative}
		got, err := ToArtifactSummary(roundTrip(t, ArtifactSummaryType, want.Value()))
		if err != nil || got != want {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("summaries", func(t *testing.T) {
		want := sampleState().Installed
		got, err := ToArtifactSummaries(roundTrip(t, List(ArtifactSummaryType), SummariesValue(want)))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("info", func(t *testing.T) {
		want := sampleInfo()
		got, err := ToArtifactInfo(roundTrip(t, ArtifactInfoType, want.Value()))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("state", func(t *testing.T) {
		want := sampleState()
		got, err := ToRuntimeState(roundTrip(t, RuntimeStateType, want.Value()))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v %v", got, err)
		}
	})
	t.Run("empty state", func(t *testing.T) {
		got, err := ToRuntimeState(roundTrip(t, RuntimeStateType, RuntimeState{}.Value()))
		if err != nil || got.CapsuleID != "" || len(got.Installed) != 0 {
			t.Fatalf("%+v %v", got, err)
		}
	})
}

// TestArtifactLayouts pins the canonical ABI layouts of the artifact manager's records
// and return areas, which the guest SDK (wit/guest/artifacts) reads by offset.
func TestArtifactLayouts(t *testing.T) {
	for _, tc := range []struct {
		name        string
		typ         *Type
		size, align uint32
	}{
		{"runtime-type", RuntimeTypeType, 1, 1},
		{"artifact-summary", ArtifactSummaryType, 20, 4},
		{"artifact-info", ArtifactInfoType, 60, 4},
		{"runtime-state", RuntimeStateType, 24, 4},
		{"list result", AMList.rt, 8, 4},
		{"describe result", AMDescribe.rt, 64, 4},
		{"search result", AMSearch.rt, 12, 4},
		{"pull result", AMPull.rt, 24, 4},
		{"remove result", AMRemove.rt, 12, 4},
		{"diagnostics result", AMDiagnose.rt, 28, 4},
	} {
		if tc.typ.size != tc.size || tc.typ.align != tc.align {
			t.Errorf("%s: size %d align %d, want %d and %d", tc.name, tc.typ.size, tc.typ.align, tc.size, tc.align)
		}
	}
	for name, f := range map[string]*Func{"list": AMList, "describe": AMDescribe, "search": AMSearch, "pull": AMPull, "remove": AMRemove, "diagnostics": AMDiagnose} {
		if !f.resultsSpill() {
			t.Errorf("%s: results do not spill to a return area", name)
		}
	}
}

func TestArtifactCheck(t *testing.T) {
	bad := "\xff"
	for _, tc := range []struct {
		name string
		err  error
		says string
	}{
		{"runtime out of range", ArtifactSummary{Runtime: 2}.Check(), "runtime type 2"},
		{"summary name", ArtifactSummary{Name: bad}.Check(), "invalid UTF-8"},
		{"info tag", ArtifactInfo{Tags: []string{bad}}.Check(), "invalid UTF-8"},
		{"info schema", ArtifactInfo{OutputSchema: &bad}.Check(), "invalid UTF-8"},
		{"state installed", RuntimeState{Installed: []ArtifactSummary{{Runtime: 9}}}.Check(), "runtime type 9"},
		{"state id", RuntimeState{CapsuleID: bad}.Check(), "invalid UTF-8"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.says) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.says)
		}
	}
	for _, err := range []error{sampleInfo().Check(), sampleState().Check(), ArtifactSummary{Name: "é"}.Check()} {
		if err != nil {
			t.Error(err)
		}
	}
	if RuntimeNative.String() != "native" || RuntimeType(5).String() != "runtime-type(5)" {
		t.Error(RuntimeNative, RuntimeType(5))
	}
}
