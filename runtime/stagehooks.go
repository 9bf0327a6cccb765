package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/manifest"
	"github.com/capsulegate/capsulegate/runtime/wasm"
)

// StageRecord is murmur:hook's stage-event: the capsule's capabilities.shell.allow, in
// manifest order.
type StageRecord struct{ ShellAllow []string }

// ToolManifest is murmur:hook's tool-manifest: Content is the murmur.yaml of a tool
// named BinaryName, describing that shell binary to the model.
type ToolManifest struct{ BinaryName, Content string }

// StageGuest is a HookGuest that also answers on-stage with write-manifests' payload,
// which a HookOutput does not carry. A HookGuest that is not one answers on-stage
// through Call, and any write-manifests it answers has no manifests.
type StageGuest interface {
	CallStage(ctx context.Context, record StageRecord) (HookOutput, []ToolManifest, error)
}

// ShellTool is how a shell binary is offered to the model once an on-stage hook
// described it (write-manifests): its description and input_schema replace the default
// ones where set.
type ShellTool struct {
	Binary      string
	Description string
	// InputSchema is the tool manifest's input_schema as JSON; nil keeps the default
	// {"command": string}.
	InputSchema json.RawMessage
}

// CallStage calls on-stage with record and returns the answer and, for write-manifests,
// its manifests; the guest's err(string) is an error, as in Call.
func (w *wasmHook) CallStage(ctx context.Context, record StageRecord) (HookOutput, []ToolManifest, error) {
	ans, err := w.answer(ctx, manifest.BindStage, record)
	var ms []ToolManifest
	for _, m := range ans.Manifests {
		ms = append(ms, ToolManifest{BinaryName: m.BinaryName, Content: m.Content})
	}
	return HookOutput{Case: ans.Case, Text: ans.Text}, ms, err
}

// stageHooks are s's blocking hooks bound to on-stage or to every event, in manifest
// order. At stage there is no session, so a hook is granted no folder at all.
func (r *Runtime) stageHooks(s *Staged) []*Hook {
	m := s.Manifest
	var hooks []*Hook
	for _, a := range s.Artifacts {
		mod := s.Hooks[a.Name]
		if a.Role != manifest.RoleHook || mod == nil || a.Archive == nil {
			continue
		}
		am := a.Archive.Manifest()
		if am.ExecutionMode == manifest.ModeAsync || !am.Binds(manifest.BindStage) {
			continue
		}
		// The entry's own limits bound it here as in a session (docs/reference/manifest.md
		// "Hook grants"); what else the entry grants needs a session.
		ref := m.Artifact(a.Name)
		d := m.HookDeadline(ref)
		g := wasm.Grants{MemoryBytes: m.HookMemory(ref), Deadline: d, Snapshot: snapshotPolicy(ref)}
		hooks = append(hooks, &Hook{Name: a.Name, Manifest: am, Guest: &wasmHook{engine: r.engine, mod: mod, grants: g}, Deadline: d})
	}
	return hooks
}

