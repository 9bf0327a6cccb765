package wasip2_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
	"github.com/capsulegate/capsulegate/wit/abi"
)

func TestStdio(t *testing.T) {
	var out, errOut bytes.Buffer
	g := newGuest(t, "testdata/io.wat", wasip2.Env{Stdout: &out, Stderr: &errOut, Stdin: []byte("hello stdin")})
	so, se := g.handle("get-stdout"), g.handle("get-stderr")

	g.must("check-write", so, ret)
	if g.u8(ret) != 0 || g.u64(ret+8) != wasip2.DefaultMaxWrite {
		t.Fatalf("check-write = %d, %d", g.u8(ret), g.u64(ret+8))
	}
	p, n := g.str(data, "to stdout ")
	g.must("write", so, p, n, ret)
	g.must("blocking-write-and-flush", so, p, n, ret)
	g.must("write-zeroes", so, 2, ret)
	p, n = g.str(data, "to stderr")
	g.must("blocking-write-and-flush", se, p, n, ret)
	g.must("flush", so, ret)
	g.must("blocking-flush", so, ret)
	if got := out.String(); got != "to stdout to stdout \x00\x00" {
		t.Errorf("stdout %q", got)
	}
	if errOut.String() != "to stderr" {
		t.Errorf("stderr %q", errOut.String())
	}

	in := g.handle("get-stdin")
	g.must("read", in, 5, ret)
	if g.u8(ret) != 0 || string(g.list(ret+4)) != "hello" {
		t.Fatalf("read = %d %q", g.u8(ret), g.list(ret+4))
	}
	g.must("skip", in, 1, ret)
	if g.u8(ret) != 0 || g.u64(ret+8) != 1 {
		t.Fatalf("skip = %d %d", g.u8(ret), g.u64(ret+8))
	}
	g.must("blocking-read", in, 100, ret)
	if string(g.list(ret+4)) != "stdin" {
		t.Fatalf("blocking-read %q", g.list(ret+4))
	}
	g.must("read", in, 100, ret)
	if g.u8(ret) != 1 || g.u8(ret+4) != 1 { // err(closed)
		t.Fatalf("read at end = %d case %d", g.u8(ret), g.u8(ret+4))
	}

	// splice stdin (a fresh handle shares the position: at its end) into stdout.
	in2 := g.handle("get-stdin")
	g.must("splice", so, in2, 10, ret)
	if g.u8(ret) != 1 {
		t.Errorf("splice from a drained stdin = %d, want err(closed)", g.u8(ret))
	}

	pl := g.handle("output-subscribe", so)
	if g.handle("ready", pl) != 1 {
		t.Error("stdout's pollable is not ready")
	}
	g.must("block", pl)
	g.must("drop-pollable", pl)
	g.must("drop-output-stream", so)
	g.must("drop-input-stream", in)
	g.must("drop-input-stream", in2)
}

// TestStdout1MiB writes 1 MiB both ways a guest does: check-write/write (as wasi-libc)
// and blocking-write-and-flush in 4 KiB chunks (as Rust's std).
func TestStdout1MiB(t *testing.T) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, tt := range []struct{ name, export string }{
		{"check-write loop", "check_write_loop"},
		{"blocking-write-and-flush 4 KiB", "write_chunks"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			g := newGuest(t, "testdata/io.wat", wasip2.Env{Stdout: &out})
			g.write(data, payload)
			so := g.handle("get-stdout")
			args := []uint64{so, uint64(len(payload))}
			if tt.export == "write_chunks" {
				args = append(args, 4096)
			}
			if r := g.must(tt.export, args...); r[0] != 0 {
				t.Fatal("stream error")
			}
			if !bytes.Equal(out.Bytes(), payload) {
				t.Fatalf("stdout got %d bytes, want the %d written", out.Len(), len(payload))
			}
		})
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestStreamErrors(t *testing.T) {
	g := newGuest(t, "testdata/io.wat", wasip2.Env{Stdout: failWriter{}})
	so := g.handle("get-stdout")
	p, n := g.str(data, "x")
	g.must("write", so, p, n, ret)
	if g.u8(ret) != 1 || g.u8(ret+4) != 0 {
		t.Fatalf("write to a failing stdout = %d case %d, want err(last-operation-failed)", g.u8(ret), g.u8(ret+4))
	}
	e := uint64(g.u32(ret + 8))
	g.must("to-debug-string", e, ret)
	if s := string(g.list(ret)); !strings.Contains(s, "disk full") {
		t.Errorf("to-debug-string = %q", s)
	}
	g.must("drop-error", e)
	g.must("check-write", so, ret)
	if g.u8(ret) != 1 || g.u8(ret+8) != 1 {
		t.Errorf("check-write after failure = %d case %d, want err(closed)", g.u8(ret), g.u8(ret+8))
	}
}

