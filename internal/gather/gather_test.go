package gather

import (
	"testing"
	"time"
)

// TestBatch: a batch ends when it is full, when a caller hurries, when the queue closes,
// and when the window passes.
func TestBatch(t *testing.T) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for _, tt := range []struct {
		name       string
		queued     int
		hurry      bool
		close      bool
		max        int
		want       int
		wantClosed bool
	}{
		{"full", 10, false, false, 4, 4, false},
		{"hurried", 2, true, false, 100, 3, false},
		{"closed", 2, false, true, 100, 3, true},
		{"window", 2, false, false, 100, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := make(chan int, 16)
			for i := range tt.queued {
				q <- i + 1
			}
			hurry := make(chan struct{}, 1)
			if tt.hurry {
				hurry <- struct{}{}
			}
			if tt.close {
				close(q)
			}
			batch, closed := Batch(0, q, hurry, timer, 10*time.Millisecond, tt.max)
			if len(batch) != tt.want || closed != tt.wantClosed || batch[0] != 0 {
				t.Errorf("batch %v closed %v, want %d writes closed %v", batch, closed, tt.want, tt.wantClosed)
			}
		})
	}
}
