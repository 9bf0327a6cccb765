package taskdb

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/capsulegate/capsulegate/taskstore"
)

// Token budgets (taskstore.Budgets) live in the "budgets" bucket: one record per key, the
// count of its newest window. A write to a newer window replaces the record; the
// committer applies writes one at a time, so two adds never lose one.

// budgetVersion is the layout of a budget record: version, window, count.
const budgetVersion = 1

func budgetKey(key string) []byte { return appendString(nil, key) }

func encodeBudget(window, n int64) []byte {
	b := []byte{budgetVersion}
	b = binary.BigEndian.AppendUint64(b, uint64(window))
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func decodeBudget(v []byte) (window, n int64, err error) {
	if len(v) != 17 || v[0] != budgetVersion {
		return 0, 0, errors.New("budget record: not version 1 with a window and a count")
	}
	return int64(binary.BigEndian.Uint64(v[1:9])), int64(binary.BigEndian.Uint64(v[9:])), nil
}

// SpendTokens adds n to key's count of window (0 reads it) and returns the count after,
// once the write is on disk.
func (db *DB) SpendTokens(ctx context.Context, key string, window, n int64) (int64, error) {
	if err := taskstore.CheckID("budget key", key); err != nil {
		return 0, err
	}
	k := budgetKey(key)
	var total int64
	count := func(r *view) error {
		total = 0
		if v := r.get(bBudgets, k); v != nil {
			w, c, err := decodeBudget(v)
			if err != nil {
				return err
			}
			if w == window {
				total = c
			}
		}
		return nil
	}
	if n == 0 {
		if err := db.view(count); err != nil {
			return 0, fmt.Errorf("taskdb: reading the token count of %q: %w", key, err)
		}
		return total, nil
	}
	err := db.wait(ctx, func(w *view) error {
		if err := count(w); err != nil {
			return err
		}
		if old := w.get(bBudgets, k); old != nil {
			if ow, _, _ := decodeBudget(old); ow > window {
				return nil // a later window is counted already: this add is too late to count
			}
		}
		total += n
		w.put(bBudgets, k, encodeBudget(window, total))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("taskdb: adding to the token count of %q: %w", key, err)
	}
	return total, nil
}

var _ taskstore.Budgets = (*DB)(nil)
