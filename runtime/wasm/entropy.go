package wasm

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/tetratelabs/wazero/api"
)

// Fresh entropy. An init snapshot holds whatever random state _initialize left in memory,
// so every instance started from it (and every warm reset back to it) would draw the
// same numbers. The Go runtime keeps its random state in chacha8rand generators (one
// per thread and one global; on wasip1 there is one thread): it is what math/rand,
// math/rand/v2, map hash seeds and map iteration order draw from. The engine finds those
// generators in a snapshot's static data (below the memory the module starts with; a
// generator the guest built on its heap is left alone, as it may be seeded on purpose)
// and, before each call starts on the snapshot's state,
// overwrites their key and buffered output with bytes from the host's CSPRNG, so each call
// draws as a fresh instance does: from its own unpredictable state.
//
// A guest that read the host's random source during _initialize but whose state the host
// cannot find (another language's runtime, or a Go guest whose own init drew from
// crypto/rand) would hand every call the same values; such a guest gets no snapshot by
// default (snapshotPolicy). What stays shared across calls of one snapshot is what the
// guest derived from its draw before the snapshot (for Go: the memory hash key, kept so
// the maps built in init still find their keys, and the scheduler's cheap random state).

// goRuntimeSeedBytes is what a Go guest's runtime reads from random_get while it starts
// (runtime.randinit's seed of its global generator); every generator the runtime has is
// derived from it.
const goRuntimeSeedBytes = 32

// The layout of the Go runtime's chacha8rand.State (internal/chacha8rand): 32 uint64 of
// buffered output, the 4-word key, then the read index, the buffer's length and the
// block counter (uint32 each).
const (
	randBufBytes   = 32 * 8
	randSeedBytes  = 4 * 8
	randStateBytes = randBufBytes + randSeedBytes + 3*4
	randCtrInc     = 4  // the counter steps by 4 blocks per refill
	randCtrMax     = 16 // and the key is replaced when it reaches 16
	randChunk      = 32 // outputs per refill
	randReseed     = 4  // outputs of the last refill kept back as the next key
)

// findRandStates returns the offsets in mem of the Go runtime's random generators: the
// places whose buffered output is what chacha8rand computes from the key beside it at the
// counter beside it. A match is a 256-byte ChaCha8 output under the adjacent key, which
// other data does not reproduce by chance.
func findRandStates(mem []byte) []uint32 {
	// Every generator's buffer length is randChunk, or randChunk-randReseed in the key's
	// last refill: a little-endian word whose first byte is one of the two. Looking for
	// those bytes (a vectorised search through mostly other bytes) finds the few places
	// worth checking, where trying every 8-byte offset of the static data cost about 2 ms
	// per snapshot.
	const nAt = randBufBytes + randSeedBytes + 4 // the buffer length's offset in a state
	var out []uint32
	for _, b := range [...]byte{randChunk, randChunk - randReseed} {
		for k := nAt; k < len(mem); k++ {
			j := bytes.IndexByte(mem[k:], b)
			if j < 0 {
				break
			}
			k += j
			if o := k - nAt; o%8 == 0 && o+randStateBytes <= len(mem) && isRandState(mem, o) {
				out = append(out, uint32(o))
			}
		}
	}
	slices.Sort(out)
	return out
}

// isRandState reports whether mem holds a chacha8rand generator at o.
func isRandState(mem []byte, o int) bool {
	le := binary.LittleEndian
	tail := mem[o+randBufBytes+randSeedBytes:]
	i, n, c := le.Uint32(tail), le.Uint32(tail[4:]), le.Uint32(tail[8:])
	if c%randCtrInc != 0 || c >= randCtrMax || i > n {
		return false
	}
	if want := uint32(randChunk); c == randCtrMax-randCtrInc {
		if n != want-randReseed {
			return false
		}
	} else if n != want {
		return false
	}
	var seed [32]byte
	copy(seed[:], mem[o+randBufBytes:o+randBufBytes+randSeedBytes])
	if seed == ([32]byte{}) {
		return false
	}
	return chachaBlockMatches(seed, c, mem[o:o+randBufBytes], n)
}

// chachaBlockMatches reports whether buf's first n words are chacha8rand's output for key
// seed at block counter c: math/rand/v2's ChaCha8 yields the blocks of one key in counter
// order (32 words each, the last of the four holding back 4), so block c starts after
// c/4 full blocks.
func chachaBlockMatches(seed [32]byte, c uint32, buf []byte, n uint32) bool {
	g := mrand.NewChaCha8(seed)
	for range c / randCtrInc * randChunk {
		g.Uint64()
	}
	for w := range n {
		if g.Uint64() != binary.LittleEndian.Uint64(buf[w*8:]) {
			return false
		}
	}
	return true
}

// refreshEntropy gives the generators at offsets in m's memory a new key and new buffered
// output from the host's CSPRNG, leaving their read index and counter: the next draw reads
// fresh output, and the next refill computes from the fresh key. It reports false when a
// generator lies outside the memory.
func refreshEntropy(m api.Module, offsets []uint32) bool {
	if len(offsets) == 0 {
		return true
	}
	mem := m.Memory()
	if mem == nil {
		return false
	}
	// One read of the host's CSPRNG for every generator: a call pays for it on its way in.
	const each = randBufBytes + randSeedBytes
	var buf [2 * each]byte // the runtime has two: the thread's and the global one
	fresh := buf[:]
	if n := len(offsets) * each; n > len(fresh) {
		fresh = make([]byte, n)
	} else {
		fresh = fresh[:n]
	}
	_, _ = rand.Read(fresh) // crypto/rand.Read does not fail
	for i, o := range offsets {
		if !mem.Write(o, fresh[i*each:(i+1)*each]) {
			return false
		}
	}
	return true
}

// randReader feeds a guest's random_get from the host's CSPRNG, counting what it hands
// out to the instance's call context (so a snapshot knows whether _initialize drew).
type randReader struct{ drawn *atomic.Int64 }

func (r randReader) Read(p []byte) (int, error) {
	if r.drawn != nil {
		r.drawn.Add(int64(len(p)))
	}
	return rand.Read(p)
}
