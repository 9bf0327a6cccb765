package taskdb

import (
	"sort"

	"github.com/capsulegate/capsulegate/taskstore"
)

// A task's push configs live under its key in the "push" bucket, so DeleteTask and the
// evictions remove them with the task, and a config never outlives its task.

// PutPush creates or replaces the push config (capsule, p.TaskID, p.ID), Data and
// Delivered both. A task the store does not hold (never stored, or deleted or evicted
// meanwhile) is refused with E-STORE-011 and nothing is written.
func (db *DB) PutPush(capsule string, p taskstore.Push) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, p.TaskID, "push config id", p.ID); err != nil {
		return taskstore.Failed(err)
	}
	task, key, v := taskKey(capsule, p.TaskID), itemKey(capsule, p.TaskID, p.ID), encodePush(p)
	return db.enqueue(func(w *view) error {
		if w.get(bTasks, task) == nil {
			// Refused here, in order with the writes before it, rather than at the call:
			// a PutTask queued just before has not been committed yet.
			return refusal{taskstore.NoTask()}
		}
		w.put(bPush, key, v)
		return nil
	})
}

// SetDelivered raises the config's Delivered to seq, never lowering it; a config gone
// meanwhile (deleted, or its task removed) is not an error.
func (db *DB) SetDelivered(capsule, taskID, id string, seq uint64) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "push config id", id); err != nil {
		return taskstore.Failed(err)
	}
	key := itemKey(capsule, taskID, id)
	return db.enqueue(func(w *view) error {
		v := w.get(bPush, key)
		if v == nil {
			return nil
		}
		p, err := decodePush(v)
		if err != nil || p.Delivered >= seq {
			return err
		}
		p.Delivered = seq
		w.put(bPush, key, encodePush(p))
		return nil
	})
}

// DeletePush removes the push config (capsule, taskID, id); an absent one is not an error.
func (db *DB) DeletePush(capsule, taskID, id string) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "push config id", id); err != nil {
		return taskstore.Failed(err)
	}
	key := itemKey(capsule, taskID, id)
	return db.enqueue(func(w *view) error { w.del(bPush, key); return nil })
}

// Pushes returns the task's push configs in id order.
func (db *DB) Pushes(capsule, taskID string) ([]taskstore.Push, error) {
	if err := taskstore.CheckTaskIDs(capsule, taskID); err != nil {
		return nil, err
	}
	var out []taskstore.Push
	err := db.view(func(r *view) error {
		return scanPush(r, taskKey(capsule, taskID), func(p taskstore.Push) bool { out = append(out, p); return true })
	})
	// Keys order ids by length first (they are length-prefixed); callers want the ids' order.
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// AllPushes calls fn for every push config of the capsule, task by task in key order,
// until fn returns false: what a start reads to resume deliveries.
func (db *DB) AllPushes(capsule string, fn func(taskstore.Push) bool) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	return db.view(func(r *view) error {
		return scanPush(r, appendString(nil, capsule), func(p taskstore.Push) bool { return call(fn, p) })
	})
}

// scanPush decodes the configs under prefix; a store opened read-only from before push
// configs has no bucket, which reads as empty.
func scanPush(r *view, prefix []byte, fn func(taskstore.Push) bool) error {
	return r.scan(bPush, nil, prefix, func(_, v []byte) (bool, error) {
		p, err := decodePush(v)
		return err == nil && fn(p), err
	})
}
