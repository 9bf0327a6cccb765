package a2a

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"time"
)

// newID returns prefix + 32 lowercase hex digits of a UUIDv7, the tsk_… and ctx_… ids of
// docs/reference/a2a.md "Shapes": time-ordered, so ids sort roughly by creation in logs
// and listings.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	ms := uint64(time.Now().UnixMilli())
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], ms)
	copy(b[0:6], ts[2:8])
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	return prefix + hex.EncodeToString(b[:])
}
