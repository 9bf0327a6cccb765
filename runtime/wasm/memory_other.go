//go:build !unix

package wasm

import "github.com/tetratelabs/wazero/experimental"

func newMmapMemory(*limitedAllocator) (experimental.LinearMemory, bool) { return nil, false }
