package daemon

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/kafkaconn"
	"github.com/streamidx/streamidx/internal/lineage"
)

// Dead-letter record headers.
const (
	// HeaderError holds why the record went to the dead-letter topic.
	HeaderError = "streamidx-error"
	// HeaderSource holds topic/partition/offset of the original record
	// (Kafka topic names cannot hold "/").
	HeaderSource = "streamidx-source"
	// HeaderSourceTopic, HeaderSourcePartition and HeaderSourceOffset hold
	// the same origin one part each, for consumers that route on them.
	HeaderSourceTopic     = "streamidx-source-topic"
	HeaderSourcePartition = "streamidx-source-partition"
	HeaderSourceOffset    = "streamidx-source-offset"
)

// deadLetterHeaders are the headers of the dead-letter record of r: why it
// went there, and where it was read.
func deadLetterHeaders(r *kgo.Record, reason string) []kgo.RecordHeader {
	return []kgo.RecordHeader{
		{Key: HeaderError, Value: []byte(reason)},
		{Key: HeaderSource, Value: fmt.Appendf(nil, "%s/%d/%d", r.Topic, r.Partition, r.Offset)},
		{Key: HeaderSourceTopic, Value: []byte(r.Topic)},
		{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
	}
}

// consumer reads the commit topic in a consumer group (processes sharing
// the group share its partitions). It never waits for index work: each
// record goes into the ledger, which wakes the table's workers and commits
// offsets as notifications are covered.
type consumer struct {
	d          *Daemon
	client     *kgo.Client
	deadLetter string
	timeout    time.Duration
	closeOnce  sync.Once
}

func newConsumer(d *Daemon) (*consumer, error) {
	k := d.cfg.Run.Kafka
	c := &consumer{d: d, deadLetter: k.DeadLetterTopic, timeout: time.Duration(k.NotificationTimeout)}
	if c.deadLetter == "" {
		c.deadLetter = k.CommitTopic + ".dlq"
	}
	conn, err := kafkaconn.Options(k, d.log)
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(append(conn,
		kgo.ConsumerGroup(k.Group),
		kgo.ConsumeTopics(k.CommitTopic),
		// A partition added to the topic joins the group's assignment at
		// the next metadata refresh.
		kgo.MetadataMaxAge(time.Duration(k.MetadataMaxAge)), kgo.MetadataMinAge(min(time.Duration(k.MetadataMaxAge), 5*time.Second)),
		kgo.AutoCommitMarks(),
		kgo.AllowAutoTopicCreation(),
		// Before a partition goes to another process, commit what is done
		// and forget the rest: the new owner reads it again.
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
			if err := cl.CommitMarkedOffsets(ctx); err != nil {
				d.log.Warn("commit notification offsets at a rebalance", "err", err)
			}
			d.ledger.drop(revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) { d.ledger.drop(lost) }),
	)...)
	if err != nil {
		return nil, fmt.Errorf("connect to kafka %v: %w", k.Brokers, err)
	}
	c.client = client
	return c, nil
}

// run consumes until ctx ends, and sweeps the ledger meanwhile.
func (c *consumer) run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { c.sweepLoop(ctx) })
	wg.Go(func() { kafkaconn.CheckBrokers(ctx, c.client, c.d.log, "commit notifications") })
	defer wg.Wait()
	for {
		fetches := c.client.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) {
				return
			}
			c.d.log.Warn("fetching commit notifications failed; retrying", "topic", topic, "partition", p, "err", err)
			fetchErr = err
		})
		records := 0
		fetches.EachRecord(func(r *kgo.Record) {
			records++
			c.read(r)
		})
		if fetchErr != nil && records == 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// read records one record of the commit topic in the ledger.
