package pgstore

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/gather"
	"github.com/capsulegate/capsulegate/taskstore"
)

// stmt is one statement of a write, with its arguments.
type stmt struct {
	sql  string
	args []any
}

// op is one queued write: its statements, run in order in its batch's transaction, and
// done, which receives the batch's outcome or the op's own refusal.
type op struct {
	stmts []stmt
	done  chan error
	// needRow refuses the op (a PutPush) with taskstore.NoTask when its one statement
	// wrote no row: the task was not in the store when the batch ran.
	needRow bool
	// rows counts the rows its first counted statements wrote (all of them when counted
	// is 0), for an Evict; read after done yields.
	rows    int64
	counted int
	refused error
	// answered is set once done has its value: an op refused at enqueue because the
	// database is away still goes to the committer, which keeps it for the backlog.
	answered bool
	// signal, for a replica of several, tells the others the task's journal grew
	// (Kind 0: no signal); sent with the batch, so it arrives once the write is readable.
	signal taskstore.Signal
}

// size is about how many bytes the op's arguments hold, for the backlog's bound.
func (o *op) size() int {
	n := 64
	for _, st := range o.stmts {
		for _, a := range st.args {
			switch v := a.(type) {
			case []byte:
				n += len(v)
			case string:
				n += len(v)
			default:
				n += 8
			}
		}
	}
	return n
}

// answer gives the op's caller err, once.
func (o *op) answer(err error) {
	if !o.answered {
		o.answered = true
		o.done <- err
	}
}

// The statements of the writes. Upserts make a batch retried after an unknown outcome
// harmless; the conditional insert of a push config refuses it in order with the writes
// queued before it, as taskdb does, without failing the batch.
const (
	sqlPutTask = `INSERT INTO capsulegate_tasks (capsule, id, context_id, owner, state, since, updated, done, data)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (capsule, id) DO UPDATE SET context_id = excluded.context_id, owner = excluded.owner,
		state = excluded.state, since = excluded.since, updated = excluded.updated, done = excluded.done, data = excluded.data`
	sqlAppend = `INSERT INTO capsulegate_events (capsule, task_id, seq, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (capsule, task_id, seq) DO UPDATE SET data = excluded.data`
	// A replica of several writes the digest and mark too, and only a task no other
	// replica runs (the fence: a replica that lost its lease cannot overwrite the one that
	// adopted its task).
	sqlPutTaskFleet = `INSERT INTO capsulegate_tasks (capsule, id, context_id, owner, state, since, updated, done, data, digest, mark, runner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, CASE WHEN $13 THEN $12 END)
		ON CONFLICT (capsule, id) DO UPDATE SET context_id = excluded.context_id, owner = excluded.owner,
		state = excluded.state, since = excluded.since, updated = excluded.updated, done = excluded.done, data = excluded.data,
		mark = excluded.mark
		WHERE capsulegate_tasks.runner IS NULL OR capsulegate_tasks.runner = $12`
	sqlAppendFleet = `INSERT INTO capsulegate_events (capsule, task_id, seq, data) SELECT $1, $2, $3, $4
		WHERE NOT EXISTS (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND runner IS NOT NULL AND runner <> $5)
		ON CONFLICT (capsule, task_id, seq) DO UPDATE SET data = excluded.data`
	sqlAddTurn  = `INSERT INTO capsulegate_turns (capsule, context_id, item) VALUES ($1, $2, $3)`
	sqlTrimTurn = `DELETE FROM capsulegate_turns WHERE capsule = $1 AND context_id = $2 AND n <=
		(SELECT n FROM capsulegate_turns WHERE capsule = $1 AND context_id = $2 ORDER BY n DESC OFFSET $3 LIMIT 1)`
	sqlDeleteTask = `WITH e AS (DELETE FROM capsulegate_events WHERE capsule = $1 AND task_id = $2),
		p AS (DELETE FROM capsulegate_push WHERE capsule = $1 AND task_id = $2),
		b AS (DELETE FROM capsulegate_blobs WHERE capsule = $1 AND task_id = $2)
		DELETE FROM capsulegate_tasks WHERE capsule = $1 AND id = $2`
	sqlPutPush = `INSERT INTO capsulegate_push (capsule, task_id, id, data, delivered)
		SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND id = $2)
		ON CONFLICT (capsule, task_id, id) DO UPDATE SET data = excluded.data, delivered = excluded.delivered`
	sqlSetDelivered = `UPDATE capsulegate_push SET delivered = $4
		WHERE capsule = $1 AND task_id = $2 AND id = $3 AND delivered < $4`
	sqlDeletePush = `DELETE FROM capsulegate_push WHERE capsule = $1 AND task_id = $2 AND id = $3`
	sqlPutBlob    = `INSERT INTO capsulegate_blobs (capsule, task_id, id, data) VALUES ($1, $2, $3, $4)
		ON CONFLICT (capsule, task_id, id) DO UPDATE SET data = excluded.data`
)

