package murmur

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/runtime/wasm"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// murmur:artifact-manager/manage@0.1.0 (docs/reference/guest-abi.md
// "murmur:artifact-manager/manage"), offered to script capsules only. Every refusal is
// the result's err string, never a trap: the manager's error verbatim, or
// errArtifactsNotGranted when the call has no manager. list has no error channel: it
// answers an ungranted capsule with an empty list.

// artifactsInterface is the interface components import, without its version.
const artifactsInterface = "murmur:artifact-manager/manage"

// errArtifactsNotGranted is the err string of every call of a capsule without a manager.
const errArtifactsNotGranted = "not-granted: this capsule may not manage artifacts"

// artifactFuncs serve the interface's functions, to core modules and components alike.
var artifactFuncs = []wasm.HostFunc{
	hostFunc(abi.ImportAMList, abi.AMList, importAMList),
	hostFunc(abi.ImportAMDescribe, abi.AMDescribe, importAMDescribe),
	hostFunc(abi.ImportAMSearch, abi.AMSearch, importAMSearch),
	hostFunc(abi.ImportAMPull, abi.AMPull, importAMPull),
	hostFunc(abi.ImportAMRemove, abi.AMRemove, importAMRemove),
	hostFunc(abi.ImportAMDiagnose, abi.AMDiagnose, importAMDiagnose),
}

// amErr is a result<_, string> holding msg.
func amErr(msg string) []any { return []any{abi.Result{Err: true, Value: msg}} }

// amResult is the result of a manager's answer: err's message, or ok with v's value
// when v can be lowered; a value that cannot (a runtime type out of range, a string
// not UTF-8) is the manager's fault, returned as an err string rather than a trap.
func amResult(err error, check func() error, value func() any) []any {
	if err != nil {
		return amErr(err.Error())
	}
	if err := check(); err != nil {
		return amErr("artifact-manager: the host's answer cannot be passed to the guest: " + err.Error())
	}
	return []any{abi.Result{Value: value()}}
}

func checkSummaries(ss []abi.ArtifactSummary) func() error {
	return func() error {
		for _, s := range ss {
			if err := s.Check(); err != nil {
				return err
			}
		}
		return nil
	}
}

func importAMList(ctx context.Context, h *Imports, _ []any) ([]any, error) {
	if h.Artifacts == nil {
		return []any{[]any{}}, nil
	}
	list := h.Artifacts.List(ctx)
	if err := checkSummaries(list)(); err != nil {
		// list has no error channel: a host answer that cannot be lowered traps.
		return nil, fmt.Errorf("artifact-manager: list: the host's answer cannot be passed to the guest: %w", err)
	}
	return []any{abi.SummariesValue(list)}, nil
}

func importAMDescribe(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.Artifacts == nil {
		return amErr(errArtifactsNotGranted), nil
	}
	info, err := h.Artifacts.Describe(ctx, a[0].(string))
	return amResult(err, info.Check, info.Value), nil
}

func importAMSearch(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.Artifacts == nil {
		return amErr(errArtifactsNotGranted), nil
	}
	list, err := h.Artifacts.Search(ctx, a[0].(string))
	return amResult(err, checkSummaries(list), func() any { return abi.SummariesValue(list) }), nil
}

func importAMPull(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.Artifacts == nil {
		return amErr(errArtifactsNotGranted), nil
	}
	s, err := h.Artifacts.Pull(ctx, a[0].(string), a[1].(string))
	return amResult(err, s.Check, s.Value), nil
}

func importAMRemove(ctx context.Context, h *Imports, a []any) ([]any, error) {
	if h.Artifacts == nil {
		return amErr(errArtifactsNotGranted), nil
	}
	removed, err := h.Artifacts.Remove(ctx, a[0].(string))
	return amResult(err, func() error { return nil }, func() any { return removed }), nil
}

func importAMDiagnose(ctx context.Context, h *Imports, _ []any) ([]any, error) {
	if h.Artifacts == nil {
		return amErr(errArtifactsNotGranted), nil
	}
	st, err := h.Artifacts.Diagnostics(ctx)
	return amResult(err, st.Check, st.Value), nil
}
