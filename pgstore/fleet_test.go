package pgstore_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/pgstore"
	"github.com/capsulegate/capsulegate/taskstore"
)

// queued is a task admitted and not run yet, in context ctx, under digest.
func queued(id, ctx, digest string) taskstore.Task {
	return taskstore.Task{Capsule: "c", ID: id, ContextID: ctx, State: "submitted", Updated: time.Now(), Digest: digest, Data: []byte(`{}`)}
}

func put(t *testing.T, s *pgstore.Store, tasks ...taskstore.Task) {
	t.Helper()
	for _, tk := range tasks {
		if err := <-s.PutTask(tk); err != nil {
			t.Fatal(err)
		}
	}
}

func claimIDs(t *testing.T, s *pgstore.Store, digest string, v taskstore.Versions, n int) []string {
	t.Helper()
	got, _, err := s.Claim("c", digest, v, n)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range got {
		ids = append(ids, c.ID)
	}
	return ids
}

// replica opens a store of the fleet on dsn under name.
func replica(t *testing.T, dsn, name string) *pgstore.Store {
	return open(t, dsn, pgstore.Options{Instance: name, Lease: 2 * time.Second})
}

// TestFleetClaims: a queued task is claimed once, oldest first, only when no earlier task
// of its context is unfinished; the version rule decides what a replica of another
// digest takes.
func TestFleetClaims(t *testing.T) {
	pgtest.Need(t)
	dsn := pgtest.NewDatabase(t)
	a, b := replica(t, dsn, "a"), replica(t, dsn, "b")
	a.Serve("c", "v1")
	b.Serve("c", "v2")

	// Context order: x1 before x2; y1 beside them.
	put(t, a, queued("x1", "x", "v1"), queued("x2", "x", "v1"), queued("y1", "y", "v1"))
	if got := claimIDs(t, a, "v1", taskstore.VersionsServed, 10); !slices.Equal(got, []string{"x1", "y1"}) {
		t.Fatalf("first claim: %v, want x1 and y1 (x2 waits for x1)", got)
	}
	if got := claimIDs(t, b, "v1", taskstore.VersionsAny, 10); len(got) != 0 {
		t.Fatalf("claimed again: %v", got)
	}
	done := queued("x1", "x", "v1")
	done.State, done.Done, done.Mark = "completed", true, "x1"
	put(t, a, done)
	got, more, err := b.Claim("c", "v1", taskstore.VersionsAny, 10)
	if err != nil || more || len(got) != 1 || got[0].ID != "x2" || got[0].PrevMark != "x1" || got[0].PrevRunner != "a" {
		t.Fatalf("after x1 ended: %+v %v, want x2 with x1's mark and runner, nothing left queued", got, err)
	}

	// Versions: v1 is served by a (alive), v3 by nobody.
	put(t, a, queued("v1-task", "p", "v1"), queued("v3-task", "q", "v3"))
	if got := claimIDs(t, b, "v2", taskstore.VersionsExact, 10); len(got) != 0 {
		t.Fatalf("exact claimed %v", got)
	}
	if got := claimIDs(t, b, "v2", taskstore.VersionsServed, 10); !slices.Equal(got, []string{"v3-task"}) {
		t.Fatalf("served claimed %v, want the task of the version nobody serves", got)
	}
	if got := claimIDs(t, b, "v2", taskstore.VersionsAny, 10); !slices.Equal(got, []string{"v1-task"}) {
		t.Fatalf("any claimed %v", got)
	}

	// Many claims at once: each task goes to one replica.
	var all []taskstore.Task
	for i := range 200 {
		all = append(all, queued(fmt.Sprint("m", i), fmt.Sprint("m", i), "v1"))
	}
	put(t, a, all...)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for _, s := range []*pgstore.Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, _, err := s.Claim("c", "v1", taskstore.VersionsAny, 7)
				if err != nil {
					t.Error(err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, c := range got {
					seen[c.ID]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for i := range 200 {
		if n := seen[fmt.Sprint("m", i)]; n != 1 {
			t.Errorf("m%d claimed %d times", i, n)
		}
	}
}

// TestFleetFence: a replica's writes to a task another replica runs are not applied.
func TestFleetFence(t *testing.T) {
	pgtest.Need(t)
	dsn := pgtest.NewDatabase(t)
	a, b := replica(t, dsn, "a"), replica(t, dsn, "b")
	put(t, a, queued("t", "x", ""))
	if got := claimIDs(t, a, "", taskstore.VersionsAny, 1); !slices.Equal(got, []string{"t"}) {
		t.Fatalf("claim: %v", got)
	}
	mine := queued("t", "x", "")
	mine.State = "working"
	put(t, a, mine)
	theirs := queued("t", "x", "")
	theirs.State, theirs.Done = "failed", true
	put(t, b, theirs)
	if err := <-b.Append("c", taskstore.Event{TaskID: "t", Seq: 2, Data: []byte("b's")}); err != nil {
		t.Fatal(err)
	}
	got, ok, err := a.Task("c", "t")
	if err != nil || !ok || got.State != "working" {
		t.Fatalf("after b's write: %+v %v %v, want a's working", got, ok, err)
	}
	var evs []string
	a.Events("c", "t", 0, func(e taskstore.Event) bool { evs = append(evs, string(e.Data)); return true })
	if len(evs) != 0 {
		t.Fatalf("b's event was written: %v", evs)
	}
	if r, err := b.Runner("c", "t"); err != nil || r != "a" {
		t.Fatalf("runner %q %v", r, err)
	}
}

// TestFleetSignals: a committed write reaches every replica's watcher as a signal naming
// the task and its state; a replica that stops leaves its unfinished tasks to the others
// as orphans, adopted once; a name a live replica holds is refused.
func TestFleetSignals(t *testing.T) {
	pgtest.Need(t)
	dsn := pgtest.NewDatabase(t)
	a, b := replica(t, dsn, "a"), replica(t, dsn, "b")
	sigs := make(chan taskstore.Signal, 64)
	stop := b.Watch("c", func(s taskstore.Signal) { sigs <- s })
	defer stop()
	put(t, a, queued("t", "x", ""))
	if s := recvSignal(t, sigs, taskstore.SignalEvents); s.TaskID != "t" || s.Arg != "submitted" {
		t.Fatalf("signal %+v", s)
	}
	if err := a.Signal(taskstore.Signal{Kind: taskstore.SignalCancel, Capsule: "c", TaskID: "t"}); err != nil {
		t.Fatal(err)
	}
	if s := recvSignal(t, sigs, taskstore.SignalCancel); s.TaskID != "t" {
		t.Fatalf("signal %+v", s)
	}

	// a runs t and stops: b is told t is an orphan of a, and adopts it once.
	claimIDs(t, a, "", taskstore.VersionsAny, 1)
	running := queued("t", "x", "")
	running.State = "working"
	put(t, a, running)
	a.Close()
	s := recvSignal(t, sigs, taskstore.SignalOrphan)
	if s.TaskID != "t" || s.Arg != "a" {
		t.Fatalf("orphan %+v", s)
	}
	if _, ok, err := b.Adopt("c", "t", "a"); err != nil || !ok {
		t.Fatalf("adopt: %v %v", ok, err)
	}
	if _, ok, _ := b.Adopt("c", "t", "a"); ok {
		t.Fatal("adopted twice")
	}

	// b's name is b's while b lives: a gateway starting under it is refused once the
	// lease it waited out passed.
	start := time.Now()
	_, err := pgstore.Open(context.Background(), dsn, pgstore.Options{Instance: "b", Lease: 2 * time.Second})
	wantCode(t, "a second replica named b", err, pgstore.CodeLocked)
	t.Logf("refused after %s", time.Since(start).Round(time.Millisecond))
}

func recvSignal(t *testing.T, ch <-chan taskstore.Signal, kind taskstore.SignalKind) taskstore.Signal {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-ch:
			if s.Kind == kind {
				return s
			}
		case <-timeout:
			t.Fatalf("no %c signal within 30 s", kind)
		}
	}
}

// TestFleetLeader: of the replicas, exactly one leads the singleton jobs (retention
// sweeps); when it stops, another takes over within a renewal.
func TestFleetLeader(t *testing.T) {
	pgtest.Need(t)
	dsn := pgtest.NewDatabase(t)
	a, b := replica(t, dsn, "a"), replica(t, dsn, "b")
	leaders := func() (n int, who *pgstore.Store) {
		for _, s := range []*pgstore.Store{a, b} {
			if s.Leader() {
				n, who = n+1, s
			}
		}
		return n, who
	}
	deadline := time.Now().Add(30 * time.Second)
	n, first := leaders()
	for ; n != 1 && time.Now().Before(deadline); n, first = leaders() {
		time.Sleep(50 * time.Millisecond) // polls the replicas' own view; nothing to wait on
	}
	if n != 1 {
		t.Fatalf("%d leaders", n)
	}
	other := a
	if first == a {
		other = b
	}
	first.Close()
	for !other.Leader() {
		if time.Now().After(deadline) {
			t.Fatal("the other replica did not take the lead")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
