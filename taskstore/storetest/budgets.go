package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/capsulegate/capsulegate/taskstore"
)

// testBudgets is the table's row for a store that implements taskstore.Budgets (skipped
// for one that does not): counts per key and window, a newer window starting again, a
// late add to an older window counted nowhere, concurrent adds none lost, and the count
// kept across a restart.
func testBudgets(t *testing.T, h *harness) {
	b, ok := h.s.(taskstore.Budgets)
	if !ok {
		t.Skipf("%T does not implement taskstore.Budgets", h.s)
	}
	ctx := context.Background()
	spend := func(key string, window, n, want int64) {
		t.Helper()
		got, err := b.SpendTokens(ctx, key, window, n)
		if err != nil || got != want {
			t.Fatalf("SpendTokens(%s, window %d, %d) = %d, %v; want %d", key, window, n, got, err, want)
		}
	}
	spend("tokens:a", 10, 0, 0)
	spend("tokens:a", 10, 300, 300)
	spend("tokens:a", 10, 200, 500)
	spend("tokens:b", 10, 7, 7) // keys apart
	spend("tokens:a", 10, 0, 500)
	spend("tokens:a", 11, 50, 50) // a new window starts again
	spend("tokens:a", 10, 0, 0)   // the old window's count is gone
	spend("tokens:a", 10, 99, 0)  // a late add counts nowhere
	spend("tokens:a", 11, 0, 50)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				if _, err := b.SpendTokens(ctx, "tokens:c", 3, 2); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	spend("tokens:c", 3, 0, 400)
	h.restart()
	b, ok = h.s.(taskstore.Budgets)
	if !ok {
		t.Fatalf("the store opened again (%T) does not implement taskstore.Budgets", h.s)
	}
	spend("tokens:c", 3, 0, 400)
	if _, err := b.SpendTokens(ctx, "", 3, 1); err == nil {
		t.Error("an empty key was taken")
	}
}
