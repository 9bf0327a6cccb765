//go:build unix

package wasm

import (
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// mmapMemory backs a linear memory with one anonymous mapping of the instance's whole
// limit, reserved but not committed: growing is a reslice — no copy, no zeroing (untouched
// pages read as zero) — and the address never moves. Free unmaps it.
type mmapMemory struct {
	a   *limitedAllocator
	buf []byte // the whole mapping
}

func newMmapMemory(a *limitedAllocator) (experimental.LinearMemory, bool) {
	if a.limit == 0 || a.limit > 1<<32 {
		return nil, false
	}
	buf, err := syscall.Mmap(-1, 0, int(a.limit), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON|mapNoReserve)
	if err != nil {
		return nil, false
	}
	switch {
	case a.image != nil:
		if a.image.mapOnto(buf) != nil {
			// The module has no data segments of its own: fall back to copying its data.
			syscall.Munmap(buf)
			return nil, false
		}
	case a.data != nil:
		if uint64(a.data.off)+uint64(len(a.data.block)) > uint64(len(buf)) {
			syscall.Munmap(buf)
			return nil, false
		}
		copy(buf[a.data.off:], a.data.block)
	}
	return &mmapMemory{a: a, buf: buf}, true
}

func (m *mmapMemory) Reallocate(size uint64) []byte {
	if size > m.a.limit || m.buf == nil {
		m.a.refuse()
		return nil
	}
	return m.buf[:size:size]
}

func (m *mmapMemory) Free() {
	if m.buf != nil {
		syscall.Munmap(m.buf)
		m.buf = nil
	}
}
