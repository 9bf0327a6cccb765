//go:build wasip1

package artifacts

import (
	"fmt"
	"runtime"

	"github.com/capsulegate/capsulegate/wit/guest"
	"github.com/capsulegate/capsulegate/wit/guest/internal/cabi"
)

// Every function's results spill into a return area the guest passes last: a
// result<T, string> is its discriminant at 0 and T (or the error string) from 4.

//go:wasmimport murmur:artifact-manager/manage@0.1.0 list
func listImport(ret uint32)

//go:wasmimport murmur:artifact-manager/manage@0.1.0 describe
func describeImport(namePtr, nameLen, ret uint32)

//go:wasmimport murmur:artifact-manager/manage@0.1.0 search
func searchImport(queryPtr, queryLen, ret uint32)

//go:wasmimport murmur:artifact-manager/manage@0.1.0 pull
func pullImport(namePtr, nameLen, versionPtr, versionLen, ret uint32)

//go:wasmimport murmur:artifact-manager/manage@0.1.0 remove
func removeImport(namePtr, nameLen, ret uint32)

//go:wasmimport murmur:artifact-manager/manage@0.1.0 diagnostics
func diagnosticsImport(ret uint32)

// Canonical ABI layouts (wasm32) of the records, pinned on the host by
// wit/abi's TestArtifactLayouts.
const (
	summarySize = 20 // name 0, version 8, runtime 16
	infoSize    = 60 // name 0, version 8, description 16, tags 24, runtime 32, input-schema 36, output-schema 48
	stateSize   = 24 // capsule-id 0, installed 8, capabilities 16
)

// List returns the artifacts installed for the capsule; an ungranted capsule gets an
// empty list. Its only error is a malformed answer from the host.
func List() ([]Summary, error) {
	ret, area := cabi.Aligned(8, 4)
	listImport(ret)
	out, err := takeSummaries(cabi.U32(area, 0), cabi.U32(area, 4))
	if err != nil {
		return nil, fmt.Errorf("guest: list: %w", err)
	}
	return out, nil
}

// Describe returns the installed artifact name, in full. A refusal is a *guest.HostError.
func Describe(name string) (Info, error) {
	var f cabi.Frame
	np, nn := f.String(name)
	ret, area := cabi.Aligned(4+infoSize, 4)
	describeImport(np, nn, ret)
	runtime.KeepAlive(&f)
	if err := check("describe", area); err != nil {
		return Info{}, err
	}
	info, err := takeInfo(area[4:])
	if err != nil {
		return Info{}, fmt.Errorf("guest: describe: %w", err)
	}
	return info, nil
}

// Search returns the artifacts the registry offers that match query. A refusal is a
// *guest.HostError.
func Search(query string) ([]Summary, error) {
	var f cabi.Frame
	qp, qn := f.String(query)
	ret, area := cabi.Aligned(12, 4)
	searchImport(qp, qn, ret)
	runtime.KeepAlive(&f)
	if err := check("search", area); err != nil {
		return nil, err
	}
	out, err := takeSummaries(cabi.U32(area, 4), cabi.U32(area, 8))
	if err != nil {
		return nil, fmt.Errorf("guest: search: %w", err)
	}
	return out, nil
}

// Pull installs version of name from the registry and returns what was installed. A
// refusal is a *guest.HostError.
func Pull(name, version string) (Summary, error) {
	var f cabi.Frame
	np, nn := f.String(name)
	vp, vn := f.String(version)
	ret, area := cabi.Aligned(4+summarySize, 4)
	pullImport(np, nn, vp, vn, ret)
	runtime.KeepAlive(&f)
	if err := check("pull", area); err != nil {
		return Summary{}, err
	}
	s, err := takeSummary(area[4:])
	if err != nil {
		return Summary{}, fmt.Errorf("guest: pull: %w", err)
	}
	return s, nil
}

