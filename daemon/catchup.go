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

// catchUp tells when the change feed has read the commit topic up to the
// end it had when the feed connected. An events-fed index takes its
// position in the change feed from the commit notification of the snapshot
// it is built at; were its first update to run before the notifications
// already in the topic were read, it would be built without a position
// (and a restart that no longer finds the notification would build it
// again). So the indexes of tables with change topics wait for done, at
// most run.kafka.catch-up-timeout, before their first update.
type catchUp struct {
	done chan struct{} // closed once caught up, at the timeout, or when there is nothing to read
	once sync.Once

	mu    sync.Mutex
	need  map[int32]int64 // per partition, the end offset still to reach; nil until known
	next  map[int32]int64 // per partition, the next offset to read, as far as read
	count int             // records read before done
	began time.Time
}

func newCatchUp() *catchUp {
	return &catchUp{done: make(chan struct{}), next: map[int32]int64{}, began: time.Now()}
}

// expect sets the end offsets to reach, per partition.
func (c *catchUp) expect(need map[int32]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.need = need
	c.check()
}

// read notes that the record at offset of partition p was read. Once
// done, it costs the notifications that follow nothing more.
func (c *catchUp) read(p int32, offset int64) {
	select {
	case <-c.done:
		return
	default:
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next[p] = max(c.next[p], offset+1)
	c.count++
	c.check()
}

// check closes done when every partition has been read to its end
// offset. Call with mu held.
func (c *catchUp) check() {
	if c.need == nil {
		return
	}
	for p, end := range c.need {
		if c.next[p] < end {
			return
		}
	}
	c.finish()
}

func (c *catchUp) finish() { c.once.Do(func() { close(c.done) }) }

// bound closes done after timeout, or when ctx ends, whatever was read,
// and logs how the wait ended.
func (c *catchUp) bound(ctx context.Context, topic string, timeout time.Duration, log *slog.Logger) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.done:
		c.mu.Lock()
		n, known, took := c.count, c.need != nil, time.Since(c.began)
		c.mu.Unlock()
		if known {
			log.Info("commit topic read up to its end at start", "topic", topic, "records", n, "took", took.Round(time.Millisecond))
		}
	case <-t.C:
		log.Warn(fmt.Sprintf("commit topic %s not read up to its end within run.kafka.catch-up-timeout (%s): "+
			"events-fed indexes start with the notifications read so far", topic, timeout))
		c.finish()
	case <-ctx.Done():
		c.finish()
	}
}

// commitTopicEnds lists, per partition of topic, its end offset when it
// holds records from start (where the feed reads it from) on.
func commitTopicEnds(ctx context.Context, cl *kgo.Client, topic string, start map[int32]kgo.Offset) (map[int32]int64, error) {
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %s: %w", topic, err)
	}
	firsts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = firsts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("list the start offsets of %s: %w", topic, err)
	}
	need := map[int32]int64{}
	for p, from := range start {
		end, ok := ends.Lookup(topic, p)
		if !ok {
			continue
		}
		at := from.EpochOffset().Offset // the group's committed offset, or negative: the log start
		if first, ok := firsts.Lookup(topic, p); ok && first.Offset > at {
			at = first.Offset
		}
		if end.Offset > at {
			need[p] = end.Offset
		}
	}
	return need, nil
}
