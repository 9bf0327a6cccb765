package wasm

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// plantRandState writes at mem[o:] a chacha8rand state for key seed at counter c, read
// up to i, as the Go runtime lays it out.
func plantRandState(mem []byte, o int, seed [32]byte, c, i uint32) {
	g := mrand.NewChaCha8(seed)
	for range c / randCtrInc * randChunk {
		g.Uint64()
	}
	n := uint32(randChunk)
	if c == randCtrMax-randCtrInc {
		n -= randReseed
	}
	for w := range n {
		binary.LittleEndian.PutUint64(mem[o+int(w)*8:], g.Uint64())
	}
	copy(mem[o+randBufBytes:], seed[:])
	tail := mem[o+randBufBytes+randSeedBytes:]
	binary.LittleEndian.PutUint32(tail, i)
	binary.LittleEndian.PutUint32(tail[4:], n)
	binary.LittleEndian.PutUint32(tail[8:], c)
}

// TestFindRandStates plants generators at every counter a state can hold and checks
// each is found at its offset, and that a state with one word of its output or its key
// changed, or a counter it cannot hold, is not (so nothing but a generator is
// overwritten).
func TestFindRandStates(t *testing.T) {
	var seed [32]byte
	rand.Read(seed[:])
	for _, tt := range []struct {
		name  string
		c, i  uint32
		spoil func(mem []byte, o int)
		found bool
	}{
		{"fresh", 0, 0, nil, true},
		{"read", 0, 17, nil, true},
		{"second block", 4, 32, nil, true},
		{"third block", 8, 3, nil, true},
		{"last block", 12, 28, nil, true},
		{"output changed", 4, 5, func(mem []byte, o int) { mem[o+100] ^= 1 }, false},
		{"key changed", 0, 5, func(mem []byte, o int) { mem[o+randBufBytes+3] ^= 1 }, false},
		{"counter off", 0, 5, func(mem []byte, o int) { mem[o+randBufBytes+randSeedBytes+8] = 2 }, false},
		{"index past length", 0, 5, func(mem []byte, o int) { mem[o+randBufBytes+randSeedBytes] = 40 }, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mem := make([]byte, 8192)
			rand.Read(mem[:1024]) // noise before the state
			const o = 4096 + 72
			plantRandState(mem, o, seed, tt.c, tt.i)
			if tt.spoil != nil {
				tt.spoil(mem, o)
			}
			got := findRandStates(mem)
			if want := []uint32{o}; tt.found != slices.Equal(got, want) || !tt.found && len(got) != 0 {
				t.Fatalf("found %v, want found=%t at %d", got, tt.found, o)
			}
		})
	}
	// Generators of both buffer lengths in one memory, the later planted first: all are
	// found, in offset order.
	mem := make([]byte, 1<<16)
	rand.Read(mem)
	offsets := []uint32{8, 2048 + 16, 40000}
	for i, o := range slices.Backward(offsets) {
		plantRandState(mem, int(o), seed, uint32(4*i+4), uint32(i)) // the last at counter 12: 28 words
	}
	if got := findRandStates(mem); !slices.Equal(got, offsets) {
		t.Errorf("found %v, want %v", got, offsets)
	}
}

// TestSnapshotEntropy: a Go guest's snapshot holds the runtime's generators and nothing
// frozen, so it is kept; a guest whose init drew from crypto/rand gets no snapshot (every
// call runs _initialize, and draws its own key) unless the policy is SnapshotAlways, which
// keeps it knowingly (every call sees init's key); SnapshotNever never takes one.
func TestSnapshotEntropy(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name       string
		drawAtInit bool
		policy     SnapshotPolicy
		snapshot   bool
		sameKey    bool
	}{
		{"go runtime only", false, SnapshotAuto, true, false},
		{"init drew", true, SnapshotAuto, false, false},
		{"init drew, always", true, SnapshotAlways, true, true},
		{"never", false, SnapshotNever, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, mod := probeEngine(t)
			g := probeGrants(t)
			g.Snapshot = tt.policy
			if tt.drawAtInit {
				g.Env = append(g.Env, "DRAW_AT_INIT=1")
			}
			keys := map[string]bool{}
			const calls = 4
			for i := range calls {
				rep, err := probeCall(ctx, e, mod, g, nil, "probe")
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				for l := range strings.SplitSeq(rep, "\n") {
					if v, ok := strings.CutPrefix(l, "key-init="); ok {
						keys[v] = true
					}
				}
			}
			snap, tried := mod.snaps.get(snapshotKey(startupGrants(g), 128<<20))
			if (snap != nil) != tt.snapshot {
				t.Fatalf("snapshot kept: %t, want %t (tried %t)", snap != nil, tt.snapshot, tried)
			}
			if snap != nil && len(snap.rands) == 0 {
				t.Error("the snapshot holds no Go runtime generator")
			}
			// With a snapshot: the call that takes it, and the warm instance started from it.
			want := map[bool]int64{true: 2, false: calls}[tt.snapshot]
			if n := mod.instantiations.Load(); n != want {
				t.Errorf("%d instantiations for %d calls, want %d", n, calls, want)
			}
			if tt.drawAtInit {
				if want := map[bool]int{true: 1, false: calls}[tt.sameKey]; len(keys) != want {
					t.Errorf("%d distinct init keys over %d calls, want %d", len(keys), calls, want)
				}
			}
		})
	}
}
