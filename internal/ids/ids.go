// Package ids makes the ids of sessions, contexts, tasks, messages and events: a prefix
// and the 32 lowercase hex digits of a UUIDv7 (docs/reference/trace.md "Envelope").
package ids

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// New returns prefix + 32 lowercase hex digits of a UUIDv7: time-ordered, so folders,
// traces and listings sort by creation, with 74 random bits.
func New(prefix string) string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint16(u[0:2], uint16(ms>>32))
	binary.BigEndian.PutUint32(u[2:6], uint32(ms))
	u[6] = 0x70 | u[6]&0x0f // version 7
	u[8] = 0x80 | u[8]&0x3f // RFC 9562 variant
	return prefix + hex.EncodeToString(u[:])
}