func (c *consumer) read(r *kgo.Record) {
	if c.d.cfg.Run.Kafka.CommitFormat == "kafka-connect" {
		c.readControl(r)
		return
	}
	n, err := ingest.DecodeNotification(r.Value)
	if err != nil {
		c.d.metrics.decodeErrors.Inc()
		c.d.log.Warn("undecodable commit notification sent to the dead-letter topic",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
	} else {
		c.d.metrics.notifications.Inc()
		n.Topic, n.Partition, n.Offset = r.Topic, r.Partition, r.Offset
	}
	wake, dl := c.d.ledger.add(r, n, err, c.d.now())
	for _, w := range wake {
		w.poke()
	}
	if dl != nil {
		c.send(dl)
	}
	c.d.metrics.pending.Set(float64(c.d.ledger.pending()))
}

// sweepEvery is how often waiting notifications are looked at: timeouts,
// dead-letter records to retry, and workers to wake again.
func (c *consumer) sweepEvery() time.Duration {
	return min(max(c.timeout/20, 10*time.Millisecond), time.Second)
}

func (c *consumer) sweepLoop(ctx context.Context) {
	tick := time.NewTicker(c.sweepEvery())
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.sweep(ctx)
		}
	}
}

// sweep sends the notifications that waited too long to the dead-letter
// topic, retries dead-letter records that failed, and wakes the workers
// whose index does not cover a waiting notification yet: its snapshot may
// have reached the catalog after it.
func (c *consumer) sweep(ctx context.Context) {
	for name, notes := range c.d.ledger.expired(c.d.now(), c.timeout) {
		ws := c.d.byTable[name]
		tbl, err := c.d.tables.LoadTable(ctx, ws[0].id)
		if err != nil {
			c.d.log.Warn("check waiting notifications: load table", "table", name, "err", err)
			continue
		}
		for _, nt := range notes {
			reason := c.neverCovered(tbl, nt.n)
			if reason == "" || !c.d.ledger.deadLetter(nt, reason) {
				continue
			}
			c.d.metrics.notificationTimeouts.Inc()
			c.d.log.Warn("commit notification sent to the dead-letter topic", "topic", nt.rec.Topic, "partition", nt.rec.Partition,
				"offset", nt.rec.Offset, "reason", reason)
			c.send(nt)
		}
	}
	for _, id := range c.d.ledger.expireCommits(c.d.now(), c.timeout) {
		c.d.log.Warn("Kafka Connect commit did not complete in time; its DATA_COMPLETE events no longer hold the control topic",
			"commit_id", id, "timeout", c.timeout)
	}
	for _, nt := range c.d.ledger.unsent() {
		c.send(nt)
	}
	for w := range c.d.ledger.lagging() {
		w.poke()
	}
	c.d.metrics.pending.Set(float64(c.d.ledger.pending()))
}

// neverCovered says why no index will ever cover n's snapshot, or "" when
// the snapshot is in the table's current history (an index is still on its
// way to it, and it keeps waiting).
func (c *consumer) neverCovered(tbl *table.Table, n ingest.Notification) string {
	if tbl.SnapshotByID(n.SnapshotID) == nil {
		return fmt.Sprintf("snapshot %d of table %s did not appear in the catalog within %s of its notification (run.kafka.notification-timeout)",
			n.SnapshotID, n.Table, c.timeout)
	}
	if head := tbl.CurrentSnapshot(); head == nil || !lineage.IsAncestor(tbl, head.SnapshotID, n.SnapshotID) {
		return fmt.Sprintf("snapshot %d of table %s is not in the table's current history within %s of its notification (rolled back, or on another branch)",
			n.SnapshotID, n.Table, c.timeout)
	}
	return ""
}

// send produces nt's dead-letter record; the note is done once the broker
// has it, and tried again at the next sweep if it fails.
func (c *consumer) send(nt *note) {
	r := nt.rec
	dl := &kgo.Record{Topic: c.deadLetter, Key: r.Key, Value: r.Value, Headers: deadLetterHeaders(r, nt.reason)}
	c.client.Produce(context.Background(), dl, func(_ *kgo.Record, err error) {
		if err != nil {
			c.d.log.Warn("write to the dead-letter topic failed; retrying", "topic", c.deadLetter, "err", err)
		}
		c.d.ledger.sent(nt, err)
	})
}

// close waits for dead-letter records in flight, commits the offsets of
// what is done and leaves the group. It is idempotent.
func (c *consumer) close() {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := c.client.Flush(ctx); err != nil {
			c.d.log.Warn("dead-letter records not written before shutdown; their notifications are read again at the next start", "err", err)
		}
		if err := c.client.CommitMarkedOffsets(ctx); err != nil {
			c.d.log.Warn("commit notification offsets at shutdown; read again at the next start", "err", err)
		}
		c.client.Close()
	})
}