// Remove uninstalls name and reports whether it was installed. A refusal is a
// *guest.HostError.
func Remove(name string) (bool, error) {
	var f cabi.Frame
	np, nn := f.String(name)
	ret, area := cabi.Aligned(12, 4)
	removeImport(np, nn, ret)
	runtime.KeepAlive(&f)
	if err := check("remove", area); err != nil {
		return false, err
	}
	switch area[4] {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("guest: remove: bool %d", area[4])
}

// Diagnostics returns the runtime's state as the capsule sees it. A refusal is a
// *guest.HostError.
func Diagnostics() (RuntimeState, error) {
	ret, area := cabi.Aligned(4+stateSize, 4)
	diagnosticsImport(ret)
	if err := check("diagnostics", area); err != nil {
		return RuntimeState{}, err
	}
	b := area[4:]
	var st RuntimeState
	var err error
	if st.CapsuleID, err = cabi.TakeString(cabi.U32(b, 0), cabi.U32(b, 4)); err == nil {
		if st.Installed, err = takeSummaries(cabi.U32(b, 8), cabi.U32(b, 12)); err == nil {
			st.Capabilities, err = cabi.TakeString(cabi.U32(b, 16), cabi.U32(b, 20))
		}
	}
	if err != nil {
		return RuntimeState{}, fmt.Errorf("guest: diagnostics: %w", err)
	}
	return st, nil
}

// check returns nil for an ok result in area, the host's error for an err one.
func check(op string, area []byte) error {
	switch area[0] {
	case 0:
		return nil
	case 1:
		msg, err := cabi.TakeString(cabi.U32(area, 4), cabi.U32(area, 8))
		if err != nil {
			return fmt.Errorf("guest: %s: %w", op, err)
		}
		return &guest.HostError{Op: op, Msg: msg}
	}
	return fmt.Errorf("guest: %s: result discriminant %d", op, area[0])
}

func takeRuntime(d byte) (RuntimeType, error) {
	if int(d) >= len(runtimeTypes) {
		return 0, fmt.Errorf("runtime-type discriminant %d", d)
	}
	return RuntimeType(d), nil
}

func takeSummary(b []byte) (Summary, error) {
	var s Summary
	var err error
	if s.Name, err = cabi.TakeString(cabi.U32(b, 0), cabi.U32(b, 4)); err != nil {
		return Summary{}, err
	}
	if s.Version, err = cabi.TakeString(cabi.U32(b, 8), cabi.U32(b, 12)); err != nil {
		return Summary{}, err
	}
	if s.Runtime, err = takeRuntime(b[16]); err != nil {
		return Summary{}, err
	}
	return s, nil
}

func takeSummaries(p, n uint32) ([]Summary, error) {
	if n == 0 {
		return nil, nil
	}
	if n > 1<<24 {
		return nil, fmt.Errorf("list of %d artifact summaries", n)
	}
	b, err := cabi.Take(p, n*summarySize)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, n)
	for i := range out {
		if out[i], err = takeSummary(b[uint32(i)*summarySize:]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func takeInfo(b []byte) (Info, error) {
	var in Info
	var err error
	for _, o := range []struct {
		dst *string
		off uint32
	}{{&in.Name, 0}, {&in.Version, 8}, {&in.Description, 16}} {
		if *o.dst, err = cabi.TakeString(cabi.U32(b, o.off), cabi.U32(b, o.off+4)); err != nil {
			return Info{}, err
		}
	}
	if in.Tags, err = cabi.TakeStrings(cabi.U32(b, 24), cabi.U32(b, 28)); err != nil {
		return Info{}, err
	}
	if in.Runtime, err = takeRuntime(b[32]); err != nil {
		return Info{}, err
	}
	if in.InputSchema, err = cabi.TakeOptStringAt(b, 36); err != nil {
		return Info{}, err
	}
	if in.OutputSchema, err = cabi.TakeOptStringAt(b, 48); err != nil {
		return Info{}, err
	}
	return in, nil
}
