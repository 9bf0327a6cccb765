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
