package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/taskstore"
)

// Runtime pins (taskstore.Pins) are rows of capsulegate_runtime_pins (schema version 3),
// keyed by (capsule, name). They belong to no task, so they are written beside the
// committer rather than through it: each method is one statement, autocommitted, within
// the caller's context and the store's timeout, on a connection taken from the pool for
// it. A write returns once the database committed it; a database known to be away
// refuses it at once (E-STORE-015), and it is not kept for later, unlike a task's
// writes. Reads go to the database every time, so a replica of several sees what
// another wrote as soon as that write returned.

const (
	sqlRuntimePins = `SELECT name, version, sha256, registry, role, implementation, platform, origin, pulled, by_task
		FROM capsulegate_runtime_pins WHERE capsule = $1 ORDER BY name`
	sqlPutRuntimePin = `INSERT INTO capsulegate_runtime_pins
		(capsule, name, version, sha256, registry, role, implementation, platform, origin, pulled, by_task)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (capsule, name) DO UPDATE SET version = excluded.version, sha256 = excluded.sha256,
		registry = excluded.registry, role = excluded.role, implementation = excluded.implementation,
		platform = excluded.platform, origin = excluded.origin, pulled = excluded.pulled, by_task = excluded.by_task`
	sqlDeleteRuntimePin = `DELETE FROM capsulegate_runtime_pins WHERE capsule = $1 AND name = $2`
)

// RuntimePins returns the capsule's runtime pins in name order (bytewise), as the
// database holds them now.
func (s *Store) RuntimePins(ctx context.Context, capsule string) ([]taskstore.RuntimePin, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return nil, err
	}
	var out []taskstore.RuntimePin
	err := s.pinTrip(ctx, false, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, sqlRuntimePins, capsule)
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (taskstore.RuntimePin, error) {
			p := taskstore.RuntimePin{Capsule: capsule}
			var pulled int64
			err := r.Scan(&p.Name, &p.Version, &p.SHA256, &p.Registry, &p.Role, &p.Implementation, &p.Platform, &p.Origin, &pulled, &p.By)
			p.Pulled = fromNanos(pulled)
			return p, err
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: reading the runtime pins of %s: %w", capsule, err)
	}
	return out, nil
}

// PutRuntimePin creates or replaces the pin (p.Capsule, p.Name), once
// taskstore.CheckRuntimePin passes it, and returns once the database committed it.
func (s *Store) PutRuntimePin(ctx context.Context, p taskstore.RuntimePin) error {
	if err := taskstore.CheckRuntimePin(p); err != nil {
		return err
	}
	err := s.pinTrip(ctx, true, func(ctx context.Context) error {
		_, err := s.pool.Exec(ctx, sqlPutRuntimePin, p.Capsule, p.Name, p.Version, p.SHA256, p.Registry, p.Role,
			p.Implementation, p.Platform, p.Origin, nanos(p.Pulled), p.By)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: writing runtime pin %s/%s: %w", p.Capsule, p.Name, err)
	}
	return nil
}

// DeleteRuntimePin removes the pin (capsule, name), reporting whether there was one, and
// returns once the database committed the removal.
func (s *Store) DeleteRuntimePin(ctx context.Context, capsule, name string) (bool, error) {
	if err := taskstore.CheckID("capsule", capsule); err != nil {
		return false, err
	}
	if err := taskstore.CheckPinName(name); err != nil {
		return false, err
	}
	var had bool
	err := s.pinTrip(ctx, true, func(ctx context.Context) error {
		tag, err := s.pool.Exec(ctx, sqlDeleteRuntimePin, capsule, name)
		had = tag.RowsAffected() > 0
		return err
	})
	if err != nil {
		return false, fmt.Errorf("pgstore: deleting runtime pin %s/%s: %w", capsule, name, err)
	}
	return had, nil
}

// pinTrip makes one round trip of a pin method: refused when the store is closed, or for
// a write read-only, or while the database is known to be away; bounded by ctx and the
// store's timeout. Its error carries the store's code: E-STORE-015 for a database that
// did not answer (which the store then reports as away, as a failed commit does), the
// caller's context error when ctx ended first, and otherwise E-STORE-005 for a write and
// E-STORE-007 for a read the database refused.
func (s *Store) pinTrip(ctx context.Context, write bool, trip func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Held for reading through the round trip: Close waits for it before closing the pool.
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return taskstore.Closed()
	}
	if write && s.opts.ReadOnly {
		return errs.New(CodeReadOnly, part, "the task store was opened read-only", "a gateway bug: report it")
	}
	if p := s.down.Load(); p != nil {
		return *p
	}
	tctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
	defer cancel()
	start := time.Now()
	err := trip(tctx)
	s.stats.roundTrip(time.Since(start), err)
	if write {
		s.stats.ops.Add(1)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		// The caller gave up, not the database: the store's state is unchanged.
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	case isConnErr(err):
		return s.failed(err)
	case write:
		return errs.Wrap(err, CodeCommit, part, "the database at "+s.where+" refused a runtime pin's write; it is not kept",
			"see the database's log for the statement's error").At(s.where, "")
	default:
		return errs.Wrap(err, CodeBadRecord, part, "reading the task store at "+s.where+" failed",
			"see the database's log; restore the tables from a backup if they were damaged").At(s.where, "")
	}
}

var _ taskstore.Pins = (*Store)(nil)