// PutTask stores t, replacing the task with the same capsule and id.
func (s *Store) PutTask(t taskstore.Task) <-chan error {
	if err := taskstore.CheckTask(t); err != nil {
		return taskstore.Failed(err)
	}
	if f := s.fleet; f != nil {
		state := t.State
		if t.Claimed && state == "submitted" {
			state = "" // running here: nothing for the others to claim
		}
		return s.enqueue(&op{stmts: []stmt{{sqlPutTaskFleet, []any{t.Capsule, t.ID, t.ContextID, t.Owner, t.State,
			nanos(t.Since), nanos(t.Updated), t.Done, nonNil(t.Data), t.Digest, t.Mark, f.name, t.Claimed}}},
			signal: taskstore.Signal{Kind: taskstore.SignalEvents, Capsule: t.Capsule, TaskID: t.ID, Arg: state}})
	}
	return s.enqueue(&op{stmts: []stmt{{sqlPutTask, []any{t.Capsule, t.ID, t.ContextID, t.Owner, t.State,
		nanos(t.Since), nanos(t.Updated), t.Done, nonNil(t.Data)}}}})
}

// Append adds events to their tasks' journals; an event with the Seq of a stored one
// replaces it.
func (s *Store) Append(capsule string, events ...taskstore.Event) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return taskstore.Failed(err)
	}
	o := &op{stmts: make([]stmt, 0, len(events))}
	for _, e := range events {
		if err := taskstore.CheckID("task id", e.TaskID); err != nil {
			return taskstore.Failed(err)
		}
		if f := s.fleet; f != nil {
			o.stmts = append(o.stmts, stmt{sqlAppendFleet, []any{capsule, e.TaskID, int64(e.Seq), nonNil(e.Data), f.name}})
			o.signal = taskstore.Signal{Kind: taskstore.SignalEvents, Capsule: capsule, TaskID: e.TaskID}
		} else {
			o.stmts = append(o.stmts, stmt{sqlAppend, []any{capsule, e.TaskID, int64(e.Seq), nonNil(e.Data)}})
		}
	}
	return s.enqueue(o)
}

// AddTurn appends item to the conversation, dropping the oldest turns beyond
// Options.MaxTurns.
func (s *Store) AddTurn(capsule, contextID string, item []byte) <-chan error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return taskstore.Failed(err)
	}
	if err := taskstore.CheckID("context id", contextID); err != nil {
		return taskstore.Failed(err)
	}
	return s.enqueue(&op{stmts: []stmt{
		{sqlAddTurn, []any{capsule, contextID, nonNil(item)}},
		{sqlTrimTurn, []any{capsule, contextID, s.opts.MaxTurns}},
	}})
}

// DeleteTask removes a task, its journal, its push configs and its blobs.
func (s *Store) DeleteTask(capsule, id string) <-chan error {
	if err := taskstore.CheckTaskIDs(capsule, id); err != nil {
		return taskstore.Failed(err)
	}
	return s.enqueue(&op{stmts: []stmt{{sqlDeleteTask, []any{capsule, id}}}})
}

