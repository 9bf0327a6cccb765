package a2a

import (
	"encoding/json"
	"fmt"

	"github.com/capsulegate/capsulegate/taskstore"
)

// putPush writes t's config ps with its cursor (t.mu held).
func (s *durableStore) putPush(t *task, ps *pushState) *durable {
	data, _ := json.Marshal(ps.cfg) // strings only: cannot fail
	return s.write(s.db.PutPush(s.capsule, taskstore.Push{TaskID: t.id, ID: ps.cfg.ID, Data: data, Delivered: ps.delivered}))
}

// dropPush deletes t's config id.
func (s *durableStore) dropPush(t *task, id string) *durable {
	return s.write(s.db.DeletePush(s.capsule, t.id, id))
}

// pushDelivered raises the delivery cursor of t's config id to seq.
func (s *durableStore) pushDelivered(t *task, id string, seq uint64) *durable {
	return s.write(s.db.SetDelivered(s.capsule, t.id, id, seq))
}

// pushes reads t's configs; an unreadable store reads as none (logged by the caller's
// absence of deliveries, the store's own check reports it).
func (s *durableStore) pushes(t *task) []pushRow {
	rows, err := s.db.Pushes(s.capsule, t.id)
	if err != nil {
		s.spec.logger.Error("a2a: reading a task's push configs", "task", t.id, "error", err)
		return nil
	}
	return rows
}

// allPushes calls fn for every stored config of the capsule.
func (s *durableStore) allPushes(fn func(pushRow) bool) error {
	if err := s.db.AllPushes(s.capsule, fn); err != nil {
		return fmt.Errorf("a2a: reading the stored push configs: %w", err)
	}
	return nil
}
