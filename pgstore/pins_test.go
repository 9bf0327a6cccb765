package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskstore"
)

func runtimePin(name, version string) taskstore.RuntimePin {
	return taskstore.RuntimePin{Capsule: "c", Name: name, Version: version, SHA256: strings.Repeat("cd", 32),
		Registry: "hub", Role: "tool", Implementation: "wasm", Origin: taskstore.OriginRuntime,
		Pulled: time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC), By: "t-1"}
}

func putPin(t *testing.T, s *pgstore.Store, p taskstore.RuntimePin) {
	t.Helper()
	if err := s.PutRuntimePin(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// pinList is the capsule's pins as "name@version" words.
func pinList(t *testing.T, s *pgstore.Store, capsule string) string {
	t.Helper()
	ps, err := s.RuntimePins(context.Background(), capsule)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.Name+"@"+p.Version)
	}
	return strings.Join(out, " ")
}

// TestPinsFleet: a replica reads the pins another wrote, replaced or deleted as soon as
// that write returned: nothing is cached.
func TestPinsFleet(t *testing.T) {
	pgtest.Need(t)
	dsn := pgtest.NewDatabase(t)
	a, b := replica(t, dsn, "a"), replica(t, dsn, "b")
	putPin(t, a, runtimePin("jq", "1.7.1"))
	if got := pinList(t, b, "c"); got != "jq@1.7.1" {
		t.Fatalf("b after a's put: %q", got)
	}
	putPin(t, b, runtimePin("jq", "1.8.0"))
	putPin(t, b, runtimePin("rg", "14.0.0"))
	if got := pinList(t, a, "c"); got != "jq@1.8.0 rg@14.0.0" {
		t.Fatalf("a after b's replace and put: %q", got)
	}
	if had, err := a.DeleteRuntimePin(context.Background(), "c", "jq"); !had || err != nil {
		t.Fatalf("a's delete: %v, %v", had, err)
	}
	if had, err := b.DeleteRuntimePin(context.Background(), "c", "jq"); had || err != nil {
		t.Fatalf("b's delete of the pin a deleted: %v, %v; want false, nil", had, err)
	}
	if got := pinList(t, b, "c"); got != "rg@14.0.0" {
		t.Fatalf("b after a's delete: %q", got)
	}
}

// TestPinsMigration: a database at schema version 2 (before runtime pins) migrates to
// this release's, gaining capsulegate_runtime_pins with its tasks untouched; Check passes
// a database holding pins (they belong to no task).
func TestPinsMigration(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	s := open(t, dsn, pgstore.Options{})
	put(t, s, task("a"))
	s.Close()
	exec(t, dsn, "DROP TABLE capsulegate_runtime_pins")
	exec(t, dsn, "DROP TABLE capsulegate_budgets") // version 4's
	exec(t, dsn, "UPDATE capsulegate_meta SET value = '2' WHERE key = 'schema'")
	_, err := pgstore.Check(ctx, dsn)
	wantCode(t, "Check of a version 2 database", err, pgstore.CodeOlder)
	from, to, err := pgstore.Migrate(ctx, dsn)
	if err != nil || from != 2 || to != pgstore.SchemaVersion {
		t.Fatalf("Migrate from version 2: %d → %d, %v; want 2 → %d", from, to, err, pgstore.SchemaVersion)
	}
	s = open(t, dsn, pgstore.Options{})
	if _, ok, err := s.Task("c", "a"); !ok || err != nil {
		t.Fatalf("the task after the migration: %v, %v", ok, err)
	}
	putPin(t, s, runtimePin("jq", "1.7.1"))
	s.Close()
	r, err := pgstore.Check(ctx, dsn)
	if err != nil || r.Schema != pgstore.SchemaVersion || r.Tasks != 1 {
		t.Fatalf("Check with a pin: %+v, %v", r, err)
	}
}

