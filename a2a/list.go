package a2a

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ListTasks page sizes (A2A 1.0).
const (
	defaultPageSize = 50
	maxPageSize     = 100
)

type listParams struct {
	ContextID            string `json:"contextId"`
	Status               string `json:"status"`
	PageSize             *int   `json:"pageSize"`
	PageToken            string `json:"pageToken"`
	HistoryLength        *int   `json:"historyLength"`
	StatusTimestampAfter string `json:"statusTimestampAfter"`
	IncludeArtifacts     bool   `json:"includeArtifacts"`
}

type listResult struct {
	Tasks         []*wireTask `json:"tasks"`
	NextPageToken string      `json:"nextPageToken"`
	PageSize      int         `json:"pageSize"`
	TotalSize     int         `json:"totalSize"`
}

// list serves ListTasks: the caller's tasks the handler still knows, most recently
// updated first, filtered and paged by an opaque cursor (the last entry's update time
// and id).
func (h *Handler) list(d dialect, who caller, p listParams, links linker) (*listResult, *rpcError) {
	size := defaultPageSize
	if p.PageSize != nil {
		if *p.PageSize < 1 {
			return nil, errInvalidParams("pageSize must be at least 1")
		}
		size = min(*p.PageSize, maxPageSize)
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, errInvalidParams("historyLength must not be negative")
	}
	state := parseState(p.Status)
	if state == "" && p.Status != "" && p.Status != "TASK_STATE_UNSPECIFIED" {
		return nil, errInvalidParams(fmt.Sprintf("status %q is not a task state", p.Status))
	}
	var after time.Time
	if p.StatusTimestampAfter != "" {
		var err error
		if after, err = time.Parse(time.RFC3339Nano, p.StatusTimestampAfter); err != nil {
			return nil, errInvalidParams("statusTimestampAfter must be an ISO 8601 timestamp such as 2025-01-31T12:00:00Z")
		}
	}
	var cursor *snapshot
	if p.PageToken != "" {
		c, ok := parseCursor(p.PageToken)
		if !ok {
			return nil, errInvalidParams("pageToken is not one this agent issued")
		}
		cursor = c
	}

	keep := func(s *snapshot) bool {
		return (p.ContextID == "" || s.ContextID == p.ContextID) &&
			(state == "" || s.Status.State == state) &&
			(after.IsZero() || !s.Status.Time.Before(after))
	}
	h.mu.Lock()
	var all []*task
	h.store.each(func(t *task) { all = append(all, t) })
	h.mu.Unlock()
	var snaps []*snapshot
	inMemory := map[string]bool{}
	for _, t := range all {
		t.mu.Lock()
		s, mirror := t.snapshotLocked(), t.mirror
		t.mu.Unlock()
		if mirror && !terminal(s.Status.State) {
			continue // another replica's: as the store has it
		}
		inMemory[s.ID] = true
		if t.owner == who.principal && keep(s) {
			snaps = append(snaps, s)
		}
	}
	ds, durable := h.store.(*durableStore)
	if durable {
		// The finished tasks only the store holds, from its index; their records are read
		// for the page alone.
		onDisk, err := ds.finishedOnDisk(inMemory, who.principal)
		if err != nil {
			return nil, errStore(err)
		}
		for _, s := range onDisk {
			if keep(s) {
				snaps = append(snaps, s)
			}
		}
	}
	slices.SortFunc(snaps, newerFirst)
	res := &listResult{Tasks: []*wireTask{}, PageSize: size, TotalSize: len(snaps)}
	start := 0
	if cursor != nil {
		start, _ = slices.BinarySearchFunc(snaps, cursor, newerFirst)
		if start < len(snaps) && newerFirst(snaps[start], cursor) == 0 {
			start++
		}
	}
	end := min(start+size, len(snaps))
	for _, s := range snaps[start:end] {
		if durable && !inMemory[s.ID] {
			full, ok, err := ds.stored(s.ID)
			if err != nil {
				return nil, errStore(err)
			}
			if !ok {
				continue // removed by a retention sweep since the index was read
			}
			s = full
		}
		res.Tasks = append(res.Tasks, d.task(links.snapshot(s), p.HistoryLength, p.IncludeArtifacts))
	}
	if end < len(snaps) {
		last := snaps[end-1]
		res.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(last.Updated.UnixNano(), 10) + " " + last.ID))
	}
	return res, nil
}

// newerFirst orders by last update, newest first, then by id.
func newerFirst(a, b *snapshot) int {
	if c := b.Updated.Compare(a.Updated); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func parseCursor(token string) (*snapshot, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, false
	}
	ns, id, ok := strings.Cut(string(raw), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, false
	}
	return &snapshot{ID: id, Updated: time.Unix(0, n)}, true
}
