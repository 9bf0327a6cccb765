package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/capsulegate/capsulegate/errs"
)

// formatMark is the value of capsulegate_meta's "format" row: what makes the tables ours.
const formatMark = "capsulegate.taskstore"

// migrations are the schema's forward steps: migrations[i] takes version i to i+1, in one
// transaction. A release only ever appends to this list; the database's version is the
// number of steps applied, and a database ahead of len(migrations) is refused (E-STORE-012).
//
// Times are Unix nanoseconds in bigint (timestamptz keeps microseconds only); sequence
// numbers and cursors are bigint. Ids are text: client-given, never part of a statement.
var migrations = []string{
	// 1: the store as the bbolt store keeps it.
	`CREATE TABLE capsulegate_meta (key text PRIMARY KEY, value text NOT NULL);
	 INSERT INTO capsulegate_meta VALUES ('format', '` + formatMark + `');
	 CREATE TABLE capsulegate_tasks (
	   capsule text NOT NULL, id text NOT NULL, context_id text NOT NULL, owner text NOT NULL,
	   state text NOT NULL, since bigint NOT NULL, updated bigint NOT NULL, done boolean NOT NULL,
	   data bytea NOT NULL, PRIMARY KEY (capsule, id));
	 CREATE TABLE capsulegate_events (
	   capsule text NOT NULL, task_id text NOT NULL, seq bigint NOT NULL, data bytea NOT NULL,
	   PRIMARY KEY (capsule, task_id, seq));
	 CREATE TABLE capsulegate_turns (
	   capsule text NOT NULL, context_id text NOT NULL, n bigint GENERATED ALWAYS AS IDENTITY,
	   item bytea NOT NULL, PRIMARY KEY (capsule, context_id, n));
	 CREATE TABLE capsulegate_push (
	   capsule text NOT NULL, task_id text NOT NULL, id text NOT NULL, data bytea NOT NULL,
	   delivered bigint NOT NULL, PRIMARY KEY (capsule, task_id, id));
	 CREATE TABLE capsulegate_blobs (
	   capsule text NOT NULL, task_id text NOT NULL, id text NOT NULL, data bytea NOT NULL,
	   PRIMARY KEY (capsule, task_id, id));`,
	// 2: several gateways on one database (docs/operators.md "Running several gateways"):
	// a task's runner, the capsule digest that admitted it, its admission order, the mark
	// of the context folder it left; the replicas and their leases.
	`CREATE SEQUENCE capsulegate_admitted;
	 ALTER TABLE capsulegate_tasks ADD COLUMN runner text,
	   ADD COLUMN digest text NOT NULL DEFAULT '',
	   ADD COLUMN mark text NOT NULL DEFAULT '',
	   ADD COLUMN admitted bigint NOT NULL DEFAULT nextval('capsulegate_admitted');
	 CREATE INDEX capsulegate_tasks_open ON capsulegate_tasks (capsule, owner, context_id, admitted) WHERE NOT done;
	 CREATE INDEX capsulegate_tasks_queued ON capsulegate_tasks (capsule, admitted) WHERE runner IS NULL AND NOT done;
	 CREATE INDEX capsulegate_tasks_running ON capsulegate_tasks (runner) WHERE runner IS NOT NULL AND NOT done;
	 CREATE INDEX capsulegate_tasks_marked ON capsulegate_tasks (capsule, owner, context_id, admitted) WHERE done AND mark <> '';
	 CREATE INDEX capsulegate_push_pending ON capsulegate_push (capsule, task_id) WHERE delivered <> -1;
	 CREATE TABLE capsulegate_instances (
	   name text PRIMARY KEY, seen bigint NOT NULL, lease bigint NOT NULL, started bigint NOT NULL,
	   serves text[] NOT NULL DEFAULT '{}');`,
	// 3: runtime pins (taskstore.Pins): the artifacts a capsule pulled while it ran, one
	// per artifact name, kept for every replica and restart. Names collate bytewise, so
	// the key's index reads them in the order RuntimePins returns.
	`CREATE TABLE capsulegate_runtime_pins (
	   capsule text NOT NULL, name text COLLATE "C" NOT NULL, version text NOT NULL,
	   sha256 text NOT NULL, registry text NOT NULL, role text NOT NULL,
	   implementation text NOT NULL, platform text NOT NULL, origin text NOT NULL,
	   pulled bigint NOT NULL, by_task text NOT NULL, PRIMARY KEY (capsule, name));`,
	// 4: token budgets (taskstore.Budgets): a principal's model tokens of the newest
	// window, one row per key, which every replica adds to.
	`CREATE TABLE capsulegate_budgets (
	   key text PRIMARY KEY, win bigint NOT NULL, tokens bigint NOT NULL);`,
}

// SchemaVersion is the schema version this release writes and reads.
var SchemaVersion = len(migrations)

