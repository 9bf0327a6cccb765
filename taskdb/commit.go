package taskdb

import (
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// op is one queued write; apply runs inside the batch's transaction and done receives
// the batch's outcome, or the op's own refusal when the batch committed.
type op struct {
	apply   func(tx *bolt.Tx) error
	done    chan error
	refused error
}

// appendFill is how full a leaf of the time-ordered buckets is left when it splits.
const appendFill = 0.9

// refusal is returned by an apply that refuses its own write before writing anything:
// the batch goes on, and only that op's caller receives err.
type refusal struct{ err error }

func (r refusal) Error() string { return r.err.Error() }

// PutTask stores t, replacing the task with the same capsule and id.
func (db *DB) PutTask(t taskstore.Task) <-chan error {
	if err := taskstore.CheckTask(t); err != nil {
		return failed(err)
	}
	v, h := encodeTask(t), encodeHead(t)
	return db.enqueue(func(tx *bolt.Tx) error {
		key := taskKey(t.Capsule, t.ID)
		if err := tx.Bucket(bucketTasks).Put(key, v); err != nil {
			return err
		}
		return tx.Bucket(bucketHeads).Put(key, h)
	})
}

// Append adds events to their tasks' journals; an event with the Seq of a stored one replaces it.
func (db *DB) Append(capsule string, events ...taskstore.Event) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return failed(err)
	}
	keys, vals := make([][]byte, len(events)), make([][]byte, len(events))
	for i, e := range events {
		if err := taskstore.CheckID("task id", e.TaskID); err != nil {
			return failed(err)
		}
		keys[i], vals[i] = seqKey(taskKey(capsule, e.TaskID), e.Seq), encodeEvent(e)
	}
	return db.enqueue(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		for i := range keys {
			if err := b.Put(keys[i], vals[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// AddTurn appends item to the conversation (capsule, contextID), dropping the oldest
// turns beyond Options.MaxTurns.
func (db *DB) AddTurn(capsule, contextID string, item []byte) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return failed(err)
	}
	if err := taskstore.CheckID("context id", contextID); err != nil {
		return failed(err)
	}
	prefix, v, keep := taskKey(capsule, contextID), encodeTurn(item), db.opts.MaxTurns
	return db.enqueue(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTurns)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Next() {
			keys = append(keys, k)
		}
		next := uint64(0)
		if len(keys) > 0 {
			next = seqOf(keys[len(keys)-1]) + 1
		}
		for len(keys) >= keep {
			if err := b.Delete(keys[0]); err != nil {
				return err
			}
			keys = keys[1:]
		}
		return b.Put(seqKey(prefix, next), v)
	})
}

// DeleteTask removes a task, its journal and its push configs.
func (db *DB) DeleteTask(capsule, id string) <-chan error {
	if err := checkTaskIDs(capsule, id); err != nil {
		return failed(err)
	}
	return db.enqueue(func(tx *bolt.Tx) error { return deleteTask(tx, capsule, id) })
}

func deleteTask(tx *bolt.Tx, capsule, id string) error {
	key := taskKey(capsule, id)
	if err := tx.Bucket(bucketTasks).Delete(key); err != nil {
		return err
	}
	if err := tx.Bucket(bucketHeads).Delete(key); err != nil {
		return err
	}
	if err := deletePrefix(tx.Bucket(bucketPush), key); err != nil {
		return err
	}
	return deletePrefix(tx.Bucket(bucketEvents), key)
}

func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && hasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

func checkTaskIDs(capsule, id string) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	return taskstore.CheckID("task id", id)
}

func failed(err error) <-chan error {
	ch := make(chan error, 1)
	ch <- err
	return ch
}

var errClosed = taskstore.Closed()

var errReadOnly = errs.New(CodeReadOnly, part, "the task store was opened read-only", "a gateway bug: report it")

func (db *DB) enqueue(apply func(*bolt.Tx) error) <-chan error {
	o := &op{apply: apply, done: make(chan error, 1)}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return failed(errClosed)
	}
	if db.opts.ReadOnly {
		return failed(errReadOnly)
	}
	db.queue <- o
	return o.done
}

// Hurry tells the committer that a caller is waiting for writes it queued: the writes
// queued so far are committed now, without waiting out the rest of GroupWindow. Callers
// that block on a write's channel call it first; writes nobody waits for yet keep being
// gathered for the window, so background writes share commits.
func (db *DB) Hurry() {
	select {
	case db.hurry <- struct{}{}:
	default: // already signalled
	}
}

// commitLoop is the one writer: it takes the first queued op, gathers more for
// GroupWindow, until MaxBatch, or until a caller waits (Hurry), and commits them all in
// one transaction. While it commits, new writes queue up and go into the next batch, so
// under load batches grow with the commit's own duration even when callers hurry it: a
// lone caller waits about one commit, many share each commit.
func (db *DB) commitLoop() {
	defer close(db.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		first, ok := <-db.queue
		if !ok {
			return
		}
		batch := []*op{first}
		timer.Reset(db.opts.GroupWindow)
	gather:
		for len(batch) < db.opts.MaxBatch {
			select {
			case o, ok := <-db.queue:
				if !ok {
					break gather
				}
				batch = append(batch, o)
				continue
			default:
			}
			// Nothing more queued right now: wait for more, for the window's end, or
			// for a caller who waits.
			select {
			case o, ok := <-db.queue:
				if !ok {
					break gather
				}
				batch = append(batch, o)
			case <-db.hurry:
				break gather
			case <-timer.C:
				break gather
			}
		}
		timer.Stop()
		db.commit(batch)
	}
}

func (db *DB) commit(batch []*op) {
	err := guard(func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			// Tasks, their index and their journals are keyed by time-ordered ids, so new
			// keys go at the right edge: leaves split full there instead of half full, and
			// the tasks in flight span half as many pages, which each commit rewrites.
			for _, name := range [][]byte{bucketTasks, bucketHeads, bucketEvents} {
				tx.Bucket(name).FillPercent = appendFill
			}
			for _, o := range batch {
				err := o.apply(tx)
				var r refusal
				if errors.As(err, &r) {
					o.refused = r.err
					continue
				}
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		err = errs.Wrap(err, CodeCommit, part, "writing the task store failed; the writes of this commit are lost",
			"check free disk space and the file's health; restart the gateway if it persists").At(db.path, "")
	}
	db.commits.Add(1)
	db.ops.Add(uint64(len(batch)))
	for _, o := range batch {
		if err == nil {
			o.done <- o.refused
		} else {
			o.done <- err
		}
	}
}