// TestPinsReadOnly: a store opened read-only (as store check opens one) reads pins and
// refuses to write them (E-STORE-009).
func TestPinsReadOnly(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s := open(t, dsn, pgstore.Options{})
	putPin(t, s, runtimePin("jq", "1.7.1"))
	ro := open(t, dsn, pgstore.Options{ReadOnly: true})
	if got := pinList(t, ro, "c"); got != "jq@1.7.1" {
		t.Fatalf("read-only: %q", got)
	}
	wantCode(t, "PutRuntimePin read-only", ro.PutRuntimePin(context.Background(), runtimePin("rg", "1")), pgstore.CodeReadOnly)
	_, err := ro.DeleteRuntimePin(context.Background(), "c", "jq")
	wantCode(t, "DeleteRuntimePin read-only", err, pgstore.CodeReadOnly)
	if got := pinList(t, s, "c"); got != "jq@1.7.1" {
		t.Fatalf("after refused writes: %q", got)
	}
}

// TestPinsContext: a caller's context that ends first is the caller's error, wrapped, and
// does not mark the database away.
func TestPinsContext(t *testing.T) {
	s := open(t, pgtest.NewDatabase(t), pgstore.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.PutRuntimePin(ctx, runtimePin("jq", "1")); !errors.Is(err, context.Canceled) {
		t.Errorf("PutRuntimePin with a done context: %v", err)
	}
	if _, err := s.RuntimePins(ctx, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("RuntimePins with a done context: %v", err)
	}
	short, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	if _, err := s.DeleteRuntimePin(short, "c", "jq"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeleteRuntimePin past its deadline: %v", err)
	}
	if err := s.Ready(); err != nil {
		t.Errorf("Ready after callers gave up: %v, want nil", err)
	}
}

// TestPinsOutage: while the database is away a pin's write is refused with E-STORE-015,
// at once once the store knows, and not kept: the pin is not there when it is back.
func TestPinsOutage(t *testing.T) {
	pgtest.Need(t)
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	dsn, err := c.CreateDatabase()
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dsn, pgstore.Options{Timeout: 2 * time.Second})
	putPin(t, s, runtimePin("before", "1"))
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	err = s.PutRuntimePin(context.Background(), runtimePin("during", "1"))
	wantCode(t, "PutRuntimePin while the database is away", err, pgstore.CodeUnreachable)
	var kept *taskstore.KeptError
	if errors.As(err, &kept) {
		t.Errorf("a pin's write while the database is away: a KeptError; pins are not kept for later")
	}
	wantCode(t, "Ready after a pin's failed write", s.Ready(), pgstore.CodeUnreachable)
	start := time.Now()
	_, err = s.RuntimePins(context.Background(), "c")
	wantCode(t, "RuntimePins while the store knows the database is away", err, pgstore.CodeUnreachable)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a read while the store knows the database is away took %s; it should fail at once", d)
	}
	if err := c.Resume(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the store is not ready 30 s after the database came back: %v", s.Ready())
		}
		time.Sleep(50 * time.Millisecond) // polling the probe's outcome
	}
	if got := pinList(t, s, "c"); got != "before@1" {
		t.Fatalf("pins after the outage: %q, want the one written before", got)
	}
}

// TestBudgetsMigration: a database at schema version 3 (before token budgets) migrates to
// this release's, gaining capsulegate_budgets, which then counts.
func TestBudgetsMigration(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	s := open(t, dsn, pgstore.Options{})
	put(t, s, task("a"))
	s.Close()
	exec(t, dsn, "DROP TABLE capsulegate_budgets")
	exec(t, dsn, "UPDATE capsulegate_meta SET value = '3' WHERE key = 'schema'")
	from, to, err := pgstore.Migrate(ctx, dsn)
	if err != nil || from != 3 || to != pgstore.SchemaVersion {
		t.Fatalf("Migrate from version 3: %d → %d, %v; want 3 → %d", from, to, err, pgstore.SchemaVersion)
	}
	s = open(t, dsn, pgstore.Options{})
	defer s.Close()
	if n, err := s.SpendTokens(ctx, "tokens:x", 1, 5); n != 5 || err != nil {
		t.Fatalf("SpendTokens after the migration: %d, %v", n, err)
	}
}