// PutPush creates or replaces the push config (capsule, p.TaskID, p.ID), Data (sealed
// with the store key) and Delivered both. A task the store does not hold when the batch
// runs is refused with E-STORE-011 and nothing is written; without a store key every
// config is refused with E-STORE-014.
func (s *Store) PutPush(capsule string, p taskstore.Push) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, p.TaskID, "push config id", p.ID); err != nil {
		return taskstore.Failed(err)
	}
	seal := s.seal.Load()
	if seal == nil {
		return taskstore.Failed(noKey())
	}
	sealed := seal.seal(capsule, p.TaskID, p.ID, p.Data)
	return s.enqueue(&op{needRow: true, stmts: []stmt{{sqlPutPush, []any{capsule, p.TaskID, p.ID, sealed, int64(p.Delivered)}}}})
}

// SetDelivered raises the config's Delivered to seq, never lowering it; a config gone
// meanwhile is not an error.
func (s *Store) SetDelivered(capsule, taskID, id string, seq uint64) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "push config id", id); err != nil {
		return taskstore.Failed(err)
	}
	return s.enqueue(&op{stmts: []stmt{{sqlSetDelivered, []any{capsule, taskID, id, int64(seq)}}}})
}

// DeletePush removes one push config; an absent one is not an error.
func (s *Store) DeletePush(capsule, taskID, id string) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "push config id", id); err != nil {
		return taskstore.Failed(err)
	}
	return s.enqueue(&op{stmts: []stmt{{sqlDeletePush, []any{capsule, taskID, id}}}})
}

// PutBlob stores data as the blob id of the task (capsule, taskID).
func (s *Store) PutBlob(capsule, taskID, id string, data []byte) <-chan error {
	if err := taskstore.CheckItemIDs(capsule, taskID, "blob id", id); err != nil {
		return taskstore.Failed(err)
	}
	return s.enqueue(&op{stmts: []stmt{{sqlPutBlob, []any{capsule, taskID, id, nonNil(data)}}}})
}

// nanos is t as the store keeps it: Unix nanoseconds, 0 for the zero time.
func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// fromNanos reads a time nanos wrote, in UTC.
func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// nonNil keeps a nil slice from becoming SQL NULL in a NOT NULL column.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

func (s *Store) enqueue(o *op) <-chan error {
	o.done = make(chan error, 1)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return taskstore.Failed(taskstore.Closed())
	}
	if s.opts.ReadOnly {
		return taskstore.Failed(errs.New(CodeReadOnly, part, "the task store was opened read-only", "a gateway bug: report it"))
	}
	// A database known to be away fails the write now instead of after a round trip
	// that cannot succeed. The write still goes to the committer, in order, which keeps
	// it in the backlog and writes it once the database is back: the caller is told it is
	// not recorded yet, and what the gateway's memory holds reaches the database anyway.
	if p := s.down.Load(); p != nil {
		o.answer(&taskstore.KeptError{Err: *p})
	}
	s.queue <- o
	return o.done
}

// MaxBacklog bounds the writes kept while the database is away, in bytes of their
// arguments: past it the backlog is dropped (capsule_store_backlog_dropped_total), and
// the tasks it held keep what the database had.
const MaxBacklog = 64 << 20

// keep adds the batch, which the database did not take, to the backlog, answering its
// callers with err.
func (s *Store) keep(batch []*op, err error) {
	kept := &taskstore.KeptError{Err: err}
	for _, o := range batch {
		o.answer(kept)
		s.backlog = append(s.backlog, o)
		s.backlogBytes += o.size()
	}
	if s.backlogBytes > MaxBacklog {
		s.stats.dropped.Add(uint64(len(s.backlog)))
		clear(s.backlog)
		s.backlog, s.backlogBytes = s.backlog[:0], 0
	}
	s.stats.backlog.Store(int64(len(s.backlog)))
}

// replay writes the backlog, oldest first, in batches; it stops at the first batch the
// database does not take, which stays at the backlog's head.
func (s *Store) replay() {
	for len(s.backlog) > 0 && s.down.Load() == nil {
		n := min(len(s.backlog), s.opts.MaxBatch)
		batch := s.backlog[:n]
		if err := s.send(batch); err != nil {
			if isConnErr(err) {
				s.failed(err)
				return
			}
			// A refusal no retry mends (a statement the database rejects): dropped.
			s.stats.dropped.Add(uint64(n))
		}
		for _, o := range batch {
			s.backlogBytes -= o.size()
		}
		clear(batch)
		s.backlog = s.backlog[n:]
		s.stats.backlog.Store(int64(len(s.backlog)))
	}
	if len(s.backlog) == 0 {
		s.backlog, s.backlogBytes = nil, 0
	}
}

