package pgstore

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Reads are one query each. Rows are collected before the caller's function runs, so a
// connection is back in the pool before the caller does anything, the store included.

// query runs sql and collects its rows with scan, counting the round trip.
func query[T any](s *Store, sql string, args []any, scan func(pgx.CollectableRow) (T, error)) ([]T, error) {
	ctx, cancel := s.timeout()
	defer cancel()
	start := time.Now()
	rows, err := s.pool.Query(ctx, sql, args...)
	var out []T
	if err == nil {
		out, err = pgx.CollectRows(rows, scan)
	}
	s.stats.roundTrip(time.Since(start), err)
	if err != nil {
		if isConnErr(err) {
			return nil, s.failed(err)
		}
		if e := (*errs.Error)(nil); errors.As(err, &e) {
			return nil, e // the store's own refusal of a row (a push config that does not open)
		}
		return nil, errs.Wrap(err, CodeBadRecord, part, "reading the task store at "+s.where+" failed",
			"see the database's log; restore the tables from a backup if they were damaged").At(s.where, "")
	}
	return out, nil
}

func scanTask(r pgx.CollectableRow) (taskstore.Task, error) {
	var t taskstore.Task
	var since, updated int64
	err := r.Scan(&t.Capsule, &t.ID, &t.ContextID, &t.Owner, &t.State, &since, &updated, &t.Done, &t.Data)
	t.Since, t.Updated = fromNanos(since), fromNanos(updated)
	return t, err
}

func scanHead(r pgx.CollectableRow) (taskstore.Head, error) {
	var h taskstore.Head
	var since, updated int64
	err := r.Scan(&h.ID, &h.ContextID, &h.Owner, &h.State, &since, &updated, &h.Done)
	h.Since, h.Updated = fromNanos(since), fromNanos(updated)
	return h, err
}

// Task returns the task (capsule, id), and whether the store holds it.
func (s *Store) Task(capsule, id string) (taskstore.Task, bool, error) {
	if err := taskstore.CheckTaskIDs(capsule, id); err != nil {
		return taskstore.Task{}, false, err
	}
	got, err := query(s, `SELECT capsule, id, context_id, owner, state, since, updated, done, data
		FROM capsulegate_tasks WHERE capsule = $1 AND id = $2`, []any{capsule, id}, scanTask)
	if err != nil || len(got) == 0 {
		return taskstore.Task{}, false, err
	}
	return got[0], true, nil
}

// Heads calls fn for the head of each of the capsule's tasks, in id order, until fn
// returns false.
func (s *Store) Heads(capsule string, fn func(taskstore.Head) bool) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	got, err := query(s, `SELECT id, context_id, owner, state, since, updated, done
		FROM capsulegate_tasks WHERE capsule = $1 ORDER BY id`, []any{capsule}, scanHead)
	for _, h := range got {
		if !fn(h) {
			break
		}
	}
	return err
}

// Events calls fn for each event of the task with Seq > after, in Seq order, until fn
// returns false.
func (s *Store) Events(capsule, taskID string, after uint64, fn func(taskstore.Event) bool) error {
	if err := taskstore.CheckTaskIDs(capsule, taskID); err != nil {
		return err
	}
	got, err := query(s, `SELECT seq, data FROM capsulegate_events WHERE capsule = $1 AND task_id = $2 AND seq > $3 ORDER BY seq`,
		[]any{capsule, taskID, int64(after)}, func(r pgx.CollectableRow) (taskstore.Event, error) {
			e := taskstore.Event{TaskID: taskID}
			var seq int64
			err := r.Scan(&seq, &e.Data)
			e.Seq = uint64(seq)
			return e, err
		})
	for _, e := range got {
		if !fn(e) {
			break
		}
	}
	return err
}

// Turns returns the conversation's turns, oldest first.
func (s *Store) Turns(capsule, contextID string) ([][]byte, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return nil, err
	}
	if err := taskstore.CheckID("context id", contextID); err != nil {
		return nil, err
	}
	return query(s, `SELECT item FROM capsulegate_turns WHERE capsule = $1 AND context_id = $2 ORDER BY n`,
		[]any{capsule, contextID}, pgx.RowTo[[]byte])
}

// scanPush reads a push config row of the capsule, opening its sealed data.
func (s *Store) scanPush(capsule string) func(pgx.CollectableRow) (taskstore.Push, error) {
	return func(r pgx.CollectableRow) (taskstore.Push, error) {
		var p taskstore.Push
		var sealed []byte
		var delivered int64
		if err := r.Scan(&p.TaskID, &p.ID, &sealed, &delivered); err != nil {
			return p, err
		}
		p.Delivered = uint64(delivered)
		var err error
		p.Data, err = s.open(capsule, p.TaskID, p.ID, sealed)
		return p, err
	}
}

