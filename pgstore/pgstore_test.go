package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskstore"
)

func open(t *testing.T, dsn string, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if e := errs.Find(err, code); e == nil {
		t.Fatalf("%s: got %v, want an error with code %s", what, err, code)
	}
}

func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func task(id string) taskstore.Task {
	return taskstore.Task{Capsule: "c", ID: id, ContextID: "ctx-" + id, State: "completed", Done: true,
		Updated: time.Now(), Data: []byte(`{"id":"` + id + `"}`)}
}

// TestOneGatewayPerDatabase: a second store on a database a gateway holds is refused with
// E-STORE-002 naming it; once the first closes, it opens.
func TestOneGatewayPerDatabase(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	first, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pgstore.Open(context.Background(), dsn, pgstore.Options{})
	wantCode(t, "a second gateway's Open", err, pgstore.CodeLocked)
	if !strings.Contains(err.Error(), first.Where()) {
		t.Errorf("the refusal does not name the database %s: %v", first.Where(), err)
	}
	first.Close()
	open(t, dsn, pgstore.Options{})
}

// TestSchemaVersions: migrations run once and Migrate reports them; a schema newer than
// the release is refused (E-STORE-012); check refuses a database without the schema
// (E-STORE-013) instead of creating it.
func TestSchemaVersions(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	ctx := context.Background()
	_, err := pgstore.Check(ctx, dsn)
	wantCode(t, "Check of an empty database", err, pgstore.CodeOlder)
	from, to, err := pgstore.Migrate(ctx, dsn)
	if err != nil || from != 0 || to != pgstore.SchemaVersion {
		t.Fatalf("Migrate of an empty database: %d → %d, %v", from, to, err)
	}
	if from, to, err = pgstore.Migrate(ctx, dsn); err != nil || from != to {
		t.Fatalf("Migrate again: %d → %d, %v", from, to, err)
	}
	s := open(t, dsn, pgstore.Options{})
	if err := <-s.PutTask(task("a")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := pgstore.Check(ctx, dsn)
	if err != nil || r.Tasks != 1 || r.Capsules != 1 || r.Schema != pgstore.SchemaVersion || r.Bytes == 0 {
		t.Fatalf("Check: %+v, %v", r, err)
	}
	exec(t, dsn, "INSERT INTO capsulegate_events VALUES ('c', 'gone', 1, 'x')")
	_, err = pgstore.Check(ctx, dsn)
	wantCode(t, "Check with an orphan event", err, pgstore.CodeBadRecord)
	exec(t, dsn, "UPDATE capsulegate_meta SET value = '99' WHERE key = 'schema'")
	_, err = pgstore.Open(ctx, dsn, pgstore.Options{})
	wantCode(t, "Open of a newer schema", err, pgstore.CodeNewer)
	if !strings.Contains(err.Error(), "99") {
		t.Errorf("the refusal does not name the version: %v", err)
	}
}

// TestUnreachable: a database that is not there is refused with E-STORE-015 naming the
// host, within the timeout, not after a hang.
func TestUnreachable(t *testing.T) {
	c := pgtest.Shared(t)
	dsn := strings.Replace(c.DSN("nope"), c.Addr(), "127.0.0.1:1", 1)
	start := time.Now()
	_, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Timeout: 2 * time.Second})
	wantCode(t, "Open of an address nothing listens on", err, pgstore.CodeUnreachable)
	if !strings.Contains(err.Error(), "127.0.0.1:1/nope") {
		t.Errorf("the refusal does not name the host: %v", err)
	}
	t.Logf("refused after %s", time.Since(start))
	// A database the server does not have is a connection that cannot be made, too.
	_, err = pgstore.Open(context.Background(), c.DSN("no_such_database"), pgstore.Options{})
	wantCode(t, "Open of a database the server does not have", err, pgstore.CodeUnreachable)
	if !strings.Contains(err.Error(), "no_such_database") {
		t.Errorf("the refusal does not name the database: %v", err)
	}
	_, err = pgstore.Open(context.Background(), "postgres://user:hunter2@[bad", pgstore.Options{})
	wantCode(t, "Open of an address that does not parse", err, pgstore.CodeDSN)
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the refusal shows the password: %v", err)
	}
}

