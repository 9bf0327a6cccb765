// Package syncbuf holds Buffer, a bytes.Buffer safe for one writer goroutine (a child
// process's output) and tests reading it meanwhile.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer collects what is written to it under a lock; String reads it under the same.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
