// Package gather collects the batch of a group commit: after the first write, more
// writes as they come, until a window passes, a caller waiting for a write hurries the
// commit, or the batch is full. The task stores' committers share it.
package gather

import "time"

// Batch returns first and the writes queue yields after it, until window has passed
// since first, hurry receives, queue closes, or the batch holds max writes; timer is the
// committer's own (stopped on return), reused from batch to batch. closed reports that
// queue closed.
func Batch[T any](first T, queue <-chan T, hurry <-chan struct{}, timer *time.Timer, window time.Duration, max int) (batch []T, closed bool) {
	batch = []T{first}
	timer.Reset(window)
	defer timer.Stop()
	for len(batch) < max {
		// What is queued already joins without a select on the others.
		select {
		case o, ok := <-queue:
			if !ok {
				return batch, true
			}
			batch = append(batch, o)
			continue
		default:
		}
		// Nothing more queued right now: wait for more, for the window's end, or for a
		// caller who waits.
		select {
		case o, ok := <-queue:
			if !ok {
				return batch, true
			}
			batch = append(batch, o)
		case <-hurry:
			return batch, false
		case <-timer.C:
			return batch, false
		}
	}
	return batch, false
}
