package a2a

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/capsulegate/capsulegate/internal/testkit/pgtest"
)

func TestFleetBlockingStress(t *testing.T) {
	pgtest.Need(t)
	fl := newFleet(t, 2, Config{Lifecycle: Lifecycle{Concurrency: 2, Acceptance: AcceptQueue, QueueDepth: 100}}, func(name string) Executor {
		return execFunc(func(ctx context.Context, job *Job) Outcome {
			job.Chunk("x")
			time.Sleep(2 * time.Millisecond)
			return Outcome{State: "completed", Text: name}
		})
	})
	var wg sync.WaitGroup
	for c := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				msg := msg03("hi")
				if c%2 == 0 {
					msg = msg03("hi", fmt.Sprintf("contextId=ctx-%d", c))
				}
				done := make(chan rpcResp, 1)
				go func() { done <- call(t, fl[c%2].srv, "", "message/send", map[string]any{"message": msg}) }()
				select {
				case r := <-done:
					if task := decode[tObj](t, ok(t, r)); task.Status.State != "completed" {
						t.Errorf("state %s", task.Status.State)
					}
				case <-time.After(20 * time.Second):
					t.Errorf("client %d: a blocking send hung", c)
					return
				}
			}
		}()
	}
	wg.Wait()
}
