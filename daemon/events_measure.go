package daemon

import (
	"context"
	"errors"
	"time"
)

// FeedMeasurement is what MeasureChangeFeed saw.
type FeedMeasurement struct {
	// Events and Bytes are the change events staged and their record
	// values' size.
	Events, Bytes int64
	// Took is the time from the start of the feed until Events were
	// staged, setting up included.
	Took time.Duration
}

// MeasureChangeFeed runs the daemon's change feed alone (no workers, no
// commit-notification consumer) until it has staged at least events change
// events, and says how fast: decoding on every core and staging in Pebble,
// from the change topics as configured. The topics are filled beforehand;
// for benchmarks and streamidx bench. The daemon is not usable afterwards
// except for Close.
func (d *Daemon) MeasureChangeFeed(ctx context.Context, events int64) (FeedMeasurement, error) {
	if d.feed == nil {
		return FeedMeasurement{}, errors.New("measure the change feed: no change topic feeds an index (run.kafka.change-topics, brokers)")
	}
	d.mu.Lock()
	if d.started || d.closed {
		d.mu.Unlock()
		return FeedMeasurement{}, errors.New("measure the change feed: the daemon ran already")
	}
	d.started = true
	d.mu.Unlock()
	defer close(d.runDone)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	began := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.feed.run(ctx) }()
	defer d.feed.close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			return FeedMeasurement{Events: d.feed.staged.Load(), Bytes: d.feed.stagedBytes.Load(), Took: time.Since(began)}, err
		case <-tick.C:
			if n := d.feed.staged.Load(); n >= events {
				m := FeedMeasurement{Events: n, Bytes: d.feed.stagedBytes.Load(), Took: time.Since(began)}
				cancel()
				<-done
				return m, nil
			}
		}
	}
}
