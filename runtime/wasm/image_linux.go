//go:build linux

package wasm

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// memImage is a module's initial memory contents (its data segments) in a sealed memfd.
// Each instance maps it copy-on-write at the bottom of its linear memory, so starting an
// instance copies nothing: pages are shared until the guest writes them.
type memImage struct {
	fd   int
	size uint64 // bytes of the file: the data's offset plus its length
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

func (m *memImage) close() { unix.Close(m.fd) }

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
	const page = 4096
	for off := 0; off < len(buf); off += page {
		p := buf[off:min(off+page, len(buf))]
		if allZero(p) {
			continue
		}
		if err := pwriteAll(fd, p, int64(off)); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	return seal(fd, uint64(len(buf)))
}

func allZero(p []byte) bool {
	for len(p) >= 8 {
		if *(*uint64)(unsafe.Pointer(&p[0])) != 0 {
			return false
		}
		p = p[8:]
	}
	for _, b := range p {
		if b != 0 {
			return false
		}
	}
	return true
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
