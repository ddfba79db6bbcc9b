package client

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
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
}

// RunLoad calls do from clients goroutines, each as soon as its previous
// call returned, for duration (or until ctx ends), and measures each
// call's latency. do gets the goroutine's number and a call counter, from
// which it picks what to ask.
func RunLoad(ctx context.Context, clients int, duration time.Duration, do func(ctx context.Context, worker, call int) error) LoadResult {
	ctx, cancel := context.WithTimeout(ctx, duration)
	defer cancel()
	var mu sync.Mutex
	var lat []time.Duration
	res := LoadResult{Clients: clients}
	began := time.Now()
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			var mine []time.Duration
			errs := 0
			var first error
			for call := 0; ctx.Err() == nil; call++ {
				t0 := time.Now()
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
	if len(lat) > 0 {
		slices.Sort(lat)
		res.P50 = lat[len(lat)*50/100]
		res.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
		res.PerSecond = float64(len(lat)) / res.Duration.Seconds()
	}
	return res
}

// LoadTest sends one-predicate lookups through c from clients concurrent
// clients for duration: each lookup takes one of wheres at random (such
// as "id = 4711" for many keys). Usable by `streamidx bench` and the
// serve-load command.
func LoadTest(ctx context.Context, c *Client, tableName, index string, wheres []string, clients int, duration time.Duration) LoadResult {
	return RunLoad(ctx, clients, duration, func(ctx context.Context, _, _ int) error {
		_, err := c.Lookup(ctx, tableName, index, Request{Where: wheres[rand.IntN(len(wheres))]})
		return err
	})
}