// Pushes returns the task's push configs in id order.
func (s *Store) Pushes(capsule, taskID string) ([]taskstore.Push, error) {
	if err := taskstore.CheckTaskIDs(capsule, taskID); err != nil {
		return nil, err
	}
	return query(s, `SELECT task_id, id, data, delivered FROM capsulegate_push WHERE capsule = $1 AND task_id = $2 ORDER BY id`,
		[]any{capsule, taskID}, s.scanPush(capsule))
}

// AllPushes calls fn for every push config of the capsule until fn returns false.
func (s *Store) AllPushes(capsule string, fn func(taskstore.Push) bool) error {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return err
	}
	got, err := query(s, `SELECT task_id, id, data, delivered FROM capsulegate_push WHERE capsule = $1 ORDER BY task_id, id`,
		[]any{capsule}, s.scanPush(capsule))
	for _, p := range got {
		if !fn(p) {
			break
		}
	}
	return err
}

// Blob returns the blob (capsule, taskID, id), and whether the store holds it.
func (s *Store) Blob(capsule, taskID, id string) ([]byte, bool, error) {
	if err := taskstore.CheckItemIDs(capsule, taskID, "blob id", id); err != nil {
		return nil, false, err
	}
	got, err := query(s, `SELECT data FROM capsulegate_blobs WHERE capsule = $1 AND task_id = $2 AND id = $3`,
		[]any{capsule, taskID, id}, pgx.RowTo[[]byte])
	if err != nil || len(got) == 0 {
		return nil, false, err
	}
	return got[0], true, nil
}

// Evict removes the capsule's tasks updated before olderThan and then, oldest first,
// those beyond maxTasks (0: no limit), with their journals, push configs and blobs, and
// the turns of conversations no remaining task belongs to; the tasks keep reports are
// spared, do not count towards maxTasks, and keep their conversations' turns. The plan
// is read first; each removal is made through the committer, in order with the other
// writes, and only if the task was not updated since the plan was read.
func (s *Store) Evict(capsule string, olderThan time.Time, maxTasks int, keep func(id string) bool) (int, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return 0, err
	}
	if s.opts.ReadOnly {
		return 0, errs.New(CodeReadOnly, part, "the task store was opened read-only", "a gateway bug: report it")
	}
	var heads []taskstore.Head
	if err := s.Heads(capsule, func(h taskstore.Head) bool { heads = append(heads, h); return true }); err != nil {
		return 0, err
	}
	if s.fleet != nil {
		// The caller knows the tasks it runs; the other replicas' are not finished either.
		open := map[string]bool{}
		for _, h := range heads {
			if !h.Done {
				open[h.ID] = true
			}
		}
		mine := keep
		keep = func(id string) bool { return open[id] || (mine != nil && mine(id)) }
	}
	remove, _ := taskstore.EvictPlan(heads, olderThan, maxTasks, keep)
	if len(remove) == 0 {
		return 0, nil
	}
	o := &op{}
	contexts := map[string]bool{}
	for _, h := range remove {
		o.stmts = append(o.stmts, stmt{sqlEvictTask, []any{capsule, h.ID, nanos(h.Updated)}})
		if h.ContextID != "" {
			contexts[h.ContextID] = true
		}
	}
	count := len(o.stmts)
	for _, c := range slices.Sorted(maps.Keys(contexts)) {
		o.stmts = append(o.stmts, stmt{sqlEvictTurns, []any{capsule, c}})
	}
	o.counted = count
	if err := <-s.enqueue(o); err != nil {
		return 0, err
	}
	return int(o.rows), nil
}

// sqlEvictTask removes a task the plan chose, with its journal, push configs and blobs,
// unless it was updated since; sqlEvictTurns removes a conversation's turns once no task
// of it is left (those keep spared included).
const (
	sqlEvictTask = `WITH e AS (DELETE FROM capsulegate_events WHERE capsule = $1 AND task_id = $2 AND EXISTS
		  (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND updated = $3)),
		p AS (DELETE FROM capsulegate_push WHERE capsule = $1 AND task_id = $2 AND EXISTS
		  (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND updated = $3)),
		b AS (DELETE FROM capsulegate_blobs WHERE capsule = $1 AND task_id = $2 AND EXISTS
		  (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND updated = $3))
		DELETE FROM capsulegate_tasks WHERE capsule = $1 AND id = $2 AND updated = $3`
	sqlEvictTurns = `DELETE FROM capsulegate_turns WHERE capsule = $1 AND context_id = $2
		AND NOT EXISTS (SELECT 1 FROM capsulegate_tasks WHERE capsule = $1 AND context_id = $2)`
)
