package taskdb

import (
	"bytes"
	"encoding/binary"
	"time"

	"github.com/capsulegate/capsulegate/taskstore"
	bolt "go.etcd.io/bbolt"
)

// Reads see every write whose channel has yielded nil, and never block the committer.

// Task returns the task (capsule, id), and whether it exists: the record with the index
// fields its head keeps (Done, State, Since).
func (db *DB) Task(capsule, id string) (taskstore.Task, bool, error) {
	if err := taskstore.CheckTaskIDs(capsule, id); err != nil {
		return taskstore.Task{}, false, err
	}
	var t taskstore.Task
	var found bool
	err := db.view(func(r *view) error {
		key := taskKey(capsule, id)
		v := r.get(bTasks, key)
		if v == nil {
			return nil
		}
		var err error
		if t, err = decodeTask(v); err != nil {
			return err
		}
		found = true
		return withHead(r, key, &t)
	})
	return t, found, err
}

// withHead fills t's index fields from its head: the record does not repeat them.
func withHead(r *view, key []byte, t *taskstore.Task) error {
	v := r.get(bHeads, key)
	if v == nil {
		return nil // a task written before the index: Open builds it, so only read-only stores lack it
	}
	h, err := decodeHead(v)
	if err != nil {
		return err
	}
	t.Done, t.State, t.Since = h.Done, h.State, h.Since
	return nil
}

// Tasks calls fn for each of the capsule's tasks (as Task reads them), in key order,
// until fn returns false.
func (db *DB) Tasks(capsule string, fn func(taskstore.Task) bool) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	return db.view(func(r *view) error {
		return r.scan(bTasks, nil, appendString(nil, capsule), func(k, v []byte) (bool, error) {
			t, err := decodeTask(v)
			if err == nil {
				err = withHead(r, k, &t)
			}
			return err == nil && call(fn, t), err
		})
	})
}

// Heads calls fn for the index entry of each of the capsule's tasks, in key order, until
// fn returns false: a scan that reads no task's record.
func (db *DB) Heads(capsule string, fn func(taskstore.Head) bool) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	return db.view(func(r *view) error {
		return r.scan(bHeads, nil, appendString(nil, capsule), func(_, v []byte) (bool, error) {
			h, err := decodeHead(v)
			return err == nil && call(fn, h), err
		})
	})
}

// Events calls fn for each event of the task with Seq > after, in Seq order, until fn
// returns false.
func (db *DB) Events(capsule, taskID string, after uint64, fn func(taskstore.Event) bool) error {
	if err := taskstore.CheckTaskIDs(capsule, taskID); err != nil {
		return err
	}
	prefix := taskKey(capsule, taskID)
	return db.view(func(r *view) error {
		return r.scan(bEvents, seqKey(prefix, after), prefix, func(k, v []byte) (bool, error) {
			if seqOf(k) <= after {
				return true, nil
			}
			e, err := decodeEvent(v)
			return err == nil && call(fn, e), err
		})
	})
}

// Turns returns the conversation's turns, oldest first.
func (db *DB) Turns(capsule, contextID string) ([][]byte, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return nil, err
	}
	if err := taskstore.CheckID("context id", contextID); err != nil {
		return nil, err
	}
	var out [][]byte
	err := db.view(func(r *view) error {
		return r.scan(bTurns, nil, taskKey(capsule, contextID), func(_, v []byte) (bool, error) {
			item, err := decodeTurn(v)
			out = append(out, item)
			return err == nil, err
		})
	})
	return out, err
}

// Evict removes the capsule's tasks updated before olderThan and then, oldest first, those
// beyond maxTasks (0: no limit), with their journals, their push configs and the turns of
// conversations no remaining task belongs to, sparing the tasks keep reports (nil: none):
// they are never removed, do not count towards maxTasks, and their conversations' turns
// stay. It goes through the committer like every write and returns once the removal is on
// disk; keep is called from the committer: it must not block nor write to db.
func (db *DB) Evict(capsule string, olderThan time.Time, maxTasks int, keep func(id string) bool) (int, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return 0, err
	}
	if db.opts.ReadOnly {
		return 0, errReadOnly // a write refused whether or not it would remove anything
	}
	// Most sweeps find nothing to remove (every capsule's at a gateway's start): a read
	// tells, sparing a write transaction and its syncs per capsule.
	due := false
	if err := db.view(func(r *view) error {
		remove, _, err := evictPlan(r, capsule, olderThan, maxTasks, keep)
		due = len(remove) > 0
		return err
	}); err != nil || !due {
		return 0, err
	}
	removed := 0
	err := <-db.enqueue(func(w *view) error {
		remove, live, err := evictPlan(w, capsule, olderThan, maxTasks, keep)
		if err != nil {
			return err
		}
		for _, t := range remove {
			if err := deleteTask(w, capsule, t.ID); err != nil {
				return err
			}
			if t.ContextID != "" && !live[t.ContextID] {
				live[t.ContextID] = true // delete once
				if err := w.deletePrefix(bTurns, taskKey(capsule, t.ContextID)); err != nil {
					return err
				}
			}
		}
		removed = len(remove)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return removed, nil
}

// evictPlan reads the capsule's heads and applies taskstore.EvictPlan to them.
func evictPlan(r *view, capsule string, olderThan time.Time, maxTasks int, keep func(id string) bool) ([]taskstore.Head, map[string]bool, error) {
	var heads []taskstore.Head
	err := r.scan(bHeads, nil, appendString(nil, capsule), func(_, v []byte) (bool, error) {
		h, err := decodeHead(v)
		heads = append(heads, h)
		return err == nil, err
	})
	if err != nil {
		return nil, nil, err
	}
	remove, live := taskstore.EvictPlan(heads, olderThan, maxTasks, keep)
	return remove, live, nil
}

// view runs fn on a view of the store: a bbolt read transaction with the writes in
// memory that are newer than it. The transaction begins, and the writes are taken, under
// ckptMu, so that a checkpoint cannot fall between the two: either the transaction is
// older than the checkpoint and the writes are still in memory, or it is newer and the
// memory taken is the very memory the checkpoint wrote.
func (db *DB) view(fn func(*view) error) error {
	return guard(func() error {
		db.ckptMu.RLock()
		tx, err := db.bolt.Begin(false)
		m := db.snap.Load()
		db.ckptMu.RUnlock()
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		return fn(&view{tx: tx, m: m})
	})
}

// read runs fn on a bbolt read transaction of the file alone.
func (db *DB) read(fn func(*bolt.Tx) error) error {
	return guard(func() error { return db.bolt.View(fn) })
}

func hasPrefix(k, prefix []byte) bool { return bytes.HasPrefix(k, prefix) }

// seqOf reads the big-endian sequence number that ends an event or turn key.
func seqOf(k []byte) uint64 { return binary.BigEndian.Uint64(k[len(k)-8:]) }
