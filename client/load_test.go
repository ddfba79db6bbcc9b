package client

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// A stall of the service shows in a fixed-rate run's latencies: every
// call due while it lasted waits for it and counts its wait. A closed
// loop hides it: its clients ask nothing while they wait, so one slow
// answer is one slow call.
func TestRunLoadRateCountsStalledCalls(t *testing.T) {
	stall := func() func(context.Context, int, int) error {
		var n atomic.Int64
		return func(ctx context.Context, _, _ int) error {
			if n.Add(1) == 5 {
				time.Sleep(600 * time.Millisecond) // the stall: one call takes 600 ms
			}
			return nil
		}
	}
	open := RunLoadRate(context.Background(), 1, time.Second, 100, stall())
	// About 100 calls due in the second; the ~60 due during the stall
	// start late and count from when they were due.
	if open.Lookups < 80 || open.Lookups > 101 {
		t.Errorf("fixed rate of 100/s for 1 s: %d calls, want about 100", open.Lookups)
	}
	if open.Late < 40 {
		t.Errorf("%d calls started late, want the ~60 due during the 600 ms stall", open.Late)
	}
	if open.P50 < 10*time.Millisecond || open.P99 < 500*time.Millisecond {
		t.Errorf("fixed rate: p50 %s, p99 %s: want the stall in both (more than half the calls waited for it)", open.P50, open.P99)
	}
	closed := RunLoad(context.Background(), 1, 500*time.Millisecond, stall())
	if closed.Rate != 0 || closed.Late != 0 || closed.P50 > 10*time.Millisecond {
		t.Errorf("closed loop: rate %g, late %d, p50 %s: want the one stalled call alone slow", closed.Rate, closed.Late, closed.P50)
	}
}
