// Package cabi holds the guest side of the canonical ABI that the guest SDK packages
// share: the allocator behind cabi_realloc, ownership of host-written memory, and the
// frames that keep lowered values alive until the host is done reading them.
package cabi

import "encoding/binary"

// Sizes and offsets of the canonical ABI layouts (32-bit memory) used by the SDK.
const (
	PairSize = 16 // tuple<string, string>: (ptr, len), (ptr, len)

	// tool-result record
	ResultStatus   = 0
	ResultSummary  = 4
	ResultData     = 16
	ResultDataPath = 28
	ResultTrunc    = 40
	ResultMetadata = 44
	ResultSize     = 52
)

// U32 reads a little-endian u32 at off.
func U32(b []byte, off uint32) uint32 { return binary.LittleEndian.Uint32(b[off:]) }

// PutU32 writes a little-endian u32 at off.
func PutU32(b []byte, off, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
