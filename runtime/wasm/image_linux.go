//go:build linux

package wasm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// memImage is a module's initial memory contents (its data segments) in a sealed memfd.
// Each instance maps it copy-on-write at the bottom of its linear memory, so starting an
// instance copies nothing: pages are shared until the guest writes them.
type memImage struct {
	fd   int
	size uint64 // bytes of the file: the data's offset plus its length

	mu     sync.RWMutex // guards view and closed: close unmaps view under the write lock
	view   []byte       // the image read-only and shared, for restoreOnto; mapped on first use
	closed bool
}

// newMemImage writes img into a fresh memfd and seals it against change.
func newMemImage(img *dataImage) (*memImage, error) {
	fd, err := unix.MemfdCreate("capsulegate-image", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	size := uint64(img.off) + uint64(len(img.block))
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	if err := pwriteAll(fd, img.block, int64(img.off)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return seal(fd, size)
}

// seal makes the memfd immutable, so no mapping of it can ever change, and wraps it.
func seal(fd int, size uint64) (*memImage, error) {
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &memImage{fd: fd, size: size}, nil
}

// mapOnto maps the image copy-on-write over the start of buf, a mapping at least
// roundUp(size) long.
func (m *memImage) mapOnto(buf []byte) error {
	length := roundUpPage(m.size)
	if length > uint64(len(buf)) {
		return fmt.Errorf("image of %d bytes does not fit a %d-byte memory", m.size, len(buf))
	}
	_, err := unix.MmapPtr(m.fd, 0, unsafe.Pointer(&buf[0]), uintptr(length),
		unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_FIXED)
	return err
}

// restoreOnto brings buf, onto which mapOnto mapped m and which a guest has since used,
// back to m's contents without remapping it. A page the guest wrote is no longer the
// image's page but a private copy (the kernel's pagemap says it is anonymous): its bytes
// are copied back from the image, and it stays the instance's own, writable page. Pages
// never written still map the image and are left alone.
//
// Remapping instead would make every page the next call writes take a copy-on-write
// fault, and each such fault flushes the page's translation on every CPU running one of
// the process's threads: measured under load, those flushes were the largest single cost
// of a warm call. Restoring in place pays that once per page an instance ever writes.
//
// scratch is reused between calls for the page table entries. An error means buf must be
// remapped with mapOnto instead.
func (m *memImage) restoreOnto(buf []byte, scratch *[]byte) error {
	length := roundUpPage(m.size)
	if length > uint64(len(buf)) {
		return fmt.Errorf("image of %d bytes does not fit a %d-byte memory", m.size, len(buf))
	}
	if err := m.mapView(); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	view := m.view
	if view == nil {
		return errors.New("image closed")
	}
	pm, err := pagemapFile()
	if err != nil {
		return err
	}
	page := uint64(os.Getpagesize())
	pages := length / page
	if uint64(cap(*scratch)) < pages*8 {
		*scratch = make([]byte, pages*8)
	}
	entries := (*scratch)[:pages*8]
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	if _, err := pm.ReadAt(entries, int64(addr/page*8)); err != nil {
		return fmt.Errorf("read pagemap: %w", err)
	}
	const (
		present = 1 << 63
		swapped = 1 << 62
		file    = 1 << 61 // file page or shared: still the image's
	)
	for i := range pages {
		e := binary.LittleEndian.Uint64(entries[i*8:])
		if e&(present|swapped) == 0 || e&file != 0 {
			continue
		}
		off := i * page
		end := min(off+page, uint64(len(view)))
		if off >= end {
			clear(buf[off : off+page])
			continue
		}
		copy(buf[off:end], view[off:end])
		clear(buf[end : off+page])
	}
	return nil
}

// mapView maps the image shared and read-only, if it is not yet.
func (m *memImage) mapView() error {
	m.mu.RLock()
	ok := m.view != nil
	m.mu.RUnlock()
	if ok {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.closed:
		return errors.New("image closed")
	case m.view != nil:
		return nil
	case m.size == 0:
		return errors.New("empty image")
	}
	v, err := unix.Mmap(m.fd, 0, int(m.size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("map the image for reading: %w", err)
	}
	m.view = v
	return nil
}

// pagemap is this process's page table view, opened once: it tells which pages of a
// mapping were written since the mapping was made.
var pagemap struct {
	once sync.Once
	f    *os.File
	err  error
}

func pagemapFile() (*os.File, error) {
	pagemap.once.Do(func() { pagemap.f, pagemap.err = os.Open("/proc/self/pagemap") })
	return pagemap.f, pagemap.err
}

// close releases the image; instances that mapped it keep their mappings.
func (m *memImage) close() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != nil {
		unix.Munmap(m.view)
		m.view = nil
	}
	m.closed = true
	unix.Close(m.fd)
}

// imagesSupported reports whether this platform maps memory images.
const imagesSupported = true

func roundUpPage(n uint64) uint64 {
	p := uint64(os.Getpagesize())
	return (n + p - 1) / p * p
}

// newSparseImage seals a copy of buf (a whole linear memory) into a memfd, writing only
// its pages that are not all zero: holes read as zero and take no memory.
func newSparseImage(buf []byte) (*memImage, error) {
	fd, err := unix.MemfdCreate("capsulegate-snapshot", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	if err := unix.Ftruncate(fd, int64(len(buf))); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("ftruncate: %w", err)
	}
	// One write per run of pages that are not all zero, not one per page: a Go guest's
	// memory after _initialize is a few long runs.
	const page = 4096
	run := -1 // where the current run of written pages starts
	write := func(end int) error {
		if run < 0 {
			return nil
		}
		err := pwriteAll(fd, buf[run:end], int64(run))
		run = -1
		return err
	}
	for off := 0; off < len(buf); off += page {
		if !allZero(buf[off:min(off+page, len(buf))]) {
			if run < 0 {
				run = off
			}
		} else if err := write(off); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := write(len(buf)); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return seal(fd, uint64(len(buf)))
}

// zeroPage is what allZero compares a page with.
var zeroPage [4096]byte

func allZero(p []byte) bool {
	for len(p) > len(zeroPage) {
		if !bytes.Equal(p[:len(zeroPage)], zeroPage[:]) {
			return false
		}
		p = p[len(zeroPage):]
	}
	return bytes.Equal(p, zeroPage[:len(p)])
}

// pwriteAll writes all of p at off.
func pwriteAll(fd int, p []byte, off int64) error {
	for done := 0; done < len(p); {
		n, err := unix.Pwrite(fd, p[done:], off+int64(done))
		if err != nil {
			return fmt.Errorf("pwrite: %w", err)
		}
		done += n
	}
	return nil
}
