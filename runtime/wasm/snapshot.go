package wasm

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/capsulegate/capsulegate/internal/wasmbin"
	"github.com/tetratelabs/wazero/api"
)

// Init snapshots. A Go guest spends most of a short call starting its runtime inside
// _initialize. Every instance of a module with the same environment and filesystem shape
// reaches the same state there, so the engine runs _initialize once per (module, grants)
// and keeps what it produced — the linear memory, as a sealed copy-on-write image, and the
// mutable globals — and starts later instances from it without running _initialize.
// Each call still sees a fresh instance (new, or reset: reuse.go): nothing a call does
// reaches the next one.
// What instances of one snapshot share is what _initialize computed: the Go runtime's
// hash and scheduler seeds, its start time, the environment it read.

// snapGlobalPrefix names the exports exportGlobals adds; guests cannot see exports.
const snapGlobalPrefix = "\x00capsulegate:global:"

// maxSnapshots bounds the snapshots kept per compiled module (one per session shape).
const maxSnapshots = 16

// snapshot is a module's state right after _initialize, for one set of grants.
type snapshot struct {
	image   *memImage
	pages   uint32
	globals []uint64  // by snapGlobals index
	sites   []envSite // where per-session values sit (sessionenv.go)
	// rands are the offsets of the Go runtime's random generators (entropy.go), given
	// fresh state before each call.
	rands []uint32
	// frozen: _initialize drew randomness that rands does not account for, so calls
	// started from this snapshot would share it (kept only under SnapshotAlways).
	frozen bool
}

// SnapshotPolicy says when a module's calls may start from an init snapshot.
type SnapshotPolicy uint8

const (
	// SnapshotAuto starts calls from an init snapshot unless _initialize drew randomness
	// the engine cannot refresh (entropy.go): then every call runs _initialize.
	SnapshotAuto SnapshotPolicy = iota
	// SnapshotAlways starts calls from an init snapshot even then: the calls share the
	// random values _initialize drew (for a guest whose init draws nothing that matters).
	SnapshotAlways
	// SnapshotNever runs _initialize for every call.
	SnapshotNever
)

// enter gives inst, an instance whose memory holds the snapshot, the call's own state:
// its session's values and fresh random generators. It reports false when it cannot.
func (snap *snapshot) enter(inst api.Module, vals map[string]string) bool {
	return patchSites(inst, snap.sites, vals) && refreshEntropy(inst, snap.rands)
}

// snapshots are the init snapshots of one compiled module, by grants key.
type snapshots struct {
	mu    sync.Mutex
	byKey map[[32]byte]*snapshot
	order [][32]byte
}

// get returns the snapshot kept for key; tried reports that one was taken and refused
// (its calls run _initialize, without capturing it again).
func (s *snapshots) get(key [32]byte) (snap *snapshot, tried bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap, tried = s.byKey[key]
	if snap != nil && snap.image == nil {
		return nil, true
	}
	return snap, tried
}

// put keeps snap for key; a snapshot without an image records a refusal.
func (s *snapshots) put(key [32]byte, snap *snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[[32]byte]*snapshot{}
	}
	if _, ok := s.byKey[key]; ok {
		snap.image.close()
		return
	}
	if len(s.order) == maxSnapshots {
		// Instances mapping the evicted image keep their mapping; only the fd goes.
		old := s.order[0]
		s.byKey[old].image.close()
		delete(s.byKey, old)
		s.order = s.order[1:]
	}
	s.byKey[key] = snap
	s.order = append(s.order, key)
}

