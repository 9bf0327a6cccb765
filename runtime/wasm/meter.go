package wasm

import (
	"maps"
	"sync"
	"time"
)

// Meter adds up what a run of guest calls used (Grants.Meter): the time spent inside
// them, the largest linear memory any reached, and their failures by reason. A session
// gives every guest it calls the same meter, and reads it per task (Take). Safe for
// concurrent use; the zero value is ready.
type Meter struct {
	mu    sync.Mutex
	guest time.Duration
	peak  uint64
	traps map[string]int
}

// Usage is what a meter counted between two Takes.
type Usage struct {
	// Guest is the wall-clock time inside guest calls, from the call's start
	// (instantiation included) to its end, as capsule_guest_call_duration_seconds counts it.
	Guest time.Duration
	// PeakMemory is the largest linear memory, in bytes, any call's instance had when it
	// returned: a guest's memory only grows during a call.
	PeakMemory uint64
	// Traps are the calls that failed, by reason (deadline, memory_limit, trap, exit,
	// abi), as capsule_guest_traps_total counts them: a canceled call is not one.
	Traps map[string]int
}

// Take returns what the meter counted since the last Take and starts counting afresh.
func (m *Meter) Take() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	u := Usage{Guest: m.guest, PeakMemory: m.peak, Traps: maps.Clone(m.traps)}
	m.guest, m.peak, m.traps = 0, 0, nil
	return u
}

// call adds one call that took d and failed for reason ("" when it did not).
func (m *Meter) call(d time.Duration, reason string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.guest += d
	if reason != "" && reason != ReasonCanceled { // as the traps counter: a cancel is no trap
		if m.traps == nil {
			m.traps = map[string]int{}
		}
		m.traps[reason]++
	}
}

// memory records that an instance had size bytes of linear memory.
func (m *Meter) memory(size uint64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.peak = max(m.peak, size)
	m.mu.Unlock()
}
