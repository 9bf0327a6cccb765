package taskdb

import (
	"encoding/binary"
	"errors"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/gather"
	"github.com/capsulegate/capsulegate/taskstore"
)

// op is one queued write; apply runs inside the batch's view and done receives the
// batch's outcome, or the op's own refusal when the batch committed.
type op struct {
	apply   func(v *view) error
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
		return taskstore.Failed(err)
	}
	v, h := encodeTask(t), encodeHead(t)
	key := taskKey(t.Capsule, t.ID)
	return db.enqueue(func(w *view) error {
		w.put(bTasks, key, v)
		w.put(bHeads, key, h)
		return nil
	})
}

// Append adds events to their tasks' journals; an event with the Seq of a stored one replaces it.
func (db *DB) Append(capsule string, events ...taskstore.Event) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return taskstore.Failed(err)
	}
	keys, vals := make([][]byte, len(events)), make([][]byte, len(events))
	for i, e := range events {
		if err := taskstore.CheckID("task id", e.TaskID); err != nil {
			return taskstore.Failed(err)
		}
		keys[i], vals[i] = seqKey(taskKey(capsule, e.TaskID), e.Seq), encodeEvent(e)
	}
	return db.enqueue(func(w *view) error {
		for i := range keys {
			w.put(bEvents, keys[i], vals[i])
		}
		return nil
	})
}

// AddTurn appends item to the conversation (capsule, contextID), dropping the oldest
// turns beyond Options.MaxTurns.
func (db *DB) AddTurn(capsule, contextID string, item []byte) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return taskstore.Failed(err)
	}
	if err := taskstore.CheckID("context id", contextID); err != nil {
		return taskstore.Failed(err)
	}
	prefix, v, keep := taskKey(capsule, contextID), encodeTurn(item), db.opts.MaxTurns
	return db.enqueue(func(w *view) error {
		keys, err := w.keys(bTurns, prefix)
		if err != nil {
			return err
		}
		next := uint64(0)
		if len(keys) > 0 {
			next = seqOf(keys[len(keys)-1]) + 1
		}
		for len(keys) >= keep {
			w.del(bTurns, keys[0])
			keys = keys[1:]
		}
		w.put(bTurns, seqKey(prefix, next), v)
		return nil
	})
}

// DeleteTask removes a task, its journal, its push configs and its blobs.
func (db *DB) DeleteTask(capsule, id string) <-chan error {
	if err := taskstore.CheckTaskIDs(capsule, id); err != nil {
		return taskstore.Failed(err)
	}
	return db.enqueue(func(w *view) error { return deleteTask(w, capsule, id) })
}

func deleteTask(w *view, capsule, id string) error {
	key := taskKey(capsule, id)
	w.del(bTasks, key)
	w.del(bHeads, key)
	if err := w.deletePrefix(bPush, key); err != nil {
		return err
	}
	if err := w.deletePrefix(bBlob, key); err != nil {
		return err
	}
	return w.deletePrefix(bEvents, key)
}

var errClosed = taskstore.Closed()

var errReadOnly = errs.New(CodeReadOnly, part, "the task store was opened read-only", "a gateway bug: report it")