// Hurry tells the committer that a caller waits for writes it queued: the writes queued
// so far are committed now, without waiting out the rest of GroupWindow.
func (s *Store) Hurry() {
	select {
	case s.hurry <- struct{}{}:
	default:
	}
}

// commitLoop is the one writer: it takes the first queued op, gathers more for
// GroupWindow, until MaxBatch, or until a caller waits (Hurry), and commits them all in
// one round trip. While it commits, new writes queue up for the next batch.
func (s *Store) commitLoop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		// What the database missed while away goes first, before any newer write.
		if len(s.backlog) > 0 && s.down.Load() == nil {
			s.replay()
		}
		var first *op
		var ok bool
		select {
		case first, ok = <-s.queue:
		case <-s.resumed:
			continue
		}
		if !ok {
			if s.down.Load() == nil {
				s.replay() // a last try: Close writes what it can
			}
			s.stats.dropped.Add(uint64(len(s.backlog)))
			return
		}
		batch, _ := gather.Batch(first, s.queue, s.hurry, timer, s.opts.GroupWindow, s.opts.MaxBatch)
		if p := s.down.Load(); p != nil {
			s.keep(batch, *p) // no round trip that cannot succeed
			continue
		}
		s.commit(batch)
	}
}

// commit sends the batch's statements as one pipeline, which PostgreSQL runs as one
// implicit transaction: all of them are kept, or none.
func (s *Store) commit(batch []*op) {
	err := s.send(batch)
	if err != nil {
		if isConnErr(err) {
			s.keep(batch, s.failed(err))
			return
		}
		err = errs.Wrap(err, CodeCommit, part, "the database at "+s.where+" refused a commit; its writes are lost",
			"see the database's log for the statement's error").At(s.where, "")
	}
	for _, o := range batch {
		if err != nil {
			o.answer(err)
		} else {
			o.answer(o.refused)
		}
	}
}

// send makes the batch's one round trip; the batch is kept only if it returns nil.
func (s *Store) send(batch []*op) error {
	b := &pgx.Batch{}
	for _, o := range batch {
		for _, st := range o.stmts {
			b.Queue(st.sql, st.args...)
		}
	}
	signals := batchSignals(batch)
	for _, p := range signals {
		b.Queue("SELECT pg_notify($1, $2)", channel, p)
	}
	ctx, cancel := s.timeout()
	defer cancel()
	start := time.Now()
	br := s.pool.SendBatch(ctx, b)
	var err error
results:
	for _, o := range batch {
		o.refused, o.rows = nil, 0
		for i := range o.stmts {
			tag, e := br.Exec()
			if e != nil {
				err = e
				break results
			}
			if o.counted == 0 || i < o.counted {
				o.rows += tag.RowsAffected()
			}
		}
		if o.needRow && o.rows == 0 {
			o.refused = taskstore.NoTask()
		}
	}
	for range signals {
		if err != nil {
			break
		}
		_, err = br.Exec()
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	s.stats.roundTrip(time.Since(start), err)
	s.stats.ops.Add(uint64(len(batch)))
	return err
}

// batchSignals are the payloads of the batch's signals: one per task, naming the last
// state the batch writes of it (the one a replica waiting to claim cares for).
func batchSignals(batch []*op) []string {
	var order []string
	last := map[string]taskstore.Signal{}
	for _, o := range batch {
		sig := o.signal
		if sig.Kind == 0 {
			continue
		}
		key := sig.Capsule + sep + sig.TaskID
		old, seen := last[key]
		if !seen {
			order = append(order, key)
		} else if sig.Arg == "" {
			sig.Arg = old.Arg
		}
		last[key] = sig
	}
	out := make([]string, len(order))
	for i, k := range order {
		out[i] = signalPayload(last[k])
	}
	return out
}
