package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// catchUp tells when the commit topic has been read up to the end it had
// when the daemon started. An events-fed index takes its position in the
// change feed from the commit notification of the snapshot it is built at;
// were its first update to run before the notifications already in the
// topic were read, it would be built without a position and need a second
// full build at the next notified snapshot. So the indexes of tables with
// change topics wait for done (at most run.kafka.catch-up-timeout) before
// their first update.
//
// Only the partitions assigned to this process count: in a group shared by
// several daemons, the others read the rest. A partition revoked before it
// was read to its end stops counting.
type catchUp struct {
	done     chan struct{} // closed once caught up, or at the timeout
	once     sync.Once
	assigned chan struct{} // closed at the first assignment
	assign1  sync.Once

	mu    sync.Mutex
	mine  map[int32]bool  // partitions of the commit topic assigned to this process
	next  map[int32]int64 // the next offset to read, per partition read so far
	need  map[int32]int64 // the end offsets at start still to reach; nil until listed
	count int             // records read before done
}

func newCatchUp() *catchUp {
	return &catchUp{done: make(chan struct{}), assigned: make(chan struct{}),
		mine: map[int32]bool{}, next: map[int32]int64{}}
}

// read notes that the record at offset of partition p was read.
func (c *catchUp) read(p int32, offset int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next[p] = max(c.next[p], offset+1)
	c.count++
	c.check()
}

// assign notes partitions assigned to this process.
func (c *catchUp) assign(ps []int32) {
	c.mu.Lock()
	for _, p := range ps {
		c.mine[p] = true
	}
	c.mu.Unlock()
	c.assign1.Do(func() { close(c.assigned) })
}

// revoke notes partitions that went to another process or were lost.
func (c *catchUp) revoke(ps []int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range ps {
		delete(c.mine, p)
	}
	c.check()
}

// check closes done when every partition of need that is still this
// process's has been read to its end offset. Call with mu held.
func (c *catchUp) check() {
	if c.need == nil {
		return
	}
	for p, end := range c.need {
		if c.mine[p] && c.next[p] < end {
			return
		}
	}
	c.finish()
}

func (c *catchUp) finish() { c.once.Do(func() { close(c.done) }) }

// run lists, once this process has partitions, the end offsets of topic
// and where group reads each partition from (its committed offset, or the
// log start without one), and keeps what lies between as need; it closes
// done at timeout whatever was read, and when ctx ends.
func (c *catchUp) run(ctx context.Context, cl *kgo.Client, topic, group string, timeout time.Duration, log *slog.Logger) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer c.finish()
	select {
	case <-c.assigned:
	case <-ctx.Done():
		c.giveUp(ctx, timeout, "no partition of the commit topic was assigned", log)
		return
	}
	adm := kadm.NewClient(cl)
	for {
		need, err := endsToReach(ctx, adm, topic, group)
		if err == nil {
			c.mu.Lock()
			c.need = need
			c.check()
			c.mu.Unlock()
			break
		}
		log.Warn("listing the commit topic's end offsets failed; retrying", "topic", topic, "err", err)
		select {
		case <-ctx.Done():
			c.giveUp(ctx, timeout, "its end offsets could not be listed", log)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
	select {
	case <-c.done:
		c.mu.Lock()
		n := c.count
		c.mu.Unlock()
		log.Info("commit topic read up to its end at start", "topic", topic, "records", n, "took", time.Since(start).Round(time.Millisecond))
	case <-ctx.Done():
		c.giveUp(ctx, timeout, "it was not read up to its end", log)
	}
}

// giveUp logs why the wait ended without catching up, unless the daemon
// is stopping.
func (c *catchUp) giveUp(ctx context.Context, timeout time.Duration, why string, log *slog.Logger) {
	if ctx.Err() == context.DeadlineExceeded {
		log.Warn(fmt.Sprintf("commit topic not caught up within run.kafka.catch-up-timeout (%s): %s; "+
			"indexes of tables with change topics start with the notifications read so far", timeout, why))
	}
}

// endsToReach lists, per partition of topic, the end offset when group
// has records before it still to read (from its committed offset, or from
// the log start without one).
func endsToReach(ctx context.Context, adm *kadm.Client, topic, group string) (map[int32]int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	need := map[int32]int64{}
	if _, ok := ends.Lookup(topic, -1); ok {
		return need, nil // no such topic yet: nothing to read
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("start offsets of %s: %w", topic, err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("offsets of group %s: %w", group, err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		from := int64(0)
		if s, ok := starts.Lookup(topic, e.Partition); ok {
			from = s.Offset
		}
		if o, ok := committed.Lookup(topic, e.Partition); ok && o.At > from {
			from = o.At
		}
		if e.Offset > from {
			need[e.Partition] = e.Offset
		}
	})
	return need, nil
}
