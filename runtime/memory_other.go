//go:build !unix

package runtime

import "github.com/tetratelabs/wazero/experimental"

func newMmapMemory(*limitedAllocator) (experimental.LinearMemory, bool) { return nil, false }
