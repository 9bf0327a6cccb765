package taskdb

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/capsulegate/capsulegate/taskstore"
)

// BenchmarkAppend appends one ~300-byte event per op and waits until it is durable, from
// one writer and from 200 writers at once; commits/op shows how many ops share an fsync.
func BenchmarkAppend(b *testing.B) {
	data := make([]byte, 300)
	for _, writers := range []int{1, 200} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			db, err := Open(filepath.Join(b.TempDir(), "tasks.db"), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var next atomic.Uint64
			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					task := fmt.Sprint("task-", w)
					for {
						n := next.Add(1)
						if n > uint64(b.N) {
							return
						}
						if err := <-db.Append("hello", taskstore.Event{TaskID: task, Seq: n, Data: data}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(db.Stats().Commits)/float64(b.N), "commits/op")
		})
	}
}
