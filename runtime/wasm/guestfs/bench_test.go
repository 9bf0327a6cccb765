package guestfs

import (
	"os"
	"path/filepath"
	"testing"

	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

// BenchmarkOpenReadClose compares open+read+close of a small file nested two
// directories deep through the FS with the same through os directly.
func BenchmarkOpenReadClose(b *testing.B) {
	dir := b.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755); err != nil {
		b.Fatal(err)
	}
	const name = "a/b/file.txt"
	payload := make([]byte, 4096)
	if err := os.WriteFile(filepath.Join(dir, name), payload, 0o644); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8192)

	b.Run("guestfs", func(b *testing.B) {
		gfs, err := New(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer gfs.Close()
		b.ReportAllocs()
		for b.Loop() {
			f, errno := gfs.OpenFile(name, experimentalsys.O_RDONLY, 0)
			if errno != 0 {
				b.Fatal(errno)
			}
			if n, errno := f.Read(buf); errno != 0 || n != len(payload) {
				b.Fatal(n, errno)
			}
			f.Close()
		}
	})
	b.Run("os.Open", func(b *testing.B) {
		path := filepath.Join(dir, name)
		b.ReportAllocs()
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := f.Read(buf); err != nil || n != len(payload) {
				b.Fatal(n, err)
			}
			f.Close()
		}
	})
	b.Run("os.Root", func(b *testing.B) {
		r, err := os.OpenRoot(dir)
		if err != nil {
			b.Fatal(err)
		}
		defer r.Close()
		b.ReportAllocs()
		for b.Loop() {
			f, err := r.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			if n, err := f.Read(buf); err != nil || n != len(payload) {
				b.Fatal(n, err)
			}
			f.Close()
		}
	})
}