// snapshotKey identifies what _initialize can observe of the grants — the environment,
// whether there is a filesystem, and the memory limit — and the snapshot policy.
func snapshotKey(g Grants, limit uint64) [32]byte {
	h := sha256.New()
	for _, kv := range g.Env {
		h.Write([]byte(kv))
		h.Write([]byte{0})
	}
	fmt.Fprintf(h, "fs=%t limit=%d policy=%d", g.FS != nil, limit, g.Snapshot)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// capture takes the snapshot of inst, which has just run _initialize after drawing drawn
// bytes from random_get.
func (c *compiled) capture(inst api.Module, drawn int64) (*snapshot, error) {
	mem := inst.Memory()
	if mem == nil {
		return nil, errors.New("no memory")
	}
	size := mem.Size()
	buf, ok := mem.Read(0, size)
	if !ok {
		return nil, errors.New("memory not readable")
	}
	// The runtime's generators are static data, below the memory the module starts with;
	// generators the guest made on its heap are its own (maybe seeded on purpose).
	static := buf[:min(uint64(len(buf)), uint64(c.minPages)*pageSize)]
	snap := &snapshot{pages: size / pageSize, rands: findRandStates(static)}
	// The Go runtime's seed is the draw its generators account for; any other draw (or a
	// draw with no generator found) would be the same in every call.
	snap.frozen = drawn > 0 && (len(snap.rands) == 0 || drawn > goRuntimeSeedBytes)
	for i := range c.snapGlobals {
		g := inst.ExportedGlobal(snapGlobalName(i))
		if g == nil {
			return nil, fmt.Errorf("global %d not exported", i)
		}
		snap.globals = append(snap.globals, g.Get())
	}
	img, err := newSparseImage(buf)
	if err != nil {
		return nil, err
	}
	snap.image = img
	return snap, nil
}

// restore brings a fresh instance, created over the snapshot's memory image, to the
// snapshot: its memory size and its globals.
func (snap *snapshot) restore(inst api.Module) error {
	mem := inst.Memory()
	if have := mem.Size() / pageSize; have < snap.pages {
		if _, ok := mem.Grow(snap.pages - have); !ok {
			return fmt.Errorf("cannot grow memory to the snapshot's %d pages", snap.pages)
		}
	}
	for i, v := range snap.globals {
		g, ok := inst.ExportedGlobal(snapGlobalName(i)).(api.MutableGlobal)
		if !ok {
			return fmt.Errorf("global %d is not mutable", i)
		}
		g.Set(v)
	}
	return nil
}

func snapGlobalName(i int) string { return fmt.Sprintf("%s%d", snapGlobalPrefix, i) }

// exportGlobals returns wasm with every mutable global it defines exported under
// snapGlobalPrefix, so the host can read and set them; it reports how many it exported.
// A module it cannot parse is returned unchanged with ok false.
func exportGlobals(wasm []byte) (out []byte, n int, ok bool) {
	sections, ok := wasmbin.Sections(wasm)
	if !ok {
		return wasm, 0, false
	}
	var (
		imported  int
		mutable   []int // indexes (in the global index space) of defined mutable globals
		exportSec = -1
	)
	for i, sec := range sections {
		body := wasm[sec.Start:sec.End]
		var err error
		switch sec.ID {
		case wasmbin.SectionImport:
			var globals uint64
			_, globals, _, err = countImports(body)
			imported = int(globals)
		case wasmbin.SectionGlobal:
			mutable, err = mutableGlobals(body, imported)
		case wasmbin.SectionExport:
			exportSec = i
		}
		if err != nil {
			return wasm, 0, false
		}
	}
	if exportSec < 0 || len(mutable) == 0 {
		return wasm, 0, false
	}
	es := sections[exportSec]
	r := wasmbin.NewReader(wasm[es.Start:es.End])
	count := r.U()
	if r.Bad() {
		return wasm, 0, false
	}
	var nb []byte
	nb = binary.AppendUvarint(nb, count+uint64(len(mutable)))
	nb = append(nb, r.Rest()...)
	for i, idx := range mutable {
		name := snapGlobalName(i)
		nb = binary.AppendUvarint(nb, uint64(len(name)))
		nb = append(nb, name...)
		nb = append(nb, 0x03)
		nb = binary.AppendUvarint(nb, uint64(idx))
	}
	return wasmbin.Rebuild(wasm, sections, map[int][]byte{exportSec: nb}), len(mutable), true
}

func mutableGlobals(body []byte, imported int) ([]int, error) {
	r := wasmbin.NewReader(body)
	n := r.U()
	var out []int
	for i := uint64(0); i < n && !r.Bad(); i++ {
		r.Byte() // value type
		if r.Byte() == 1 {
			out = append(out, imported+int(i))
		}
		if err := r.SkipConstExpr(); err != nil {
			return nil, err
		}
	}
	if r.Bad() {
		return nil, wasmbin.ErrMalformed
	}
	return out, nil
}