// TestOutage stops the server under a store: writes fail with E-STORE-015 within the
// timeout and then at once, Ready says so, and once the server is back the store is
// ready again by itself, with everything acknowledged before the outage.
func TestOutage(t *testing.T) {
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
	s := open(t, dsn, pgstore.Options{Timeout: 2 * time.Second, PushKey: testKey})
	if err := <-s.PutTask(task("before")); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = <-s.PutTask(task("during"))
	wantCode(t, "a write while the database is away", err, pgstore.CodeUnreachable)
	var kept *taskstore.KeptError
	if !errors.As(err, &kept) {
		t.Errorf("a write while the database is away: %T, want a taskstore.KeptError (written once it is back)", err)
	}
	t.Logf("the first write failed after %s", time.Since(start))
	wantCode(t, "Ready while the database is away", s.Ready(), pgstore.CodeUnreachable)
	start = time.Now()
	wantCode(t, "the next write", <-s.PutTask(task("during2")), pgstore.CodeUnreachable)
	if d := time.Since(start); d > time.Second {
		t.Errorf("a write while the store knows the database is away took %s; it should fail at once", d)
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
	if err := <-s.PutTask(task("after")); err != nil {
		t.Fatalf("a write after the database came back: %v", err)
	}
	// The writes refused while the database was away were kept, in order, and written
	// once it came back, before the write that followed.
	for _, id := range []string{"before", "during", "during2", "after"} {
		if _, ok, err := s.Task("c", id); !ok || err != nil {
			t.Errorf("task %s after the outage: %v %v", id, ok, err)
		}
	}
	if st := s.Stats(); st.Backlog != 0 || st.Dropped != 0 {
		t.Errorf("after the outage: %+v, want an empty backlog and nothing dropped", st)
	}
	// The lock came back with the database: a second gateway is still refused.
	_, err = pgstore.Open(context.Background(), dsn, pgstore.Options{})
	wantCode(t, "a second gateway after the outage", err, pgstore.CodeLocked)
}

// TestPushSealed: push configs are sealed at rest under the store key; another key does
// not open them (E-STORE-014), nor does a store without one take them.
func TestPushSealed(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	s := open(t, dsn, pgstore.Options{PushKey: testKey})
	secret := []byte(`{"url":"https://hooks.example.com","token":"s3cret-token"}`)
	if err := <-s.PutTask(task("a")); err != nil {
		t.Fatal(err)
	}
	if err := <-s.PutPush("c", taskstore.Push{TaskID: "a", ID: "p", Data: secret}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	if err := conn.QueryRow(context.Background(), "SELECT data FROM capsulegate_push").Scan(&raw); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())
	if bytes.Contains(raw, []byte("s3cret")) || bytes.Contains(raw, []byte("hooks.example")) {
		t.Fatalf("the push config is stored in the clear: %q", raw)
	}
	got, err := s.Pushes("c", "a")
	if err != nil || len(got) != 1 || !bytes.Equal(got[0].Data, secret) {
		t.Fatalf("Pushes: %v %v", got, err)
	}
	s.Close()
	other := open(t, dsn, pgstore.Options{PushKey: strings.Repeat("k", pgstore.MinKeyLen)})
	_, err = other.Pushes("c", "a")
	wantCode(t, "reading with another key", err, pgstore.CodeKey)
	other.Close()
	none := open(t, dsn, pgstore.Options{})
	wantCode(t, "PutPush without a key", <-none.PutPush("c", taskstore.Push{TaskID: "a", ID: "q", Data: secret}), pgstore.CodeKey)
	_, err = pgstore.Open(context.Background(), dsn, pgstore.Options{PushKey: "short"})
	wantCode(t, "a short key", err, pgstore.CodeKey)
}

// TestMetricsFromZero: every capsule_store_* series is there before the first write, and
// counts the round trips after.
func TestMetricsFromZero(t *testing.T) {
	s := open(t, pgtest.NewDatabase(t), pgstore.Options{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	names := func() map[string]bool {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, mf := range mfs {
			out[mf.GetName()] = true
		}
		return out
	}
	for _, n := range []string{"capsule_store_round_trips_total", "capsule_store_errors_total", "capsule_store_writes_total",
		"capsule_store_round_trip_seconds", "capsule_store_up", "capsule_store_connections"} {
		if !names()[n] {
			t.Errorf("%s is missing before the first write", n)
		}
	}
	before := s.Stats().RoundTrips
	if err := <-s.PutTask(task("a")); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats().RoundTrips - before; got != 1 {
		t.Errorf("one write cost %d round trips, want 1", got)
	}
	if n := testutil.CollectAndCount(s.Collector(), "capsule_store_up"); n != 1 {
		t.Errorf("capsule_store_up: %d series", n)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	pgtest.CloseShared()
	os.Exit(code)
}

// testKey is the store_key of the tests' stores.
const testKey = "0123456789abcdef0123456789abcdef-test"
