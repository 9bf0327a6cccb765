package abi

import (
	"fmt"
	"unicode/utf8"
)

func (t RuntimeType) String() string {
	switch t {
	case RuntimeWasm:
		return "wasm"
	case RuntimeNative:
		return "native"
	}
	return fmt.Sprintf("runtime-type(%d)", uint32(t))
}

// Value is s's generic value, of ArtifactSummaryType.
func (s ArtifactSummary) Value() any {
	return []any{s.Name, s.Version, uint32(s.Runtime)}
}

// Value is i's generic value, of ArtifactInfoType.
func (i ArtifactInfo) Value() any {
	tags := make([]any, len(i.Tags))
	for k, t := range i.Tags {
		tags[k] = t
	}
	return []any{i.Name, i.Version, i.Description, tags, uint32(i.Runtime), optValue(i.InputSchema), optValue(i.OutputSchema)}
}

// Value is r's generic value, of RuntimeStateType.
func (r RuntimeState) Value() any {
	return []any{r.CapsuleID, SummariesValue(r.Installed), r.Capabilities}
}

// SummariesValue is the generic value of ss, of List(ArtifactSummaryType).
func SummariesValue(ss []ArtifactSummary) []any {
	vals := make([]any, len(ss))
	for i, s := range ss {
		vals[i] = s.Value()
	}
	return vals
}

// Check reports what of s cannot be lowered: a runtime type out of range or a string
// that is not UTF-8.
func (s ArtifactSummary) Check() error {
	return checkArtifact(ArtifactSummaryType, s.Runtime, s.Name, s.Version)
}

// Check reports what of i cannot be lowered, as ArtifactSummary.Check.
func (i ArtifactInfo) Check() error {
	strs := append([]string{i.Name, i.Version, i.Description}, i.Tags...)
	for _, p := range []*string{i.InputSchema, i.OutputSchema} {
		if p != nil {
			strs = append(strs, *p)
		}
	}
	return checkArtifact(ArtifactInfoType, i.Runtime, strs...)
}

// Check reports what of r cannot be lowered, as ArtifactSummary.Check.
func (r RuntimeState) Check() error {
	for _, s := range r.Installed {
		if err := s.Check(); err != nil {
			return err
		}
	}
	return checkArtifact(RuntimeStateType, RuntimeWasm, r.CapsuleID, r.Capabilities)
}

func checkArtifact(t *Type, rt RuntimeType, strs ...string) error {
	if rt > RuntimeNative {
		return valueErr(t, "runtime type %d is neither wasm nor native", uint32(rt))
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return valueErr(t, "invalid UTF-8 in %q", s)
		}
	}
	return nil
}

// ToArtifactSummary converts a lifted value of ArtifactSummaryType.
func ToArtifactSummary(v any) (ArtifactSummary, error) {
	f, err := fields(ArtifactSummaryType, v)
	if err != nil {
		return ArtifactSummary{}, err
	}
	name, ok1 := f[0].(string)
	ver, ok2 := f[1].(string)
	if !ok1 || !ok2 {
		return ArtifactSummary{}, valueErr(ArtifactSummaryType, "got %v", v)
	}
	rt, err := toRuntimeType(f[2])
	if err != nil {
		return ArtifactSummary{}, err
	}
	return ArtifactSummary{Name: name, Version: ver, Runtime: rt}, nil
}

// ToArtifactSummaries converts a lifted value of List(ArtifactSummaryType).
func ToArtifactSummaries(v any) ([]ArtifactSummary, error) {
	vals, ok := v.([]any)
	if !ok {
		return nil, valueErr(List(ArtifactSummaryType), "got %T", v)
	}
	out := make([]ArtifactSummary, len(vals))
	for i, e := range vals {
		s, err := ToArtifactSummary(e)
		if err != nil {
			return nil, at(err, fmt.Sprintf("[%d]", i))
		}
		out[i] = s
	}
	return out, nil
}

// ToArtifactInfo converts a lifted value of ArtifactInfoType.
func ToArtifactInfo(v any) (ArtifactInfo, error) {
	f, err := fields(ArtifactInfoType, v)
	if err != nil {
		return ArtifactInfo{}, err
	}
	var i ArtifactInfo
	for k, dst := range []*string{&i.Name, &i.Version, &i.Description} {
		s, ok := f[k].(string)
		if !ok {
			return ArtifactInfo{}, valueErr(ArtifactInfoType, "field %d: got %T", k, f[k])
		}
		*dst = s
	}
	tags, ok := f[3].([]any)
	if !ok {
		return ArtifactInfo{}, valueErr(List(String), "got %T", f[3])
	}
	i.Tags = make([]string, len(tags))
	for k, t := range tags {
		if i.Tags[k], ok = t.(string); !ok {
			return ArtifactInfo{}, valueErr(List(String), "element %d: got %T", k, t)
		}
	}
	if i.Runtime, err = toRuntimeType(f[4]); err != nil {
		return ArtifactInfo{}, err
	}
	if i.InputSchema, err = toOptString(f[5]); err != nil {
		return ArtifactInfo{}, err
	}
	if i.OutputSchema, err = toOptString(f[6]); err != nil {
		return ArtifactInfo{}, err
	}
	return i, nil
}

// ToRuntimeState converts a lifted value of RuntimeStateType.
func ToRuntimeState(v any) (RuntimeState, error) {
	f, err := fields(RuntimeStateType, v)
	if err != nil {
		return RuntimeState{}, err
	}
	id, ok1 := f[0].(string)
	caps, ok2 := f[2].(string)
	if !ok1 || !ok2 {
		return RuntimeState{}, valueErr(RuntimeStateType, "got %v", v)
	}
	installed, err := ToArtifactSummaries(f[1])
	if err != nil {
		return RuntimeState{}, err
	}
	return RuntimeState{CapsuleID: id, Installed: installed, Capabilities: caps}, nil
}

func toRuntimeType(v any) (RuntimeType, error) {
	x, ok := v.(uint32)
	if !ok || x > uint32(RuntimeNative) {
		return 0, valueErr(RuntimeTypeType, "got %v", v)
	}
	return RuntimeType(x), nil
}
