// Package samefile tells whether a file holds given bytes, reading it in small chunks:
// checking that a file is unchanged this way costs a read and a compare, no hash and no
// allocation the size of the file.
package samefile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
)

const chunk = 64 << 10

var bufs = sync.Pool{New: func() any { return new([chunk]byte) }}

// Holds reports whether the file at path holds exactly want.
func Holds(path string, want []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("samefile: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("samefile: %w", err)
	}
	if info.Size() != int64(len(want)) {
		return false, nil
	}
	buf := bufs.Get().(*[chunk]byte)
	defer bufs.Put(buf)
	for off := 0; ; {
		n, err := f.Read(buf[:])
		if n > 0 {
			if off+n > len(want) || !bytes.Equal(buf[:n], want[off:off+n]) {
				return false, nil
			}
			off += n
		}
		if err == io.EOF {
			return off == len(want), nil
		}
		if err != nil {
			return false, fmt.Errorf("samefile: %w", err)
		}
	}
}
