package wasip2

import (
	"sync"
)

// kind is the resource type of a table slot.
type kind uint8

// The host-defined resource types of WASI 0.2.
const (
	kFree kind = iota
	kInputStream
	kOutputStream
	kPollable
	kError
	kDescriptor
	kDirEntryStream
	kTerminalInput
	kTerminalOutput
	kFields
	kOutgoingRequest
	kOutgoingBody
	kRequestOptions
	kFutureIncomingResponse
	kIncomingResponse
	kIncomingBody
	kFutureTrailers
	kindCount
)

var kindNames = [kindCount]string{
	kFree:                   "free slot",
	kInputStream:            "input-stream",
	kOutputStream:           "output-stream",
	kPollable:               "pollable",
	kError:                  "error",
	kDescriptor:             "descriptor",
	kDirEntryStream:         "directory-entry-stream",
	kTerminalInput:          "terminal-input",
	kTerminalOutput:         "terminal-output",
	kFields:                 "fields",
	kOutgoingRequest:        "outgoing-request",
	kOutgoingBody:           "outgoing-body",
	kRequestOptions:         "request-options",
	kFutureIncomingResponse: "future-incoming-response",
	kIncomingResponse:       "incoming-response",
	kIncomingBody:           "incoming-body",
	kFutureTrailers:         "future-trailers",
}

func (k kind) String() string {
	if k < kindCount {
		return kindNames[k]
	}
	return "unknown"
}

// DefaultMaxHandles bounds the handles one component instance may hold at once, over
// all resource types, so a guest that floods the table traps instead of growing host
// memory without end.
const DefaultMaxHandles = 10000

// closer is a resource that holds something to release when its handle ends.
type closer interface{ close() }

type slot struct {
	kind     kind
	v        any
	parent   uint32 // the slot this one is a child of (a stream's pollable…), 0 if none
	children uint32 // live children: the slot cannot be dropped or given away meanwhile
	next     uint32 // free list, when kind is kFree
}

// table is one component instance's handle table, as the canonical ABI keeps it: index 0
// is never valid, freed indexes are reused, and every access checks the resource type.
type table struct {
	mu    sync.Mutex
	slots []slot // slots[0] is the reserved index 0
	free  uint32 // head of the free list, 0 if empty
	live  int
	max   int
}

func newTable(max int) *table {
	if max <= 0 {
		max = DefaultMaxHandles
	}
	return &table{slots: make([]slot, 1, 64), max: max}
}

// add stores v as a new handle of kind k, a child of parent (0: none).
func (t *table) add(k kind, v any, parent uint32) (uint32, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live >= t.max {
		return 0, trapf(CodeLimit, false, "the resource table is full: %d handles live (the bound is %d); a new %s was refused", t.live, t.max, k)
	}
	if parent != 0 {
		t.slots[parent].children++
	}
	s := slot{kind: k, v: v, parent: parent}
	t.live++
	if i := t.free; i != 0 {
		t.free = t.slots[i].next
		t.slots[i] = s
		return i, nil
	}
	t.slots = append(t.slots, s)
	return uint32(len(t.slots) - 1), nil
}

// lookup returns the slot of handle i if it holds a k; t.mu held.
func (t *table) lookup(i uint32, k kind) (*slot, error) {
	if i == 0 || uint64(i) >= uint64(len(t.slots)) {
		return nil, trapf(CodeHandle, true, "handle %d is not in the table (want a %s)", i, k)
	}
	s := &t.slots[i]
	if s.kind == kFree {
		return nil, trapf(CodeHandle, true, "handle %d was dropped already (want a %s)", i, k)
	}
	if s.kind != k {
		return nil, trapf(CodeHandle, true, "handle %d is a %s, want a %s", i, s.kind, k)
	}
	return s, nil
}

// get returns the value of handle i, which must hold a k (a borrow).
func (t *table) get(i uint32, k kind) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(i, k)
	if err != nil {
		return nil, err
	}
	return s.v, nil
}

// take removes handle i, which must hold a k without live children, and returns its
// value: the guest gave it up (an own parameter) or dropped it.
func (t *table) take(i uint32, k kind) (any, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.lookup(i, k)
	if err != nil {
		return nil, err
	}
	if s.children != 0 {
		return nil, trapf(CodeChildren, true, "%s %d still has %d child resource(s) (pollables, streams): drop them first", k, i, s.children)
	}
	v, parent := s.v, s.parent
	t.slots[i] = slot{next: t.free}
	t.free = i
	t.live--
	if parent != 0 && t.slots[parent].children > 0 {
		t.slots[parent].children--
	}
	return v, nil
}

// drop ends handle i (resource.drop) and releases what it held.
func (t *table) drop(i uint32, k kind) error {
	v, err := t.take(i, k)
	if err != nil {
		return err
	}
	if c, ok := v.(closer); ok {
		c.close()
	}
	return nil
}

// closeAll releases every live resource (the instance ended).
func (t *table) closeAll() {
	t.mu.Lock()
	var cs []closer
	for i := range t.slots {
		if c, ok := t.slots[i].v.(closer); ok && t.slots[i].kind != kFree {
			cs = append(cs, c)
		}
		t.slots[i] = slot{}
	}
	t.slots = t.slots[:1]
	t.free, t.live = 0, 0
	t.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// count is the number of live handles.
func (t *table) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live
}
