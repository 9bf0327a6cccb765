// Package abi is the host side of the component model's canonical ABI: it lifts guest
// values out of a linear memory and lowers host values into it, for the Murmur WIT
// worlds served on core wasm modules.
//
// Every guest value is hostile. Lifting checks bounds (with uint32 overflow), alignment,
// UTF-8, discriminants and char ranges, caps sizes (DefaultMax…), and fails with an error
// matching ErrABI; it never panics. Lowering allocates through the guest's cabi_realloc
// and checks what it returns.
//
// Go representation of values, by WIT type:
//
//	bool                 bool
//	u8 u16 u32 u64       uint8 uint16 uint32 uint64
//	s8 s16 s32 s64       int8 int16 int32 int64
//	f32 f64              float32 float64 (bits pass through unchanged, NaNs included)
//	char                 rune
//	string               string (valid UTF-8 both ways)
//	list<u8>             []byte (lowering also accepts []any of uint8)
//	list<T>              []any
//	record, tuple        []any, one element per field in order
//	option<T>            Option
//	result<T, E>         Result (Value nil for a side without payload)
//	enum                 uint32, the case index
//	variant              Variant
//	flags                uint32, bit i set for label i (at most 32 labels)
//	own<R>, borrow<R>    uint32, the handle index (resolving it is the caller's job)
package abi

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Memory is a guest's linear memory. wazero's api.Memory satisfies it.
type Memory interface {
	Size() uint32
	Read(offset, byteCount uint32) ([]byte, bool)
	Write(offset uint32, v []byte) bool
}

// Realloc calls the guest's cabi_realloc(old_ptr, old_size, align, new_size) -> ptr.
type Realloc func(ctx context.Context, oldPtr, oldSize, align, newSize uint32) (uint32, error)

// Option is the value of an option<T>.
type Option struct {
	Some  bool
	Value any
}

// Result is the value of a result<T, E>: Value is the ok payload, or the error payload
// when Err is set.
type Result struct {
	Err   bool
	Value any
}

// Variant is the value of a variant: the case index and its payload (nil if none).
type Variant struct {
	Case  uint32
	Value any
}

// Errors. A guest breaking the ABI gives an error matching ErrABI; one exceeding a limit
// matches both ErrABI and ErrLimit; a host value not matching its type (a host bug, not
// the guest's) matches ErrValue only.
var (
	ErrABI   = errors.New("abi: canonical ABI violation")
	ErrLimit = errors.New("abi: limit exceeded")
	ErrValue = errors.New("abi: host value does not match its type")
)

// Error is the error this package returns for ABI violations and bad host values.
type Error struct {
	Path string // where in the value, e.g. "metadata[2].1"; empty at the top
	Msg  string // what was wrong: type, pointer, length

	limit, value bool
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "abi: " + e.Msg
	}
	return "abi: " + strings.TrimPrefix(e.Path, ".") + ": " + e.Msg
}

// Is makes errors.Is match ErrABI, ErrLimit and ErrValue as documented there.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrABI:
		return !e.value
	case ErrLimit:
		return e.limit
	case ErrValue:
		return e.value
	}
	return false
}

func guestErr(format string, args ...any) error {
	return &Error{Msg: sprintf(format, args...)}
}

func limitErr(format string, args ...any) error {
	return &Error{Msg: sprintf(format, args...), limit: true}
}

func valueErr(t *Type, format string, args ...any) error {
	return &Error{Msg: t.brief() + ": " + sprintf(format, args...), value: true}
}

// sprintf is fmt.Sprintf with types shortened, so a huge type cannot flood a message.
func sprintf(format string, args ...any) string {
	for i, a := range args {
		if t, ok := a.(*Type); ok {
			args[i] = t.brief()
		}
	}
	return fmt.Sprintf(format, args...)
}

// at prefixes the error's path with seg (".name" or "[i]").
func at(err error, seg string) error {
	var e *Error
	if errors.As(err, &e) {
		e.Path = seg + e.Path
	}
	return err
}

// limits caps what one lift may take from a guest; lifts use the defaults, tests lower
// them. A zero field means its default.
type limits struct {
	MaxString uint32 // bytes of one string; default 64 MiB
	MaxList   uint32 // elements of one list; default 64 Mi
	MaxTotal  uint64 // bytes one lift may allocate in all (a list element counts 16, a list<u8> byte 1); default 256 MiB
}

// Default limits.
const (
	DefaultMaxString = 64 << 20
	DefaultMaxList   = 64 << 20
	DefaultMaxTotal  = 256 << 20
)

func (l limits) withDefaults() limits {
	if l.MaxString == 0 {
		l.MaxString = DefaultMaxString
	}
	if l.MaxList == 0 {
		l.MaxList = DefaultMaxList
	}
	if l.MaxTotal == 0 {
		l.MaxTotal = DefaultMaxTotal
	}
	return l
}
