package pgstore

import (
	"context"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/errs"
	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
	"github.com/capsulegate/capsulegate/taskstore"
)

// TestFailedStatementFailsItsBatch: the writes of one batch are one transaction: a
// statement the database refuses fails every write of the batch with E-STORE-005, and
// none of them is kept; the next batch commits.
func TestFailedStatementFailsItsBatch(t *testing.T) {
	s, err := Open(context.Background(), pgtest.NewDatabase(t), Options{GroupWindow: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	put := s.PutTask(taskstore.Task{Capsule: "c", ID: "a", Data: []byte("{}")})
	bad := s.enqueue(&op{stmts: []stmt{{"SELECT 1 / $1::int", []any{0}}}})
	s.Hurry()
	for what, ch := range map[string]<-chan error{"the write beside it": put, "the refused statement": bad} {
		if err := <-ch; errs.Find(err, CodeCommit) == nil {
			t.Errorf("%s: got %v, want E-STORE-005", what, err)
		}
	}
	if _, found, _ := s.Task("c", "a"); found {
		t.Error("a write of a failed batch was kept")
	}
	if err := <-s.PutTask(taskstore.Task{Capsule: "c", ID: "b", Data: []byte("{}")}); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
	if s.Ready() != nil {
		t.Errorf("a refused statement marked the database away: %v", s.Ready())
	}
}

// TestLatencyBuckets: the histogram has a count per bucket and one for +Inf.
func TestLatencyBuckets(t *testing.T) {
	var st stats
	if len(st.latency.counts) != len(latencyBuckets)+1 {
		t.Fatalf("%d counts for %d buckets", len(st.latency.counts), len(latencyBuckets))
	}
}

// TestExecModes: the URL's default_query_exec_mode (what a PgBouncer in transaction
// mode needs: exec or simple_protocol) keeps a batch one transaction, refuses a push
// config for a missing task alone, and counts an eviction's rows.
func TestExecModes(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			s, err := Open(context.Background(), pgtest.NewDatabase(t)+"&default_query_exec_mode="+mode,
				Options{GroupWindow: time.Second, PushKey: "0123456789abcdef0123456789abcdef"})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			now := func(ch <-chan error) error { s.Hurry(); return <-ch }
			put := s.PutTask(taskstore.Task{Capsule: "c", ID: "a", Data: []byte("{}")})
			if err := now(s.enqueue(&op{stmts: []stmt{{"SELECT 1 / $1::int", []any{0}}}})); errs.Find(err, CodeCommit) == nil {
				t.Errorf("a refused statement: %v, want E-STORE-005", err)
			}
			if err := <-put; errs.Find(err, CodeCommit) == nil {
				t.Errorf("the write beside it: %v, want E-STORE-005", err)
			}
			if err := now(s.PutTask(taskstore.Task{Capsule: "c", ID: "b", Data: []byte("{}")})); err != nil {
				t.Fatal(err)
			}
			if err := now(s.PutPush("c", taskstore.Push{TaskID: "b", ID: "p", Data: []byte("x")})); err != nil {
				t.Fatal(err)
			}
			if err := now(s.PutPush("c", taskstore.Push{TaskID: "gone", ID: "p", Data: []byte("x")})); errs.Find(err, taskstore.CodeNoTask) == nil {
				t.Errorf("a push config for a missing task: %v, want E-STORE-011", err)
			}
			if got, err := s.Pushes("c", "b"); err != nil || len(got) != 1 || string(got[0].Data) != "x" {
				t.Errorf("Pushes: %v %v", got, err)
			}
			if n, err := s.Evict("c", time.Now().Add(time.Hour), 0, nil); n != 1 || err != nil {
				t.Errorf("Evict: %d, %v; want the one task", n, err)
			}
		})
	}
}
