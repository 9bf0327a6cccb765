package taskdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"runtime/debug"

	"github.com/capsulegate/capsulegate/errs"
)

// bbolt's file layout, as far as checkFile needs it: a 16-byte page header, then the meta
// fields magic, version, pageSize, flags, root (pgid, sequence), freelist, pgid (the
// high-water mark), txid, checksum (FNV-64a of the 56 bytes before it).
const (
	boltMagic    = 0xED0CDAED
	boltVersion  = 2
	pageHeader   = 16
	metaSumBytes = 56
	metaBytes    = metaSumBytes + 8
)

type boltMeta struct {
	pageSize uint32
	pgid     uint64
	txid     uint64
}

// readMeta decodes and validates a meta page at off, or reports ok=false.
func readMeta(f *os.File, off int64) (m boltMeta, ok bool) {
	var b [pageHeader + metaBytes]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return m, false
	}
	meta := b[pageHeader:]
	le := binary.NativeEndian
	h := fnv.New64a()
	h.Write(meta[:metaSumBytes])
	if le.Uint32(meta[0:]) != boltMagic || le.Uint32(meta[4:]) != boltVersion || le.Uint64(meta[metaSumBytes:]) != h.Sum64() {
		return m, false
	}
	return boltMeta{pageSize: le.Uint32(meta[8:]), pgid: le.Uint64(meta[40:]), txid: le.Uint64(meta[48:])}, true
}

// checkFile refuses, before bbolt maps it, a file bbolt would read past its end: a
// truncated file makes bbolt fault on memory beyond the mapping instead of returning an
// error. Everything else (magic, checksums, page contents) bbolt and verify check.
func checkFile(path string) error {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return cannotOpen(path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return cannotOpen(path, err)
	}
	if !info.Mode().IsRegular() {
		return cannotOpen(path, errors.New("not a regular file"))
	}
	size := info.Size()
	if size == 0 {
		return nil
	}
	m0, ok0 := readMeta(f, 0)
	var m1 boltMeta
	var ok1 bool
	if ok0 {
		m1, ok1 = readMeta(f, int64(m0.pageSize))
	} else {
		m1, ok1 = readMeta(f, int64(os.Getpagesize()))
	}
	m := m0
	switch {
	case !ok0 && !ok1:
		return notAStore(path, io.ErrUnexpectedEOF)
	case !ok0 || ok1 && m1.txid > m0.txid:
		m = m1
	}
	if m.pageSize < 1024 || m.pgid > uint64(size)/uint64(m.pageSize) {
		return notAStore(path, fmt.Errorf("the file is %d bytes, its header says %d pages of %d bytes", size, m.pgid, m.pageSize))
	}
	return nil
}

// guard runs fn, turning a panic or a memory fault on a damaged mapping into an error.
// bbolt panics on pages it cannot make sense of; that must refuse the file, not end the gateway.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			if u, ok := r.(callerPanic); ok {
				panic(u.v) // the caller's callback, not the store, panicked
			}
			err = errs.New(CodeBadRecord, part, fmt.Sprintf("a damaged page: %v", r),
				"restore the store from a backup or move the file aside")
		}
	}()
	return fn()
}

// callerPanic carries a panic of a caller's callback through guard unchanged.
type callerPanic struct{ v any }

// call runs a caller's callback inside a read, marking its panics as the caller's.
func call[T any](fn func(T) bool, v T) bool {
	defer func() {
		if r := recover(); r != nil {
			panic(callerPanic{r})
		}
	}()
	return fn(v)
}