// TestHostileIO is every way a guest can misuse handles and buffers: each traps with a
// code, and the host keeps serving.
func TestHostileIO(t *testing.T) {
	g := newGuest(t, "testdata/io.wat", wasip2.Env{})
	so := g.handle("get-stdout")
	in := g.handle("get-stdin")
	dropped := g.handle("get-stdout")
	g.must("drop-output-stream", dropped)
	pl := g.handle("output-subscribe", so)

	big := make([]byte, wasip2.DefaultMaxWrite+1)
	g.write(data, big)
	for _, tt := range []struct {
		name string
		fn   string
		args []uint64
		code string
		abi  bool
	}{
		{"forged handle", "check-write", []uint64{999, ret}, wasip2.CodeHandle, true},
		{"handle zero", "write", []uint64{0, data, 1, ret}, wasip2.CodeHandle, true},
		{"dropped handle", "check-write", []uint64{dropped, ret}, wasip2.CodeHandle, true},
		{"double drop", "drop-output-stream", []uint64{dropped}, wasip2.CodeHandle, true},
		{"wrong type", "check-write", []uint64{in, ret}, wasip2.CodeHandle, true},
		{"drop as another type", "drop-input-stream", []uint64{so}, wasip2.CodeHandle, true},
		{"list out of bounds", "write", []uint64{so, 0xFFFFFFF0, 0x20, ret}, wasip2.CodeABI, true},
		{"list length overflows", "write", []uint64{so, data, 0xFFFFFFFF, ret}, wasip2.CodeABI, true},
		{"return area out of bounds", "check-write", []uint64{so, 0xFFFFFFF8}, wasip2.CodeABI, true},
		{"misaligned return area", "check-write", []uint64{so, 9}, wasip2.CodeABI, true},
		{"write over the grant", "write", []uint64{so, data, uint64(len(big)), ret}, wasip2.CodeStream, false},
		{"blocking write over 4096", "blocking-write-and-flush", []uint64{so, data, 4097, ret}, wasip2.CodeStream, false},
		{"write-zeroes over the grant", "write-zeroes", []uint64{so, 1 << 40, ret}, wasip2.CodeStream, false},
		{"stream dropped before its pollable", "drop-output-stream", []uint64{so}, wasip2.CodeChildren, true},
		{"poll of nothing", "poll", []uint64{data, 0, ret}, wasip2.CodePoll, false},
		{"poll of a flood", "poll", []uint64{data, 1 << 30, ret}, wasip2.CodePoll, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := g.call(tt.fn, tt.args...)
			wantTrap(t, err, tt.code)
			if errors.Is(err, abi.ErrABI) != tt.abi {
				t.Errorf("matches abi.ErrABI: %v, want %v (%v)", !tt.abi, tt.abi, err)
			}
		})
	}
	// A forged handle inside poll's list.
	g.write(data, []byte{byte(pl), 0, 0, 0, 0xff, 0xff, 0, 0})
	_, err := g.call("poll", data, 2, ret)
	wantTrap(t, err, wasip2.CodeHandle)

	// Still serving, and the pollable's child link is honoured once it is gone.
	g.must("drop-pollable", pl)
	g.must("drop-output-stream", so)
}

// TestBlockEndsWithContext: a never-ready pollable, blocked on, returns when the call's
// deadline passes, as a trap the engine classifies as a deadline.
func TestBlockEndsWithContext(t *testing.T) {
	interrupted := false
	g := newGuest(t, "testdata/io.wat", wasip2.Env{Interrupt: func() { interrupted = true }})
	never := g.handle("subscribe-instant", ^uint64(0))
	if g.handle("ready", never) != 0 {
		t.Fatal("a pollable for the end of time is ready")
	}
	for _, tt := range []struct {
		name string
		fn   string
		args []uint64
	}{
		{"block", "block", []uint64{never}},
		{"poll", "poll", []uint64{data, 1, ret}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g.write(data, []byte{byte(never), 0, 0, 0})
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := g.callCtx(ctx, tt.fn, tt.args...)
			wantTrap(t, err, wasip2.CodeContext)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%v does not match context.DeadlineExceeded", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("returned after %v", d)
			}
		})
	}
	if !interrupted {
		t.Error("Env.Interrupt was not called")
	}

	// A pollable already due is ready, and poll reports which.
	soon := g.handle("subscribe-duration", 0)
	g.write(data, []byte{byte(never), 0, 0, 0, byte(soon), 0, 0, 0})
	g.must("poll", data, 2, ret)
	if n, p := g.u32(ret+4), g.u32(ret); n != 1 || g.u32(p) != 1 {
		t.Errorf("poll = %d entries, first %d; want [1]", n, g.u32(p))
	}
	// A short timer wakes block without the deadline.
	short := g.handle("subscribe-duration", uint64(time.Millisecond))
	g.must("block", short)
}

// TestTableFlood: a guest that subscribes without end traps on the table's bound.
func TestTableFlood(t *testing.T) {
	g := newGuest(t, "testdata/io.wat", wasip2.Env{MaxHandles: 500})
	_, err := g.call("flood")
	wantTrap(t, err, wasip2.CodeLimit)
	if n := g.h.Handles(); n != 500 {
		t.Errorf("%d handles live, want the bound 500", n)
	}
	g.h.Close()
	if n := g.h.Handles(); n != 0 {
		t.Errorf("%d handles after Close", n)
	}
}