// runStageHooks calls on-stage of each hook in order, with the capsule's shell.allow,
// and returns the shell tools their honoured write-manifests answers describe, by
// binary, and a warning for everything else they did. Upstream's rule: a hook failing,
// or answering what staging does not honour, is reported and never fails staging. A
// hook's manifests are applied all or none, so a binary is never half-described; of two
// hooks describing one binary, the later in manifest order wins.
func runStageHooks(ctx context.Context, allow []string, hooks []*Hook) (map[string]ShellTool, []*errs.Error) {
	tools := map[string]ShellTool{}
	var warns []*errs.Error
	rec := StageRecord{ShellAllow: slices.Clone(allow)}
	for _, hk := range hooks {
		out, ms, err := callStage(ctx, hk, rec)
		switch {
		case err != nil:
			why := err.Error()
			if errors.Is(err, context.DeadlineExceeded) {
				why = fmt.Sprintf("no answer within %s: %v", hk.Deadline, err)
			}
			warns = append(warns, errs.New(WarnStageHookFailed, "runtime",
				fmt.Sprintf("on-stage hook %s failed, and staging went on without its answer: %s", hk.Name, why),
				"fix the hook (its err answer, trap or deadline is in the message), or unbind it from on-stage"))
		case out.Case == OutputNone:
		case out.Case != OutputWriteManifests:
			warns = append(warns, errs.New(WarnStageHookAnswer, "runtime",
				fmt.Sprintf("on-stage hook %s answered %s, which staging never honours (only none, and write-manifests under commit_policy write-manifests)", hk.Name, out.Case),
				"answer none or write-manifests at on-stage"))
		case hk.Manifest.CommitPolicy != manifest.CommitWriteManifests:
			warns = append(warns, errs.New(WarnStageHookAnswer, "runtime",
				fmt.Sprintf("on-stage hook %s answered write-manifests, and its commit_policy is %s: not honoured", hk.Name, cmp.Or(hk.Manifest.CommitPolicy, manifest.CommitNone)),
				"give the hook binding: on-stage and commit_policy: write-manifests in its murmur.yaml, or answer none"))
		default:
			got, bad := shellToolsOf(hk.Name, allow, ms)
			if len(bad) > 0 {
				warns = append(warns, bad...)
				continue
			}
			for _, t := range got {
				tools[t.Binary] = t
			}
		}
	}
	return tools, warns
}

// callStage runs one on-stage call under the hook's deadline.
func callStage(ctx context.Context, hk *Hook, rec StageRecord) (HookOutput, []ToolManifest, error) {
	ctx, cancel := context.WithTimeout(ctx, hk.Deadline)
	defer cancel()
	if g, ok := hk.Guest.(StageGuest); ok {
		return g.CallStage(ctx, rec)
	}
	out, err := hk.Guest.Call(ctx, manifest.BindStage, rec)
	return out, nil, err
}

// shellToolsOf turns one hook's write-manifests payload into shell tools, or refuses
// each manifest that names a binary outside shell.allow or is not a tool manifest the
// shell runner can take (one warning each).
func shellToolsOf(hook string, allow []string, ms []ToolManifest) ([]ShellTool, []*errs.Error) {
	var tools []ShellTool
	var bad []*errs.Error
	for _, m := range ms {
		if !slices.Contains(allow, m.BinaryName) {
			bad = append(bad, errs.New(WarnStageShellNotAllowed, "runtime",
				fmt.Sprintf("on-stage hook %s wrote a tool manifest for %q, which is not in capabilities.shell.allow (%s): a hook describes only binaries the capsule allows; none of its manifests was applied",
					hook, m.BinaryName, strings.Join(allow, ", ")),
				"add the binary to capabilities.shell.allow, or have the hook describe allowed binaries only"))
			continue
		}
		am, _, err := manifest.ParseArtifactManifest([]byte(m.Content), hook+": tool manifest of "+m.BinaryName)
		if err == nil {
			err = shellSchemaErr(am.InputSchema)
		}
		if err != nil {
			w := errs.New(WarnStageManifest, "runtime",
				fmt.Sprintf("on-stage hook %s wrote a tool manifest for %s that is not usable, so none of its manifests was applied", hook, m.BinaryName),
				"write a murmur.yaml with name, version, description and an input_schema whose properties include command")
			w.Err = err
			bad = append(bad, w)
			continue
		}
		t := ShellTool{Binary: m.BinaryName, Description: am.Description}
		if am.InputSchema != nil {
			t.InputSchema = mustJSON(am.InputSchema)
		}
		tools = append(tools, t)
	}
	return tools, bad
}

// shellSchemaErr refuses an input_schema the shell runner cannot take: it reads the
// command line from the input's command, so a schema must offer that property.
func shellSchemaErr(schema map[string]any) error {
	if schema == nil {
		return nil
	}
	props, _ := schema["properties"].(map[string]any)
	if _, ok := props["command"]; !ok {
		return errors.New("its input_schema has no properties.command, the string a shell call runs")
	}
	return nil
}
