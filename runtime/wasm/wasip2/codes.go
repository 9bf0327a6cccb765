package wasip2

import (
	"context"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/wit/abi"
)

// Codes of the host's refusals (docs/errors.md "WASI 0.2 host (E-WASI2-…)"). Every trap
// the host raises carries one; the ones a guest breaking the canonical ABI causes also
// match abi.ErrABI, so the engine classifies them as reason abi.
const (
	CodeNotServed = "E-WASI2-001" // an import names a WASI function or version this host does not serve
	CodeHandle    = "E-WASI2-002" // a handle is forged, dropped already, or of another resource type
	CodeLimit     = "E-WASI2-003" // the resource table or the host's buffer budget is full
	CodeChildren  = "E-WASI2-004" // a resource is dropped or given away while its children live
	CodeStream    = "E-WASI2-005" // a stream call breaks its contract (write over the permit, blocking write over 4096 bytes)
	CodeContext   = "E-WASI2-006" // the call's context ended while a host call blocked
	CodeABI       = "E-WASI2-007" // arguments or results could not cross the canonical ABI (bad pointer, length, UTF-8, realloc)
	CodePoll      = "E-WASI2-008" // poll was given no pollables, or more than the table can hold
)

// trap returns the error of a host-side refusal that must trap the guest; abiFault makes
// it match abi.ErrABI as well.
func trap(code, msg string, abiFault bool) error {
	var cause error
	if abiFault {
		cause = abi.ErrABI
	}
	return errs.Wrap(cause, code, "wasip2", msg, "")
}

func trapf(code string, abiFault bool, format string, args ...any) error {
	return trap(code, fmt.Sprintf(format, args...), abiFault)
}

// abiTrap wraps an error of package abi (a bad pointer, length or realloc) with its code;
// errors.Is(err, abi.ErrABI) keeps holding.
func abiTrap(what string, err error) error {
	return errs.Wrap(err, CodeABI, "wasip2", what, "")
}

// contextTrap is the trap of a blocking call whose context ended; it wraps the context's
// cause so the engine classifies it as a deadline or a cancel.
func contextTrap(ctx context.Context, what string) error {
	cause := context.Cause(ctx)
	if cause == nil {
		cause = ctx.Err()
	}
	if cause == nil {
		cause = errors.New("the host is closed")
	}
	return errs.Wrap(fmt.Errorf("the call's context ended in a host call: %w", cause), CodeContext, "wasip2", what, "")
}
