package wasip2_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/capsulegate/capsulegate/runtime/wasm/wasip2"
)

// BenchmarkStdoutWrite1MiB writes 1 MiB to stdout from the guest, as Rust's std does
// (blocking-write-and-flush, 4 KiB at a time) and as wasi-libc does (check-write/write).
func BenchmarkStdoutWrite1MiB(b *testing.B) {
	payload := bytes.Repeat([]byte("0123456789abcdef"), 1<<16)
	for _, bb := range []struct {
		name string
		fn   string
		args func(so uint64) []uint64
	}{
		{"blocking-write-and-flush-4KiB", "write_chunks", func(so uint64) []uint64 { return []uint64{so, uint64(len(payload)), 4096} }},
		{"check-write-write", "check_write_loop", func(so uint64) []uint64 { return []uint64{so, uint64(len(payload))} }},
	} {
		b.Run(bb.name, func(b *testing.B) {
			g := newGuest(b, "testdata/io.wat", wasip2.Env{Stdout: io.Discard})
			g.write(data, payload)
			so := g.handle("get-stdout")
			args := bb.args(so)
			b.SetBytes(int64(len(payload)))
			b.ResetTimer()
			for range b.N {
				if _, err := g.call(bb.fn, args...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
