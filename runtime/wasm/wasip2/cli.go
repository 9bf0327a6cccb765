package wasip2

import (
	"encoding/binary"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"strings"
	"unicode/utf8"

	"github.com/tetratelabs/wazero/sys"

	"github.com/capsulegate/capsulegate/wit/abi"
)

// MaxRandomBytes bounds one get-random-bytes or get-insecure-random-bytes.
const MaxRandomBytes = 1 << 20

func cliSpecs() []*spec {
	termIn, termOut := abi.OptionOf(own(kTerminalInput)), abi.OptionOf(own(kTerminalOutput))
	noTerminal := func(*call, []any) (any, error) { return none, nil }
	return []*spec{
		fn("wasi:cli/environment", "get-environment", nil, abi.List(abi.Tuple(abi.String, abi.String)), func(c *call, _ []any) (any, error) {
			out := make([]any, 0, len(c.h.env.Env))
			for _, kv := range c.h.env.Env {
				k, v, _ := strings.Cut(kv, "=")
				out = append(out, []any{validUTF8(k), validUTF8(v)})
			}
			return out, nil
		}),
		fn("wasi:cli/environment", "get-arguments", nil, abi.List(abi.String), func(c *call, _ []any) (any, error) {
			out := make([]any, len(c.h.env.Args))
			for i, s := range c.h.env.Args {
				out[i] = validUTF8(s)
			}
			return out, nil
		}),
		fn("wasi:cli/environment", "initial-cwd", nil, abi.OptionOf(abi.String), func(c *call, _ []any) (any, error) {
			if c.h.env.InitialCwd == "" {
				return none, nil
			}
			return some(validUTF8(c.h.env.InitialCwd)), nil
		}),
		fn("wasi:cli/exit", "exit", ps(pr("status", abi.ResultOf(nil, nil))), nil, func(c *call, a []any) (any, error) {
			code := uint32(0)
			if a[0].(abi.Result).Err {
				code = 1
			}
			return nil, sys.NewExitError(code)
		}),
		fn("wasi:cli/exit", "exit-with-code", ps(pr("status-code", abi.U8)), nil, func(c *call, a []any) (any, error) {
			return nil, sys.NewExitError(uint32(a[0].(uint8)))
		}),
		fn("wasi:cli/stdin", "get-stdin", nil, own(kInputStream), func(c *call, _ []any) (any, error) {
			return c.h.tab.add(kInputStream, &inputStream{src: c.h.stdin}, 0)
		}),
		fn("wasi:cli/stdout", "get-stdout", nil, own(kOutputStream), func(c *call, _ []any) (any, error) {
			return c.h.tab.add(kOutputStream, &outputStream{sink: c.h.stdout}, 0)
		}),
		fn("wasi:cli/stderr", "get-stderr", nil, own(kOutputStream), func(c *call, _ []any) (any, error) {
			return c.h.tab.add(kOutputStream, &outputStream{sink: c.h.stderr}, 0)
		}),
		// No terminal: a capsule's stdio is never one.
		drop("wasi:cli/terminal-input", kTerminalInput),
		drop("wasi:cli/terminal-output", kTerminalOutput),
		fn("wasi:cli/terminal-stdin", "get-terminal-stdin", nil, termIn, noTerminal),
		fn("wasi:cli/terminal-stdout", "get-terminal-stdout", nil, termOut, noTerminal),
		fn("wasi:cli/terminal-stderr", "get-terminal-stderr", nil, termOut, noTerminal),
	}
}

// validUTF8 replaces what is not UTF-8 (an environment value from the host's config):
// a string must lower as UTF-8.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

var tDatetime = abi.Record(abi.F("seconds", abi.U64), abi.F("nanoseconds", abi.U32)).Named("datetime")

func clockRandomSpecs() []*spec {
	const mono, wall = "wasi:clocks/monotonic-clock", "wasi:clocks/wall-clock"
	preRandom := func(h *Host, flat []uint64) error {
		if flat[0] > MaxRandomBytes {
			return trapf(CodeLimit, false, "%d random bytes asked for at once: more than the %d allowed", flat[0], MaxRandomBytes)
		}
		return nil
	}
	return []*spec{
		fn(mono, "now", nil, abi.U64.Named("instant"), func(c *call, _ []any) (any, error) {
			return c.h.clock.Monotonic(), nil
		}),
		fn(mono, "resolution", nil, abi.U64.Named("duration"), func(*call, []any) (any, error) { return uint64(1), nil }),
		fn(mono, "subscribe-instant", ps(pr("when", abi.U64.Named("instant"))), own(kPollable), func(c *call, a []any) (any, error) {
			return c.h.tab.add(kPollable, &pollable{timer: true, at: a[0].(uint64)}, 0)
		}),
		fn(mono, "subscribe-duration", ps(pr("when", abi.U64.Named("duration"))), own(kPollable), func(c *call, a []any) (any, error) {
			now, d := c.h.clock.Monotonic(), a[0].(uint64)
			at := now + d
			if at < now {
				at = ^uint64(0) // saturate: never ready
			}
			return c.h.tab.add(kPollable, &pollable{timer: true, at: at}, 0)
		}),
		fn(wall, "now", nil, tDatetime, func(c *call, _ []any) (any, error) {
			t := c.h.clock.Now()
			secs := t.Unix()
			if secs < 0 {
				secs = 0
			}
			return []any{uint64(secs), uint32(t.Nanosecond())}, nil
		}),
		fn(wall, "resolution", nil, tDatetime, func(*call, []any) (any, error) { return []any{uint64(0), uint32(1)}, nil }),

		{iface: "wasi:random/random", name: "get-random-bytes", params: ps(pr("len", abi.U64)), result: tBytes, pre: preRandom,
			impl: func(c *call, a []any) (any, error) {
				b := make([]byte, a[0].(uint64))
				if _, err := io.ReadFull(c.h.random, b); err != nil {
					return nil, fmt.Errorf("wasip2: the random source failed: %w", err)
				}
				return b, nil
			}},
		fn("wasi:random/random", "get-random-u64", nil, abi.U64, func(c *call, _ []any) (any, error) {
			var b [8]byte
			if _, err := io.ReadFull(c.h.random, b[:]); err != nil {
				return nil, fmt.Errorf("wasip2: the random source failed: %w", err)
			}
			return binary.LittleEndian.Uint64(b[:]), nil
		}),
		{iface: "wasi:random/insecure", name: "get-insecure-random-bytes", params: ps(pr("len", abi.U64)), result: tBytes, pre: preRandom,
			impl: func(c *call, a []any) (any, error) {
				b := make([]byte, a[0].(uint64))
				for i := 0; i < len(b); i += 8 {
					var w [8]byte
					binary.LittleEndian.PutUint64(w[:], mrand.Uint64())
					copy(b[i:], w[:])
				}
				return b, nil
			}},
		fn("wasi:random/insecure", "get-insecure-random-u64", nil, abi.U64, func(*call, []any) (any, error) {
			return mrand.Uint64(), nil
		}),
		fn("wasi:random/insecure-seed", "insecure-seed", nil, abi.Tuple(abi.U64, abi.U64), func(*call, []any) (any, error) {
			return []any{mrand.Uint64(), mrand.Uint64()}, nil
		}),
	}
}
