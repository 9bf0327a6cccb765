package runtime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/guestbuild"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/registry"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// stageFake answers on-stage with out and ms (or err), or waits for its deadline, and
// records the stage-events it was handed.
type stageFake struct {
	out  HookOutput
	ms   []ToolManifest
	err  error
	wait bool
	recs []StageRecord
}

func (f *stageFake) Call(ctx context.Context, fn string, record any) (HookOutput, error) {
	out, _, err := f.CallStage(ctx, record.(StageRecord))
	return out, err
}

func (f *stageFake) CallStage(ctx context.Context, rec StageRecord) (HookOutput, []ToolManifest, error) {
	f.recs = append(f.recs, rec)
	if f.wait {
		<-ctx.Done()
		return HookOutput{}, nil, ctx.Err()
	}
	return f.out, f.ms, f.err
}

// toolYAML is a tool manifest describing binary b as desc.
func toolYAML(b, desc string) string {
	return "name: " + b + "\nversion: 1.0.0\ndescription: " + desc +
		"\ninput_schema: {type: object, properties: {command: {type: string}}, required: [command]}\n"
}

// TestRunStageHooks: each hook is handed the capsule's shell.allow; a write-manifests
// answer under commit_policy write-manifests describes allowed binaries (the later hook
// winning a binary both describe); everything else is a warning with its code and
// nothing of that hook's answer applied, and staging never fails.
func TestRunStageHooks(t *testing.T) {
	const honoured = "binding: on-stage\ncommit_policy: write-manifests\n"
	write := func(ms ...ToolManifest) *stageFake {
		return &stageFake{out: HookOutput{Case: OutputWriteManifests}, ms: ms}
	}
	jq := ToolManifest{"jq", toolYAML("jq", "queries JSON")}
	tests := []struct {
		name  string
		keys  []string // each hook's manifest keys
		fakes []*stageFake
		want  map[string]string // binary: description offered
		codes []string          // warnings, in order
		says  []string          // what the warnings say
	}{
		{"honoured", []string{honoured}, []*stageFake{write(jq)}, map[string]string{"jq": "queries JSON"}, nil, nil},
		{"none", []string{honoured}, []*stageFake{{out: HookOutput{Case: OutputNone}}}, map[string]string{}, nil, nil},
		{"later hook wins", []string{honoured, honoured},
			[]*stageFake{write(jq, ToolManifest{"git", toolYAML("git", "versions files")}), write(ToolManifest{"jq", toolYAML("jq", "the second word on jq")})},
			map[string]string{"jq": "the second word on jq", "git": "versions files"}, nil, nil},
		{"not in shell.allow", []string{honoured}, []*stageFake{write(jq, ToolManifest{"curl", toolYAML("curl", "fetches")})}, map[string]string{},
			[]string{WarnStageShellNotAllowed}, []string{`hook h0 wrote a tool manifest for "curl", which is not in capabilities.shell.allow (jq, git)`}},
		{"not YAML", []string{honoured}, []*stageFake{write(jq, ToolManifest{"git", "name: [git\n"})}, map[string]string{},
			[]string{WarnStageManifest}, []string{"hook h0 wrote a tool manifest for git that is not usable, so none of its manifests was applied: manifest: E-MAN-001 h0: tool manifest of git:1: not valid YAML"}},
		{"no version", []string{honoured}, []*stageFake{write(ToolManifest{"git", "name: git\n"})}, map[string]string{},
			[]string{WarnStageManifest}, []string{"version"}},
		{"no command in the schema", []string{honoured}, []*stageFake{write(ToolManifest{"git", "name: git\nversion: 1.0.0\ninput_schema: {type: object, properties: {args: {type: array}}}\n"})}, map[string]string{},
			[]string{WarnStageManifest}, []string{"no properties.command"}},
		{"commit_policy none", []string{"binding: on-stage\n"}, []*stageFake{write(jq)}, map[string]string{},
			[]string{WarnStageHookAnswer}, []string{"answered write-manifests, and its commit_policy is none"}},
		{"deny at on-stage", []string{honoured}, []*stageFake{{out: HookOutput{Case: OutputDeny, Text: "no"}}}, map[string]string{},
			[]string{WarnStageHookAnswer}, []string{"answered deny, which staging never honours"}},
		{"err, and the next hook still runs", []string{honoured, honoured}, []*stageFake{{err: errString("hook h0 answered err: broken")}, write(jq)},
			map[string]string{"jq": "queries JSON"}, []string{WarnStageHookFailed}, []string{"on-stage hook h0 failed, and staging went on without its answer: hook h0 answered err: broken"}},
		{"deadline", []string{honoured}, []*stageFake{{wait: true}}, map[string]string{}, []string{WarnStageHookFailed}, []string{"no answer within 1ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hooks []*Hook
			for i, f := range tt.fakes {
				hooks = append(hooks, &Hook{Name: "h" + string(rune('0'+i)), Manifest: hookManifest(t, tt.keys[i]), Guest: f, Deadline: time.Millisecond})
			}
			allow := []string{"jq", "git"}
			tools, warns := runStageHooks(context.Background(), allow, hooks)
			got := map[string]string{}
			for b, st := range tools {
				got[b] = st.Description
				if st.Binary != b || !strings.Contains(string(st.InputSchema), `"command"`) {
					t.Errorf("%s: %+v", b, st)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("shell tools %v, want %v", got, tt.want)
			}
			var codes []string
			for i, w := range warns {
				codes = append(codes, w.Code)
				if i < len(tt.says) && !strings.Contains(w.Error(), tt.says[i]) {
					t.Errorf("warning %q lacks %q", w.Error(), tt.says[i])
				}
			}
			if !reflect.DeepEqual(codes, tt.codes) {
				t.Errorf("warnings %v (%v), want %v", codes, warns, tt.codes)
			}
			for _, f := range tt.fakes {
				if len(f.recs) != 1 || !reflect.DeepEqual(f.recs[0].ShellAllow, allow) {
					t.Errorf("stage-events handed: %+v, want one with shell-allow %v", f.recs, allow)
				}
			}
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

// TestOnStageHookDescribesShellTools stages capsules with the stagehook guest (it writes
// a tool manifest for every shell.allow binary): honoured, the model is offered each
// binary with the hook's description and schema, in the driver's input and in
// MURMUR.md, the same on every staging; refused (a binary not allowed, content that is
// not YAML, no commit_policy write-manifests, a hook answering err), staging succeeds
// with the warning and the binaries keep their default definition.
func TestOnStageHookDescribesShellTools(t *testing.T) {
	e, _ := newRuntime(t, wasm.WithCacheDir(guestbuild.WazeroCache()))
	reg := registry.NewLocal(filepath.Join(t.TempDir(), "reg"))
	publishWasm(t, reg, "recdriver", "driver", guestbuild.Wasm(t, "../internal/testkit/testguests/recdriver"))
	publishHook(t, reg, "describer", "../internal/testkit/testguests/stagehook", "binding: on-stage\ncommit_policy: write-manifests\n")
	publishHook(t, reg, "unbound", "../internal/testkit/testguests/stagehook", "")
	tests := []struct {
		name, hook string
		allow      string
		described  bool   // jq offered as the hook describes it
		code, says string // the warning drawn
	}{
		{"honoured", "describer", "jq, git", true, "", ""},
		{"binary not allowed", "describer", "jq, sneak", false, WarnStageShellNotAllowed, `on-stage hook describer wrote a tool manifest for "curl", which is not in capabilities.shell.allow (jq, sneak)`},
		{"bad manifest", "describer", "jq, badyaml", false, WarnStageManifest, "on-stage hook describer wrote a tool manifest for badyaml that is not usable"},
		{"no commit_policy write-manifests", "unbound", "jq", false, WarnStageHookAnswer, "on-stage hook unbound answered write-manifests, and its commit_policy is none: not honoured"},
		{"hook errs", "describer", "jq, boom", false, WarnStageHookFailed, "on-stage hook describer failed, and staging went on without its answer: hook describer answered err: stagehook: asked to fail"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mpath := filepath.Join(t.TempDir(), "murmur.yaml")
			os.WriteFile(mpath, []byte(`name: described
version: 1.0.0
artifacts:
  - {name: recdriver, version: 1.0.0, runtime: driver}
  - {name: `+tt.hook+`, version: 1.0.0, runtime: hook}
inference: {driver: {artifact: recdriver}, model: m, max_turns: 2}
capabilities:
  limits: {memory_bytes: 134217728, deadline_seconds: 60}
  shell: {allow: [`+tt.allow+`]}
`), 0o644)
			m, err := manifest.Load(mpath)
			if err != nil {
				t.Fatal(err)
			}
			var runs [2]*Staged
			for i := range runs {
				if runs[i], err = e.Stage(context.Background(), m, StageOptions{Registry: reg}); err != nil {
					t.Fatal(err)
				}
			}
			s := runs[0]
			if !reflect.DeepEqual(s.ShellTools, runs[1].ShellTools) || len(s.Warnings) != len(runs[1].Warnings) {
				t.Errorf("two stagings differ: %v %v / %v %v", s.ShellTools, s.Warnings, runs[1].ShellTools, runs[1].Warnings)
			}
			var codes []string
			for _, w := range s.Warnings {
				codes = append(codes, w.Code)
				if w.Code == tt.code && !strings.Contains(w.Error(), tt.says) {
					t.Errorf("warning %q lacks %q", w.Error(), tt.says)
				}
			}
			if tt.code != "" && errs.Find(errs.List(s.Warnings), tt.code) == nil || tt.code == "" && len(codes) > 0 {
				t.Errorf("warnings %v, want %q", codes, tt.code)
			}

			tools := map[string]agentTool{}
			for _, tool := range (&session{staged: s}).offeredTools() {
				tools[tool.Name] = tool
			}
			jq := tools["jq"]
			hooked := jq.Description == "jq as stagehook describes it" && strings.Contains(string(jq.Parameters), `"arguments for jq"`)
			if hooked != tt.described || !tt.described && jq.Description != "Runs jq in the workdir" {
				t.Errorf("jq offered as %+v (schema %s); described by the hook: %v, want %v", jq, jq.Parameters, hooked, tt.described)
			}
			if md := string(murmurMD(s, "ses_x", "")); strings.Contains(md, "jq as stagehook describes it") != tt.described {
				t.Errorf("MURMUR.md, hook description shown: want %v:\n%s", tt.described, md)
			}
			if !tt.described {
				return
			}
			if git := tools["git"]; git.Description != "git as stagehook describes it" {
				t.Errorf("git offered as %+v", git)
			}
			// The driver's input: what the model is actually offered.
			self, err := os.Executable()
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.RunOnce(context.Background(), m, RunOptions{Registry: reg, Task: "hello",
				Session: SessionConfig{WorkRoot: t.TempDir(), SandboxHelper: self}})
			if err != nil || res.Status != StateCompleted {
				t.Fatalf("%+v, %v", res, err)
			}
			data, err := os.ReadFile(filepath.Join(res.Workdir, "out", "driver-inputs.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var in struct {
				Tools []struct {
					Name, Description string
					Parameters        json.RawMessage `json:"parameters"`
				} `json:"tools"`
			}
			if err := json.Unmarshal([]byte(strings.SplitN(string(data), "\n", 2)[0]), &in); err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, tool := range in.Tools {
				if tool.Name == "jq" {
					found = tool.Description == "jq as stagehook describes it" && strings.Contains(string(tool.Parameters), `"arguments for jq"`)
				}
			}
			if !found {
				t.Errorf("the driver was not offered jq as the hook describes it: %s", data)
			}
		})
	}
}
