package pgstore

import (
	"context"
	"fmt"

	"github.com/capsulegate/capsulegate/errs"
)

// Report is what Check found in a store.
type Report struct {
	Where         string // host:port/database
	Schema        int    // the schema version
	Bytes         int64  // the tables' size on disk, indexes included
	Capsules      int
	Tasks         int
	Events        int
	Conversations int
	Turns         int
	Pushes        int
	Blobs         int
}

// Check opens the store at dsn read-only (no migration, no lock: a running gateway may
// hold it), counts what it holds, and refuses with E-STORE-007 rows no task owns: a
// journal event, push config or blob whose task is gone, which the store's writes never
// leave behind. A schema older or newer than this release's is refused as Open refuses it.
func Check(ctx context.Context, dsn string) (Report, error) {
	s, err := connect(ctx, dsn, Options{ReadOnly: true})
	if err != nil {
		return Report{}, err
	}
	defer s.pool.Close()
	r := Report{Where: s.where}
	if _, r.Schema, err = s.migrate(ctx); err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*s.opts.Timeout)
	defer cancel()
	var orphans, orphanPush, orphanBlobs int
	err = s.pool.QueryRow(ctx, `SELECT
		(SELECT count(DISTINCT capsule) FROM capsulegate_tasks),
		(SELECT count(*) FROM capsulegate_tasks),
		(SELECT count(*) FROM capsulegate_events),
		(SELECT count(*) FROM (SELECT DISTINCT capsule, context_id FROM capsulegate_turns) c),
		(SELECT count(*) FROM capsulegate_turns),
		(SELECT count(*) FROM capsulegate_push),
		(SELECT count(*) FROM capsulegate_blobs),
		(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c
		   WHERE c.relkind = 'r' AND c.relname LIKE 'capsulegate\_%' AND pg_table_is_visible(c.oid)),
		(SELECT count(*) FROM capsulegate_events e WHERE NOT EXISTS
		   (SELECT 1 FROM capsulegate_tasks t WHERE t.capsule = e.capsule AND t.id = e.task_id)),
		(SELECT count(*) FROM capsulegate_push p WHERE NOT EXISTS
		   (SELECT 1 FROM capsulegate_tasks t WHERE t.capsule = p.capsule AND t.id = p.task_id)),
		(SELECT count(*) FROM capsulegate_blobs b WHERE NOT EXISTS
		   (SELECT 1 FROM capsulegate_tasks t WHERE t.capsule = b.capsule AND t.id = b.task_id))`).
		Scan(&r.Capsules, &r.Tasks, &r.Events, &r.Conversations, &r.Turns, &r.Pushes, &r.Blobs, &r.Bytes, &orphans, &orphanPush, &orphanBlobs)
	if err != nil {
		if isConnErr(err) {
			return r, s.unreachable(err)
		}
		return r, errs.Wrap(err, CodeBadRecord, part, "reading the task store at "+s.where+" failed", "see the database's log").At(s.where, "")
	}
	if orphans+orphanPush+orphanBlobs > 0 {
		return r, errs.New(CodeBadRecord, part, fmt.Sprintf("the task store at %s holds rows of tasks it does not hold: %d journal events, %d push configs, %d blobs",
			s.where, orphans, orphanPush, orphanBlobs),
			"the tables were changed outside the gateway, or restored in part: restore them together from one backup").At(s.where, "")
	}
	return r, nil
}
