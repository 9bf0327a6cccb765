package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/capsulegate/capsulegate/taskstore"
)

// Token budgets (taskstore.Budgets): one row per key holding the count of its newest
// window. An add is one statement, so the replicas of a fleet adding at once never lose
// one: a row of an older window starts again from n, a newer window's row is left as it
// is (an add that comes too late counts nowhere).
const (
	sqlSpendTokens = `INSERT INTO capsulegate_budgets AS b (key, win, tokens) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET
		  tokens = CASE WHEN b.win = excluded.win THEN b.tokens + excluded.tokens WHEN b.win < excluded.win THEN excluded.tokens ELSE b.tokens END,
		  win = GREATEST(b.win, excluded.win)
		RETURNING CASE WHEN win = $2 THEN tokens ELSE 0 END`
	sqlTokens = `SELECT tokens FROM capsulegate_budgets WHERE key = $1 AND win = $2`
)

// SpendTokens adds n to key's count of window (0 reads it) and returns the count after,
// once the database committed it.
func (s *Store) SpendTokens(ctx context.Context, key string, window, n int64) (int64, error) {
	if err := taskstore.CheckID("budget key", key); err != nil {
		return 0, err
	}
	var total int64
	err := s.pinTrip(ctx, n != 0, func(ctx context.Context) error {
		if n == 0 {
			err := s.pool.QueryRow(ctx, sqlTokens, key, window).Scan(&total)
			if errors.Is(err, pgx.ErrNoRows) {
				total = 0
				return nil
			}
			return err
		}
		return s.pool.QueryRow(ctx, sqlSpendTokens, key, window, n).Scan(&total)
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: the token count of %q: %w", key, err)
	}
	return total, nil
}

// OpenTasks counts the owner's unfinished tasks of the capsule, on every replica.
func (s *Store) OpenTasks(ctx context.Context, capsule, owner string) (int, error) {
	var n int
	err := s.pinTrip(ctx, false, func(ctx context.Context) error {
		return s.pool.QueryRow(ctx, `SELECT count(*) FROM capsulegate_tasks WHERE capsule = $1 AND owner = $2 AND NOT done`, capsule, owner).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("pgstore: counting the unfinished tasks of %q: %w", owner, err)
	}
	return n, nil
}

var (
	_ taskstore.Budgets     = (*Store)(nil)
	_ taskstore.OpenCounter = (*Store)(nil)
)
