package a2a

import (
	"encoding/json"
	"fmt"

	"github.com/capsulegate/capsulegate/internal/taskdb"
)

// pushKeeper is the part of the task store that keeps push configs and their delivery
// cursors (taskdb's Push records).
type pushKeeper interface {
	PutPush(capsule string, p pushRow) <-chan error
	SetDelivered(capsule, taskID, id string, seq uint64) <-chan error
	DeletePush(capsule, taskID, id string) <-chan error
	Pushes(capsule, taskID string) ([]pushRow, error)
	AllPushes(capsule string, fn func(pushRow) bool) error
}

// pushKeeperOf returns db's keeper of push configs; nil keeps them in memory only.
var pushKeeperOf = func(db *taskdb.DB) pushKeeper { return nil }

// putPush writes t's config ps with its cursor (t.mu held).
func (s *durableStore) putPush(t *task, ps *pushState) *durable {
	if s.keeper == nil {
		return nil
	}
	data, _ := json.Marshal(ps.cfg) // strings only: cannot fail
	return &durable{chs: []<-chan error{s.keeper.PutPush(s.capsule, pushRow{TaskID: t.id, ID: ps.cfg.ID, Data: data, Delivered: ps.delivered})}}
}

// dropPush deletes t's config id.
func (s *durableStore) dropPush(t *task, id string) *durable {
	if s.keeper == nil {
		return nil
	}
	return &durable{chs: []<-chan error{s.keeper.DeletePush(s.capsule, t.id, id)}}
}

// pushDelivered raises the delivery cursor of t's config id to seq.
func (s *durableStore) pushDelivered(t *task, id string, seq uint64) *durable {
	if s.keeper == nil {
		return nil
	}
	return &durable{chs: []<-chan error{s.keeper.SetDelivered(s.capsule, t.id, id, seq)}}
}

// pushes reads t's configs; an unreadable store reads as none (logged by the caller's
// absence of deliveries, the store's own check reports it).
func (s *durableStore) pushes(t *task) []pushRow {
	if s.keeper == nil {
		return nil
	}
	rows, err := s.keeper.Pushes(s.capsule, t.id)
	if err != nil {
		s.spec.logger.Error("a2a: reading a task's push configs", "task", t.id, "error", err)
		return nil
	}
	return rows
}

// allPushes calls fn for every stored config of the capsule.
func (s *durableStore) allPushes(fn func(pushRow) bool) error {
	if s.keeper == nil {
		return nil
	}
	if err := s.keeper.AllPushes(s.capsule, fn); err != nil {
		return fmt.Errorf("a2a: reading the stored push configs: %w", err)
	}
	return nil
}
