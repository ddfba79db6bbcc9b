package client

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LoadResult is what a load run measured.
type LoadResult struct {
	Clients  int
	Duration time.Duration // the run's wall time
	Lookups  int           // completed without error
	Errors   int
	// FirstError is the first error seen, for the report; nil without.
	FirstError error
	// P50 and P99 are the latency percentiles of the successful lookups.
	P50, P99 time.Duration
	// PerSecond is Lookups over Duration.
	PerSecond float64
	// Rate is the rate the calls were offered at (RunLoadRate); 0 for a
	// closed loop (RunLoad).
	Rate float64
	// Late counts the calls of a fixed-rate run that started after their
	// scheduled time because every client was still busy: the offered
	// rate was more than the clients and the service could keep.
	Late int
}

// RunLoad calls do from clients goroutines, each as soon as its previous
// call returned (a closed loop: the calls come as fast as they are
// answered, which saturates the machine when client and service share
// it), for duration (or until ctx ends), and measures each call's latency.
// do gets the goroutine's number and a call counter, from which it picks
// what to ask.
func RunLoad(ctx context.Context, clients int, duration time.Duration, do func(ctx context.Context, worker, call int) error) LoadResult {
	return runLoad(ctx, clients, duration, 0, do)
}

// RunLoadRate offers calls at a fixed rate per second, spread evenly over
// time, from clients goroutines, for duration (or until ctx ends): call
// i is due at start + i/rate and goes to the first free goroutine. A call
// that a goroutine takes only after it was due (every goroutine was busy
// with a slower answer) counts its latency from when it was due, so a
// stall delays every call due during it (no coordinated omission: a slow
// answer cannot hide the calls it held back); a call taken early counts
// from when its goroutine woke for it, not charging the service with the
// timer's lateness (Go's timers wake up to a millisecond late when the
// process is idle). This is how an objective "p99 under X at R calls/s"
// is read.
func RunLoadRate(ctx context.Context, clients int, duration time.Duration, rate float64, do func(ctx context.Context, worker, call int) error) LoadResult {
	return runLoad(ctx, clients, duration, rate, do)
}

func runLoad(ctx context.Context, clients int, duration time.Duration, rate float64, do func(ctx context.Context, worker, call int) error) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	res := LoadResult{Clients: clients, Rate: rate}
	began := time.Now()
	var next atomic.Int64 // the next call of a fixed-rate run
	var late atomic.Int64
	// due waits until call i is due and returns the time its latency
	// counts from (see RunLoadRate); ok is false when the run ends first.
	due := func(i int64) (time.Time, bool) {
		at := began.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		wait := time.Until(at)
		if wait <= 0 {
			if wait < -time.Millisecond {
				late.Add(1)
			}
			return at, ctx.Err() == nil
		}
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
			return time.Now(), true
		case <-ctx.Done():
			return at, false
		}
	}
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			var mine []time.Duration
			errs := 0
			var first error
			for call := 0; ctx.Err() == nil; call++ {
				t0 := time.Now()
				if rate > 0 {
					var ok bool
					if t0, ok = due(next.Add(1) - 1); !ok {
						break
					}
				}
				err := do(ctx, w, call)
				if ctx.Err() != nil {
					break // cut by the end of the run: not a measurement
				}
				if err != nil {
					errs++
					if first == nil {
						first = err
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			res.Errors += errs
			if res.FirstError == nil {
				res.FirstError = first
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Duration = time.Since(began)
	res.Lookups = len(lat)
	res.Late = int(late.Load())
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
		res.PerSecond = float64(len(lat)) / res.Duration.Seconds()
	}
	return res
}
