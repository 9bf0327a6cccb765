// Package artifacts is the Go guest SDK of murmur:artifact-manager/manage@0.1.0
// (wit/murmur-artifact-manager-0.1.0.wit): the artifacts of the runtime a script
// capsule runs in, as plain Go functions. Only a script capsule's own module may import
// it (world script-capsule); a tool, driver or hook importing it is refused at stage.
//
// Every refusal by the host is an error of type *guest.HostError whose Msg is the
// host's string verbatim (an ungranted capsule's begins "not-granted:"); List, which
// the WIT gives no error, returns an empty list instead. Outside a wasip1 guest each
// function returns guest.ErrNotGuest.
package artifacts

import "strconv"

// RuntimeType is the enum runtime-type: how an artifact runs.
type RuntimeType uint8

// The runtime-type cases, in WIT order.
const (
	RuntimeWasm RuntimeType = iota
	RuntimeNative
)

// runtimeTypes are the runtime-type labels by discriminant.
var runtimeTypes = []string{"wasm", "native"}

func (t RuntimeType) String() string {
	if int(t) < len(runtimeTypes) {
		return runtimeTypes[t]
	}
	return "runtime-type(" + strconv.Itoa(int(t)) + ")"
}

// MarshalText renders t as its WIT label, so JSON shows "wasm" or "native".
func (t RuntimeType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Summary is the record artifact-summary.
type Summary struct {
	Name    string      `json:"name"`
	Version string      `json:"version"`
	Runtime RuntimeType `json:"runtime"`
}

// Info is the record artifact-info. A nil schema is none.
type Info struct {
	Name         string      `json:"name"`
	Version      string      `json:"version"`
	Description  string      `json:"description"`
	Tags         []string    `json:"tags"`
	Runtime      RuntimeType `json:"runtime"`
	InputSchema  *string     `json:"input-schema"`
	OutputSchema *string     `json:"output-schema"`
}

// RuntimeState is the record runtime-state.
type RuntimeState struct {
	CapsuleID    string    `json:"capsule-id"`
	Installed    []Summary `json:"installed"`
	Capabilities string    `json:"capabilities"`
}
