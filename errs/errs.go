// Package errs is the one error shape every capsulegate part returns to users: a
// stable code (docs/errors.md), where the bad value stands, what was wrong with it and
// how to fix it. It is public, not internal, because the public packages return it:
// code outside the module reads an error's code with Code, finds one with Find, or
// reaches its fields with errors.As on a *Error.
package errs

import (
	"errors"
	"strings"
)

// Error is a refusal (E-…) or warning (W-…) a user can meet.
type Error struct {
	Code string // stable code, e.g. "E-MAN-004"; listed in docs/errors.md
	Part string // the part that refused: "manifest", "registry", "netpolicy", "lock", …
	Pos  string // "file:line:col" or "file", when the value came from a file
	Path string // key path inside that file, e.g. "capabilities.network.allow[2]"
	Msg  string // what was wrong with which value
	Fix  string // how to fix it
	Err  error  // the underlying cause, if any
}

// New returns an Error with the given code, part, message and fix.
func New(code, part, msg, fix string) *Error {
	return &Error{Code: code, Part: part, Msg: msg, Fix: fix}
}

// Wrap returns an Error that wraps cause.
func Wrap(cause error, code, part, msg, fix string) *Error {
	return &Error{Code: code, Part: part, Msg: msg, Fix: fix, Err: cause}
}

// Error formats as "part: CODE pos: path: msg: cause (fix: …)".
func (e *Error) Error() string {
	var b strings.Builder
	if e.Part != "" {
		b.WriteString(e.Part)
		b.WriteString(": ")
	}
	b.WriteString(e.Code)
	if e.Pos != "" {
		b.WriteString(" ")
		b.WriteString(e.Pos)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Fix != "" {
		b.WriteString(" (fix: ")
		b.WriteString(e.Fix)
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrorCode returns the stable code; Code reads it through any wrapping.
func (e *Error) ErrorCode() string { return e.Code }

// At returns a copy of e placed at pos and path.
func (e *Error) At(pos, path string) *Error {
	c := *e
	c.Pos, c.Path = pos, path
	return &c
}

// List is several refusals reported together, in the order they were found.
type List []*Error

// Error joins the entries one per line.
func (l List) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap exposes every entry to errors.Is and errors.As.
func (l List) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// ErrorCode returns the first entry's code.
func (l List) ErrorCode() string {
	if len(l) == 0 {
		return ""
	}
	return l[0].Code
}

// Code returns the stable code carried by err, or "" if it has none.
func Code(err error) string {
	var c interface{ ErrorCode() string }
	if errors.As(err, &c) {
		return c.ErrorCode()
	}
	return ""
}

// Find returns the first *Error in err's chain with the given code, or nil.
func Find(err error, code string) *Error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok && e.Code == code {
		return e
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, x := range u.Unwrap() {
			if f := Find(x, code); f != nil {
				return f
			}
		}
	case interface{ Unwrap() error }:
		return Find(u.Unwrap(), code)
	}
	return nil
}

// Codes returns every code in err's chain, in order.
func Codes(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if e, ok := err.(*Error); ok {
			out = append(out, e.Code)
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}
