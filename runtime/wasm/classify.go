package wasm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// Reasons a guest call fails; the label values of capsule_guest_traps_total.
const (
	ReasonDeadline    = "deadline"     // the wall-clock deadline passed
	ReasonMemoryLimit = "memory_limit" // the guest needed more memory than limits.memory_bytes
	ReasonTrap        = "trap"         // a wasm trap (unreachable, out-of-bounds access, …)
	ReasonExit        = "exit"         // the guest called proc_exit
	ReasonABI         = "abi"          // the guest broke the canonical ABI (bad pointer, length, UTF-8, …)
	// ReasonCanceled is a call its caller stopped (an A2A cancel): not the guest's fault,
	// so it is counted as a call status and never as a trap.
	ReasonCanceled = "canceled"
)

// GuestError is a classified guest failure.
type GuestError struct {
	Capsule, Artifact string
	Role              string
	Reason            string
	Err               error
	// Deadline and MemoryBytes are the call's limits, named in the message of a call
	// stopped by one of them (zero: not known).
	Deadline    time.Duration
	MemoryBytes uint64
}

// Error names the artifact, the reason and the cause.
func (e *GuestError) Error() string {
	// wazero appends a wasm stack trace after the first line: useful in logs, noise here.
	cause, _, _ := strings.Cut(e.Err.Error(), "\nwasm stack trace:")
	msg := fmt.Sprintf("runtime: %s %s %s of capsule %s failed (%s): %s", CodeGuest, e.Role, e.Artifact, e.Capsule, e.Reason, cause)
	switch {
	case e.Reason == ReasonDeadline && e.Deadline > 0:
		msg += fmt.Sprintf("; it ran past its %s deadline: raise capabilities.limits.deadline_seconds if the work needs longer", e.Deadline)
	case e.Reason == ReasonMemoryLimit && e.MemoryBytes > 0:
		msg += fmt.Sprintf("; it needed more than its %d-byte memory limit: raise capabilities.limits.memory_bytes if the work needs more", e.MemoryBytes)
	}
	return msg
}

// Unwrap returns the cause.
func (e *GuestError) Unwrap() error { return e.Err }

// ErrorCode returns E-RUN-003.
func (e *GuestError) ErrorCode() string { return CodeGuest }

// classify decides why a call failed. Memory refusal wins over what the guest did next
// (a Go guest exits with code 2 after a failed grow); the deadline wins over the trap
// wazero raises when it stops the guest.
func classify(ctx context.Context, err error, alloc *limitedAllocator) string {
	var exit *sys.ExitError
	switch {
	case errors.Is(err, abi.ErrABI):
		return ReasonABI
	case alloc != nil && alloc.wasRefused():
		return ReasonMemoryLimit
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeDeadlineExceeded,
		errors.Is(ctx.Err(), context.DeadlineExceeded), errors.Is(context.Cause(ctx), context.DeadlineExceeded):
		return ReasonDeadline
	case errors.As(err, &exit) && exit.ExitCode() == sys.ExitCodeContextCanceled,
		errors.Is(ctx.Err(), context.Canceled):
		return ReasonCanceled
	case errors.As(err, &exit):
		return ReasonExit
	}
	return ReasonTrap
}
