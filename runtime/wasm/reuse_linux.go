//go:build linux

package wasm

import "golang.org/x/sys/unix"

// discardPages drops the pages of b, which lie in a private anonymous mapping: the next
// touch reads zeros, as memory a fresh instance grows into does.
func discardPages(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	return unix.Madvise(b, unix.MADV_DONTNEED)
}