func (db *DB) enqueue(apply func(*view) error) <-chan error {
	o := &op{apply: apply, done: make(chan error, 1)}
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return taskstore.Failed(errClosed)
	}
	if db.opts.ReadOnly {
		return taskstore.Failed(errReadOnly)
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
// one log record. While it commits, new writes queue up and go into the next batch, so
// under load batches grow with the commit's own duration even when callers hurry it: a
// lone caller waits about one commit, many share each commit. Between batches it
// checkpoints: when the log has grown past CheckpointBytes, or CheckpointEvery after the
// first write since the last checkpoint; and once more when the store closes.
func (db *DB) commitLoop() {
	defer close(db.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	ckpt := time.NewTimer(time.Hour)
	ckpt.Stop()
	armed := false
	checkpoint := func() {
		ckpt.Stop()
		armed = false
		db.checkpoint()
	}
	defer checkpoint()
	for {
		var first *op
		var ok bool
		select {
		case first, ok = <-db.queue:
		case <-ckpt.C:
			armed = false
			db.checkpoint()
			continue
		}
		if !ok {
			return
		}
		batch, _ := gather.Batch(first, db.queue, db.hurry, timer, db.opts.GroupWindow, db.opts.MaxBatch)
		db.commit(batch)
		switch {
		case db.cur.bytes >= db.opts.CheckpointBytes:
			checkpoint()
		case !armed && db.cur.n > 0:
			ckpt.Reset(db.opts.CheckpointEvery)
			armed = true
		}
	}
}

// commit applies the batch to the writes in memory, appends them to the log as one
// record, and once that is durable shows them to readers and answers the callers.
func (db *DB) commit(batch []*op) {
	err := db.broken
	if err == nil {
		err = db.logBatch(batch)
		if err != nil {
			db.cur = db.base.clone() // the batch's writes are dropped with it
			err = errs.Wrap(err, CodeCommit, part, "writing the task store failed; the writes of this commit are lost",
				"check free disk space and the file's health; restart the gateway if it persists").At(db.path, "")
		}
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

func (db *DB) logBatch(batch []*op) error {
	db.rec.reset(db.epoch)
	err := db.read(func(tx *bolt.Tx) error {
		w := &view{tx: tx, m: db.cur, rec: &db.rec}
		for _, o := range batch {
			o.refused = nil
			err := o.apply(w)
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
	if err != nil || db.rec.empty() {
		return err
	}
	rec := db.rec.seal()
	broken, err := db.log.appendRecord(rec)
	if err != nil {
		if broken {
			db.broken = errs.Wrap(err, CodeCommit, part, "the task store's log cannot be written; no write is taken until a restart",
				"check free disk space and the disk's health, then restart the gateway").At(db.path+logSuffix, "")
		}
		return err
	}
	db.cur.bytes += len(rec)
	db.publish()
	return nil
}

// publish shows the committer's writes to readers: a clone they read while the
// committer writes on, and one kept to fall back to should a later batch fail.
func (db *DB) publish() {
	db.snap.Store(db.cur.clone())
	db.base = db.cur.clone()
}

// checkpoint writes the writes in memory into the bbolt file in one transaction, with
// the epoch of the log records that hold them, then empties memory and the log. A failed
// checkpoint loses nothing: the log still holds every write, and the next one tries again.
func (db *DB) checkpoint() {
	if db.broken != nil || db.cur.n == 0 {
		return
	}
	m := db.cur
	err := guard(func() error {
		return db.bolt.Update(func(tx *bolt.Tx) error {
			// Tasks, their index and their journals are keyed by time-ordered ids, so new
			// keys go at the right edge: leaves split full there instead of half full, and
			// the tasks in flight span half as many pages, which each checkpoint rewrites.
			for _, name := range [][]byte{bucketTasks, bucketHeads, bucketEvents} {
				tx.Bucket(name).FillPercent = appendFill
			}
			for b := range nBuckets {
				bk := tx.Bucket(bucketNames[b])
				var err error
				m.trees[b].Ascend(func(e entry) bool {
					if e.del {
						err = bk.Delete([]byte(e.key))
					} else {
						err = bk.Put([]byte(e.key), e.val)
					}
					return err == nil
				})
				if err != nil {
					return err
				}
			}
			return tx.Bucket(bucketFormat).Put(epochKey, binary.BigEndian.AppendUint64(nil, db.epoch))
		})
	})
	db.ckptErr = err
	if err != nil {
		return
	}
	db.checkpoints.Add(1)
	// A reader that began its bbolt transaction before this checkpoint still holds the
	// writes in memory: the lock keeps a reader from pairing an old transaction with the
	// empty memory below.
	db.ckptMu.Lock()
	db.cur = newMem()
	db.publish()
	db.ckptMu.Unlock()
	db.epoch++
	_ = db.log.reset() // on failure the old records stay, of an epoch the file says is in it
}