// migrateKey is the transaction-level advisory lock migrations run under, so that
// gateways starting together migrate once: "capsulegate.migrate" in eight bytes.
const migrateKey int64 = 0x6361_7073_6d69_6772

// migrate checks the schema and applies the missing steps (none when read-only),
// returning the version found and the version left.
func (s *Store) migrate(ctx context.Context) (from, to int, err error) {
	ctx, cancel := context.WithTimeout(ctx, 4*s.opts.Timeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if !s.opts.ReadOnly {
			if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", migrateKey); err != nil {
				return err
			}
		}
		if from, err = s.version(ctx, tx); err != nil {
			return err
		}
		switch {
		case from > SchemaVersion:
			return errs.New(CodeNewer, part, fmt.Sprintf("the task store at %s has schema version %d; this release knows versions up to %d", s.where, from, SchemaVersion),
				"run a release at least as new as the one that migrated the database (or restore a backup taken before)").At(s.where, "")
		case from < SchemaVersion && s.opts.ReadOnly:
			return errs.New(CodeOlder, part, fmt.Sprintf("the task store at %s has schema version %d; this release reads version %d", s.where, from, SchemaVersion),
				"run `caddy capsule store migrate` with this release (a gateway starting migrates it too)").At(s.where, "")
		}
		for v := from; v < SchemaVersion; v++ {
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("migrating the schema to version %d: %w", v+1, err)
			}
		}
		if from < SchemaVersion {
			_, err := tx.Exec(ctx, `INSERT INTO capsulegate_meta VALUES ('schema', $1)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, strconv.Itoa(SchemaVersion))
			return err
		}
		return nil
	})
	if err != nil {
		var e *errs.Error
		if errors.As(err, &e) {
			return from, from, err
		}
		if isConnErr(err) {
			return from, from, s.unreachable(err)
		}
		return from, from, errs.Wrap(err, CodeNotAStore, part, "the task store's tables at "+s.where+" cannot be read or migrated",
			"check that the database user may create tables in its schema; tables named capsulegate_* that another program made must be moved away").At(s.where, "")
	}
	return from, SchemaVersion, nil
}

// version reads the schema version: 0 for a database without the store's tables, an
// E-STORE-001 error for tables of our names that are not ours.
func (s *Store) version(ctx context.Context, tx pgx.Tx) (int, error) {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT to_regclass('capsulegate_meta') IS NOT NULL").Scan(&exists); err != nil {
		return 0, err
	}
	if !exists {
		var stray bool
		if err := tx.QueryRow(ctx, "SELECT to_regclass('capsulegate_tasks') IS NOT NULL").Scan(&stray); err != nil {
			return 0, err
		}
		if stray {
			return 0, s.notAStore("capsulegate_tasks exists without capsulegate_meta")
		}
		return 0, nil
	}
	rows, err := tx.Query(ctx, "SELECT key::text, value::text FROM capsulegate_meta WHERE key IN ('format', 'schema')")
	if err != nil {
		return 0, s.notAStore("capsulegate_meta cannot be read: " + err.Error())
	}
	meta := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			rows.Close()
			return 0, s.notAStore("capsulegate_meta cannot be read: " + err.Error())
		}
		meta[k] = v
	}
	if err := rows.Err(); err != nil {
		return 0, s.notAStore("capsulegate_meta cannot be read: " + err.Error())
	}
	if meta["format"] != formatMark {
		return 0, s.notAStore(fmt.Sprintf("capsulegate_meta's format is %q, not %q", meta["format"], formatMark))
	}
	v, err := strconv.Atoi(meta["schema"])
	if err != nil || v < 1 {
		return 0, s.notAStore(fmt.Sprintf("capsulegate_meta's schema version %q is not a version", meta["schema"]))
	}
	return v, nil
}

func (s *Store) notAStore(why string) error {
	return errs.New(CodeNotAStore, part, "the tables at "+s.where+" are not a task store of this release: "+why,
		"point the store at another database or schema, or move the capsulegate_* tables away (restore a backup if they were the gateway's)").At(s.where, "")
}

// Migrate brings the database at dsn to this release's schema, under the migration
// lock, and returns the versions before and after; `caddy capsule store migrate` runs it.
func Migrate(ctx context.Context, dsn string) (from, to int, err error) {
	s, err := connect(ctx, dsn, Options{Shared: true})
	if err != nil {
		return 0, 0, err
	}
	defer s.pool.Close()
	return s.migrate(ctx)
}

// connect makes a Store with a pool and no schema check, committer or lock.
func connect(ctx context.Context, dsn string, opts Options) (*Store, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg, err := poolConfig(dsn, opts)
	if err != nil {
		return nil, err
	}
	s := newStore(cfg, opts)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, s.unreachable(err)
	}
	s.pool = pool
	return s, nil
}
