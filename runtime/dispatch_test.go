package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// dispatchSession is a session whose tools are declared by hand: one name, "jq", as each
// of the kinds listed, and "other" as a wasm tool. Nothing runs; it is for resolution.
func dispatchSession(kinds []string, stream *Stream) *session {
	m := &manifest.Manifest{Name: "cap"}
	st := &Staged{Manifest: m, Modules: map[string]*wasm.Module{"other": {Role: string(manifest.RoleTool)}}}
	st.Artifacts = append(st.Artifacts, registry.Resolved{Name: "other", Role: manifest.RoleTool})
	s := &session{staged: st, stream: stream}
	for _, k := range kinds {
		switch k {
		case KindNative:
			s.shell = &shellTools{natives: map[string]string{"jq": "/tools/jq/jq"}}
			st.Artifacts = append(st.Artifacts, registry.Resolved{Name: "jq", Role: manifest.RoleTool})
		case KindShell:
			m.Capabilities.Shell.Allow = append(m.Capabilities.Shell.Allow, "jq")
			if s.shell == nil {
				s.shell = &shellTools{natives: map[string]string{}}
			}
		case KindSkill:
			st.Artifacts = append(st.Artifacts, registry.Resolved{Name: "jq", Role: manifest.RoleSkill, Text: []byte("use jq -r")})
		case KindWasm:
			st.Modules["jq"] = &wasm.Module{Role: string(manifest.RoleTool)}
			st.Artifacts = append(st.Artifacts, registry.Resolved{Name: "jq", Role: manifest.RoleTool})
		}
	}
	return s
}

// TestDispatchPrecedence declares one name as several kinds at once and checks that a
// call of it runs the kind first in the order native, shell, skill, wasm
// (docs/reference/driver-protocol.md "Dispatch"), and that the model is offered the name
// once, as that kind.
func TestDispatchPrecedence(t *testing.T) {
	tests := []struct {
		name     string
		declared []string
		want     string
		desc     string // the description offered for jq
	}{
		{"all four kinds", []string{KindWasm, KindSkill, KindShell, KindNative}, KindNative, ""},
		{"native over shell", []string{KindShell, KindNative}, KindNative, ""},
		{"shell over skill and wasm", []string{KindWasm, KindSkill, KindShell}, KindShell, "Runs jq in the workdir"},
		{"shell over skill", []string{KindSkill, KindShell}, KindShell, "Runs jq in the workdir"},
		{"shell over wasm", []string{KindWasm, KindShell}, KindShell, "Runs jq in the workdir"},
		{"skill over wasm", []string{KindWasm, KindSkill}, KindSkill, "Returns the skill's text: jq"},
		{"native alone", []string{KindNative}, KindNative, ""},
		{"shell alone", []string{KindShell}, KindShell, "Runs jq in the workdir"},
		{"skill alone", []string{KindSkill}, KindSkill, "Returns the skill's text: jq"},
		{"wasm alone", []string{KindWasm}, KindWasm, ""},
		{"declared nowhere", nil, KindUnknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := dispatchSession(tt.declared, nil)
			if got := s.toolKind("jq"); got != tt.want {
				t.Errorf("toolKind(jq) = %s, want %s", got, tt.want)
			}
			if got := s.toolKind("other"); got != KindWasm {
				t.Errorf("toolKind(other) = %s, want wasm", got)
			}
			var offered []agentTool
			for _, tool := range s.offeredTools() {
				if tool.Name == "jq" {
					offered = append(offered, tool)
				}
			}
			switch {
			case tt.want == KindUnknown && len(offered) != 0:
				t.Errorf("jq is declared nowhere but offered: %+v", offered)
			case tt.want != KindUnknown && len(offered) != 1:
				t.Fatalf("jq offered %d times: %+v", len(offered), offered)
			case tt.want != KindUnknown && offered[0].Description != tt.desc:
				t.Errorf("jq offered as %q, want %q", offered[0].Description, tt.desc)
			}
		})
	}
}

// TestManifestAcceptsOneNameAsTwoKinds pins the rule the precedence serves: artifact names
// are unique across kinds (E-MAN-010), but a shell.allow binary may share its name with an
// artifact, which dispatch then shadows unless it is a native tool.
func TestManifestAcceptsOneNameAsTwoKinds(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "jq.md"), []byte("use jq -r"), 0o644)
	tests := []struct {
		name, artifacts, code string
	}{
		{"shell and skill", "  - {name: jq, runtime: skill, source: jq.md}\n", ""},
		{"shell and tool", "  - {name: jq, version: 1.0.0}\n", ""},
		{"tool and skill", "  - {name: jq, version: 1.0.0}\n  - {name: jq, runtime: skill, source: jq.md}\n", manifest.CodeDuplicateArt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := "name: cap\nversion: 1.0.0\nartifacts:\n" + tt.artifacts + "capabilities:\n  shell: {allow: [jq]}\n"
			_, err := manifest.Parse([]byte(doc), filepath.Join(dir, "murmur.yaml"))
			if tt.code == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tt.code != "" && errs.Find(err, tt.code) == nil {
				t.Fatalf("got %v, want %s", err, tt.code)
			}
		})
	}
}

// recorder keeps the events it receives.
type recorder struct{ events []*Event }

func (r *recorder) Event(e *Event) error { r.events = append(r.events, e); return nil }

// TestDispatchRecordsEveryCall: a skill call and a call of an undeclared name are each a
// tool_call event and each counted in the session's total.
func TestDispatchRecordsEveryCall(t *testing.T) {
	rec := &recorder{}
	s := dispatchSession([]string{KindSkill}, NewStream("ses_test", rec))
	tk := &task{evt: "evt_task", turn: 2}
	calls := []struct {
		name, kind, status, says string
		isErr                    bool
	}{
		{"jq", KindSkill, "passed", "use jq -r", false},
		{"ghost", KindUnknown, "error", `no tool named "ghost" is declared in the manifest (declared: jq, other)`, true},
	}
	for i, c := range calls {
		out, isErr := s.dispatch(context.Background(), tk, agentBlock{Type: "tool_call", ID: "tc", Name: c.name, Input: json.RawMessage(`{"q":1}`)})
		if out != c.says || isErr != c.isErr {
			t.Errorf("%s: dispatch = %q, %v; want %q, %v", c.name, out, isErr, c.says, c.isErr)
		}
		if len(rec.events) != i+1 {
			t.Fatalf("%s: %d events after %d calls", c.name, len(rec.events), i+1)
		}
		e := rec.events[i]
		got, ok := e.Data.(ToolCall)
		if e.Type != EventToolCall || !ok || got.ToolName != c.name || got.Kind != c.kind || got.Status != c.status || got.Turn != 2 || e.ParentID != "evt_task" {
			t.Errorf("%s: event %s %+v under %s", c.name, e.Type, e.Data, e.ParentID)
		}
	}
	if n := s.toolCalls.Load(); n != int64(len(calls)) {
		t.Errorf("tool calls counted: %d, want %d", n, len(calls))
	}
	if !strings.Contains(rec.events[1].Content["input"], `"q"`) {
		t.Errorf("the unknown call's input is not kept for capture content: %v", rec.events[1].Content)
	}
}
