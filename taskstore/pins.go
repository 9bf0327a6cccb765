package taskstore

import (
	"context"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/artname"
	"github.com/capsulegate/capsulegate/internal/clip"
	"github.com/capsulegate/capsulegate/internal/digest"
)

// OriginRuntime marks a pin made by a capsule at run time (Murmur's artifact manager),
// never by the operator's murmur.lock.
const OriginRuntime = "runtime"

// RuntimePin is one artifact a capsule pulled while it ran (murmur:artifact-manager
// pull): what it is, where it came from and the sha256 the gateway computed and
// checked. A capsule has at most one pin per artifact name. CheckRuntimePin says what
// a store keeps.
type RuntimePin struct {
	Capsule        string
	Name           string // the artifact's name: [a-z0-9-], 1 to 100 characters
	Version        string
	SHA256         string // lowercase hex of the archive (or plain wasm) bytes
	Registry       string // the registry it was pulled from, as the trust policy names it
	Role           string // tool or skill
	Implementation string // wasm, native or static ("" when not known)
	Platform       string // "" for a platform-independent file
	Origin         string // always OriginRuntime
	Pulled         time.Time
	By             string // the task that pulled it ("" outside a task)
}

// Pins keeps runtime pins, so that every replica of a fleet, and a restarted gateway,
// sees what a capsule pulled. Both stores this repository ships (taskdb, pgstore)
// implement it, and MemPins keeps them in memory where there is no store. Writes are
// durable when they return nil; a fleet store reads what another replica wrote at once.
// Methods are safe for concurrent use.
type Pins interface {
	// RuntimePins returns the capsule's runtime pins in name order (bytewise).
	RuntimePins(ctx context.Context, capsule string) ([]RuntimePin, error)
	// PutRuntimePin creates or replaces the pin (p.Capsule, p.Name), once CheckRuntimePin
	// passes it; a refused pin writes nothing.
	PutRuntimePin(ctx context.Context, p RuntimePin) error
	// DeleteRuntimePin removes the pin (capsule, name) and reports whether there was one.
	DeleteRuntimePin(ctx context.Context, capsule, name string) (bool, error)
}

// CodeBadPin is the refusal of a runtime pin no store keeps: its name, version, sha256,
// origin, role or implementation breaks CheckRuntimePin's rules.
const CodeBadPin = "E-STORE-018"

// Bounds of a runtime pin's fields.
const (
	MaxPinNameLen    = artname.MaxLen // an artifact name, as manifest.ValidName allows
	MaxPinVersionLen = 128
)

// CheckRuntimePin refuses a pin no store keeps: its capsule with CodeBadID (CheckID);
// with CodeBadPin a name that is not an artifact name ([a-z0-9-], 1 to MaxPinNameLen
// characters, no hyphen first or last: manifest.ValidName's rule), a version empty,
// over MaxPinVersionLen bytes or holding anything but printable characters without
// spaces, a SHA256 that is not 64 lowercase hex digits, an Origin other than
// OriginRuntime, a Role other than tool or skill, an Implementation other than wasm,
// native, static or ""; and with CodeBadID a Registry, Platform or By over MaxIDLen
// bytes or not text a database keeps.
func CheckRuntimePin(p RuntimePin) error {
	if err := CheckID("capsule", p.Capsule); err != nil {
		return err
	}
	if err := CheckPinName(p.Name); err != nil {
		return err
	}
	if why := checkPinVersion(p.Version); why != "" {
		return badPin(fmt.Sprintf("runtime pin %s/%s: version %q %s", p.Capsule, p.Name, clip.String(p.Version, 80), why),
			"give the version the registry lists, as murmur.lock would pin it")
	}
	if !digest.Valid(p.SHA256) {
		return badPin(fmt.Sprintf("runtime pin %s/%s: sha256 %q is not 64 lowercase hex digits", p.Capsule, p.Name, clip.String(p.SHA256, 80)),
			"record the sha256 the gateway computed over the pulled bytes, in lowercase hex")
	}
	if p.Origin != OriginRuntime {
		return badPin(fmt.Sprintf("runtime pin %s/%s: origin %q, want %q", p.Capsule, p.Name, clip.String(p.Origin, 80), OriginRuntime),
			"a store keeps only pins made at run time; the operator's pins live in murmur.lock")
	}
	if p.Role != "tool" && p.Role != "skill" {
		return badPin(fmt.Sprintf("runtime pin %s/%s: role %q, want tool or skill", p.Capsule, p.Name, clip.String(p.Role, 80)),
			"a capsule pulls tools and skills only")
	}
	switch p.Implementation {
	case "", "wasm", "native", "static":
	default:
		return badPin(fmt.Sprintf("runtime pin %s/%s: implementation %q, want wasm, native or static", p.Capsule, p.Name, clip.String(p.Implementation, 80)),
			"record the implementation the artifact's manifest declares")
	}
	for _, f := range []struct{ what, v string }{{"registry", p.Registry}, {"platform", p.Platform}, {"task id", p.By}} {
		if f.v == "" {
			continue
		}
		if err := CheckID("runtime pin "+f.what, f.v); err != nil {
			return err
		}
	}
	return nil
}

// CheckPinName refuses, with CodeBadPin, a runtime pin's name that is not an artifact
// name: what DeleteRuntimePin checks beside the capsule.
func CheckPinName(name string) error {
	if !artname.Valid(name) {
		return badPin(fmt.Sprintf("runtime pin name %q is not an artifact name ([a-z0-9-], 1 to %d characters, no hyphen first or last)", clip.String(name, 80), MaxPinNameLen),
			"use the artifact's name as its manifest gives it")
	}
	return nil
}

// checkPinVersion returns why v cannot be a pin's version, or "".
func checkPinVersion(v string) string {
	switch {
	case v == "":
		return "is empty"
	case len(v) > MaxPinVersionLen:
		return fmt.Sprintf("is %d bytes long (at most %d)", len(v), MaxPinVersionLen)
	case !utf8.ValidString(v):
		return "is not valid UTF-8"
	}
	for _, r := range v {
		if !unicode.IsPrint(r) || r == ' ' {
			return fmt.Sprintf("holds %q (printable characters without spaces only)", r)
		}
	}
	return ""
}

func badPin(msg, fix string) error {
	return errs.New(CodeBadPin, part, msg, fix)
}
