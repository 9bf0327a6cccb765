package taskstore

import (
	"context"
	"time"
)

// OriginRuntime marks a pin made by a capsule at run time (Murmur's artifact manager),
// never by the operator's murmur.lock.
const OriginRuntime = "runtime"

// RuntimePin is one artifact a capsule pulled while it ran (murmur:artifact-manager
// pull): what it is, where it came from and the sha256 the gateway computed and
// checked. A capsule has at most one pin per artifact name.
type RuntimePin struct {
	Capsule        string
	Name           string
	Version        string
	SHA256         string // lowercase hex of the archive (or plain wasm) bytes
	Registry       string // the registry it was pulled from, as the trust policy names it
	Role           string // tool or skill
	Implementation string // wasm, native or static
	Platform       string // "" for a platform-independent file
	Origin         string // always OriginRuntime
	Pulled         time.Time
	By             string // the task that pulled it ("" outside a task)
}

// Pins is a Store that keeps runtime pins, so that every replica of a fleet, and a
// restarted gateway, sees what a capsule pulled. Writes are durable when they return.
type Pins interface {
	// RuntimePins returns the capsule's runtime pins in name order.
	RuntimePins(ctx context.Context, capsule string) ([]RuntimePin, error)
	// PutRuntimePin creates or replaces the pin (p.Capsule, p.Name).
	PutRuntimePin(ctx context.Context, p RuntimePin) error
	// DeleteRuntimePin removes the pin (capsule, name) and reports whether there was one.
	DeleteRuntimePin(ctx context.Context, capsule, name string) (bool, error)
}
