// Package pace lets the short index updates of a process run ahead of its
// long ones.
//
// The indexes of one table are updated by one process at the same time, on
// the same cores: a primary-key index whose update rewrites one range file
// beside a bucketed index whose every update rewrites all of its files. Go's
// scheduler has no priorities, so while both run, the short update gets
// half the cores and shares the collector with the long one, and its
// freshness follows the long one's. A Gate gives the processor back to
// short work the way a multi-level feedback queue does: every update starts
// short; one that has run longer than the gate's threshold becomes long,
// and from then on, at the checkpoints of its loops (Job.Yield), it waits
// while a short update runs. A long update never waits longer in all than
// it has run (it keeps at least half of its time), so a stream of short
// updates slows it down but cannot stop it.
//
// Concurrency: a Gate and its Jobs are safe for use by several goroutines;
// the parts of one merge share its Job.
package pace

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLongAfter is the time after which an update counts as long.
const DefaultLongAfter = 500 * time.Millisecond

// maxWait bounds one wait of a long job: a short update that takes longer
// than this is not short.
const maxWait = time.Second

// Gate orders the updates of one process. The zero value is not usable;
// a nil *Gate is: its jobs never wait.
type Gate struct {
	longAfter time.Duration
	now       func() time.Time

	short atomic.Int64 // jobs still short
	mu    sync.Mutex
	clear chan struct{} // closed when short drops to 0; nil while it is 0

	waits  atomic.Int64
	waited atomic.Int64 // nanoseconds
}

// NewGate returns a gate whose jobs become long after longAfter
// (DefaultLongAfter when not positive).
func NewGate(longAfter time.Duration) *Gate {
	if longAfter <= 0 {
		longAfter = DefaultLongAfter
	}
	return &Gate{longAfter: longAfter, now: time.Now}
}

// Waited reports how many times long jobs waited for short ones and how
// long in all.
func (g *Gate) Waited() (waits int64, total time.Duration) {
	if g == nil {
		return 0, 0
	}
	return g.waits.Load(), time.Duration(g.waited.Load())
}

// Job is one update under a gate. A nil *Job never waits.
type Job struct {
	g     *Gate
	began time.Time

	mu     sync.Mutex
	short  bool
	done   bool
	waited time.Duration
}

// Start begins a job, short until it has run the gate's threshold. The
// caller must call Done.
func (g *Gate) Start() *Job {
	if g == nil {
		return nil
	}
	g.enter()
	return &Job{g: g, began: g.now(), short: true}
}

// Done ends j. It may be called more than once.
func (j *Job) Done() {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.short {
		j.g.leave()
		j.short = false
	}
	j.done = true
}

// Yield is a checkpoint of j's work: a job that has run longer than the
// gate's threshold waits there while a short job runs, until none does,
// for at most a second at a time and never longer in all than it has run.
// It returns ctx's error if ctx ends while it waits.
func (j *Job) Yield(ctx context.Context) error {
	if j == nil {
		return nil
	}
	g := j.g
	j.mu.Lock()
	now := g.now()
	// A short job never waits; one that becomes long here waits from its
	// next checkpoint on.
	wasShort, done := j.short, j.done
	if j.short && now.Sub(j.began) >= g.longAfter {
		j.short = false
		g.leave()
	}
	budget := min(now.Sub(j.began)-2*j.waited, maxWait)
	j.mu.Unlock()
	if wasShort || done || budget <= 0 || g.short.Load() == 0 {
		return nil
	}
	clear := g.clearChan()
	if clear == nil {
		return nil
	}
	t := time.NewTimer(budget)
	defer t.Stop()
	select {
	case <-clear:
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	d := g.now().Sub(now)
	j.mu.Lock()
	j.waited += d
	j.mu.Unlock()
	g.waits.Add(1)
	g.waited.Add(int64(d))
	return nil
}

// Waited reports how long j waited for short jobs in all.
func (j *Job) Waited() time.Duration {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.waited
}

// Short reports whether j still counts as short.
func (j *Job) Short() bool {
	if j == nil {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.short
}

func (g *Gate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.short.Add(1) == 1 {
		g.clear = make(chan struct{})
	}
}

func (g *Gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.short.Add(-1) == 0 {
		close(g.clear)
		g.clear = nil
	}
}

// clearChan returns the channel closed when no short job runs, nil if none
// runs now.
func (g *Gate) clearChan() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.clear
}
