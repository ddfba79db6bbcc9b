package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/internal/testtables"
)

// TestBogusNotificationHoldsNothing: a notification for a snapshot that never
// reaches the catalog neither stalls the records after it, on its partition
// or another, nor is claimed by an index snapshot; after the bounded wait it
// goes to the dead-letter topic with the reason; a restart while it waits
// reads it again without blocking anything, and once dead-lettered it is
// never read again.
func TestBogusNotificationHoldsNothing(t *testing.T) {
	h := newHarness(t, 2, "pk")
	clock := newFakeClock()
	useClock := func(d *Daemon) { d.now = clock.Now }
	d := h.start(useClock)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID) // the first build, at start

	// notes maps "topic/partition/offset" to the snapshot notified there.
	notes := map[string]int64{}
	notify := func(s *table.Snapshot, partition int32) {
		off := h.notify(s.SnapshotID, s.SequenceNumber, partition)
		notes[fmt.Sprintf("%s/%d/%d", commitTopic, partition, off)] = s.SnapshotID
	}
	const bogus = 4242
	bogusOffset := h.notify(bogus, 99, 0)
	if bogusOffset != 0 {
		t.Fatalf("the bogus notification is at offset %d of partition 0, want 0", bogusOffset)
	}
	s1 := h.commit(50)
	notify(s1, 0) // after the bogus one, on its partition
	s2 := h.commit(55)
	notify(s2, 1) // on another partition
	// The poll interval is an hour: only the notifications move the index.
	h.waitIndexed("pk", s2.SnapshotID)
	if got := len(h.snapshots("pk")); got != 3 {
		t.Errorf("pk has %d snapshots, want 3 (build, s1, s2)", got)
	}
	// The bookkeeping holds partition 0 at the bogus notification (nothing
	// committed there) while partition 1 moves on.
	waitFor(t, "partition 1's offset is committed", func() bool { return h.committed(1) == 1 })
	if got := h.committed(0); got > bogusOffset {
		t.Errorf("partition 0 committed up to %d while the notification at %d waits", got, bogusOffset)
	}
	if dl := h.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead-letter records before the notification timed out", len(dl))
	}

	// A restart while the bogus notification waits: it and the one behind
	// it are read again; nothing blocks and no index snapshot claims them.
	d.stop(t)
	clock = newFakeClock()
	d = h.start(useClock)
	s3 := h.commit(60)
	notify(s3, 0)
	h.waitIndexed("pk", s3.SnapshotID)
	if got := len(h.snapshots("pk")); got != 4 {
		t.Errorf("pk has %d snapshots after the restart, want 4: a notification read again made an index snapshot", got)
	}

	// Past the bounded wait the bogus notification goes to the dead-letter
	// topic with its reason and stops holding partition 0. The wait counts
	// from when the daemon read it, so the clock moves only once it has:
	// s3's index snapshot may come from the alignment at start, before the
	// consumer has read partition 0 at all.
	waitFor(t, "the bogus notification is read again after the restart", func() bool {
		_, body := d.get(t, "/metrics")
		n, err := metric(body, "streamidx_ingest_notifications_pending")
		return err == nil && n != "0"
	})
	clock.advance(time.Duration(h.cfg.Run.Kafka.NotificationTimeout) + time.Second)
	// On a timeout, the daemon's log says where the notification stood
	// (re-read after a rebalance, dead-letter record not produced, ...).
	for deadline := time.Now().Add(time.Minute); h.committed(0) != 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until partition 0's offset passes the bogus notification: committed %d, %d dead-letter records\n%s",
				h.committed(0), len(h.deadLetters()), h.logs)
		}
	}
	dl := h.deadLetters()
	if len(dl) != 1 {
		t.Fatalf("%d dead-letter records, want 1\n%s", len(dl), h.logs)
	}
	if reason := header(dl[0], HeaderError); !strings.Contains(reason, "snapshot 4242") || !strings.Contains(reason, "not in the catalog") &&
		!strings.Contains(reason, "did not appear in the catalog") {
		t.Errorf("dead-letter reason %q", reason)
	}
	if src := header(dl[0], HeaderSource); src != commitTopic+"/0/0" {
		t.Errorf("dead-letter source %q, want %s/0/0", src, commitTopic)
	}
	if topic, part, off := header(dl[0], HeaderSourceTopic), header(dl[0], HeaderSourcePartition), header(dl[0], HeaderSourceOffset); topic != commitTopic || part != "0" || off != "0" {
		t.Errorf("dead-letter origin headers topic %q partition %q offset %q, want %s, 0, 0", topic, part, off, commitTopic)
	}
	_, body := d.get(t, "/metrics")
	for sample, want := range map[string]string{
		"streamidx_ingest_notification_timeouts_total": "1",
		"streamidx_ingest_notifications_pending":       "0",
	} {
		if got, err := metric(body, sample); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s", sample, got, err, want)
		}
	}

	// Once dead-lettered, it is not read again.
	d.stop(t)
	d = h.start(useClock)
	// Nothing waits in the ledger now and the poll interval is an hour: once
	// the alignment at start is done, only s4's notification can move pk.
	waitFor(t, "/readyz after the restart", func() bool { code, _ := d.get(t, "/readyz"); return code == 200 })
	s4 := h.commit(65)
	notify(s4, 1)
	h.waitIndexed("pk", s4.SnapshotID)
	waitFor(t, "partition 1's offset is committed", func() bool { return h.committed(1) == 2 })
	if dl := h.deadLetters(); len(dl) != 1 {
		t.Errorf("%d dead-letter records after another restart, want 1", len(dl))
	}
	_, body = d.get(t, "/metrics")
	if got, err := metric(body, "streamidx_ingest_notification_timeouts_total"); err != nil || got != "0" {
		t.Errorf("after the restart streamidx_ingest_notification_timeouts_total = %q (%v), want 0", got, err)
	}

	// Every index snapshot names only a notification it covers: of its own
	// source snapshot or an ancestor, never the bogus one. While the bogus notification
	// waited, the sweep woke pk again and again, so an index snapshot for s1,
	// s2 or s3 may have been published before its notification was read and
	// then names none; s4's is published only because of its notification.
	tbl, err := h.cat.LoadTable(t.Context(), h.tbl.Identifier())
	if err != nil {
		t.Fatal(err)
	}
	namedBy := map[int64]string{}
	for _, s := range h.snapshots("pk") {
		at, ok := s.Properties[PropCommitNotification]
		if !ok {
			continue
		}
		namedBy[s.SourceTableSnapshotID] = at
		notified, known := notes[at]
		if !known {
			t.Errorf("index snapshot for %d names notification %s, which is not a real commit's", s.SourceTableSnapshotID, at)
			continue
		}
		if !lineage.IsAncestor(tbl, s.SourceTableSnapshotID, notified) {
			t.Errorf("index snapshot for %d names notification %s of snapshot %d, which it does not cover", s.SourceTableSnapshotID, at, notified)
		}
		var offsets map[string]map[string]int64
		if err := json.Unmarshal([]byte(s.Properties[PropSourceOffsets]), &offsets); err != nil {
			t.Errorf("index snapshot for %d: source offsets %q: %v", s.SourceTableSnapshotID, s.Properties[PropSourceOffsets], err)
		}
	}
	if _, ok := namedBy[s4.SnapshotID]; !ok {
		t.Errorf("the index snapshot for s4 names no notification; only its notification could have made it")
	}
	for i, s := range []*table.Snapshot{s1, s2, s3} {
		if _, ok := namedBy[s.SnapshotID]; !ok {
			t.Logf("the index snapshot for s%d was published before its notification was read", i+1)
		}
	}
	h.verifyAll("pk")
}

// TestCommitTopicPartitionAddedIsRead: a partition added to the commit
// topic while the daemon runs joins the group's assignment within
// run.kafka.metadata-max-age, and a notification there moves the index
// (Kafka's own default would leave it unread for five minutes).
func TestCommitTopicPartitionAddedIsRead(t *testing.T) {
	h := newHarness(t, 1, "pk")
	h.cfg.Run.Kafka.MetadataMaxAge = config.Duration(200 * time.Millisecond)
	h.start(nil)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID) // the first build, at start
	s1 := h.commit(50)
	h.notify(s1.SnapshotID, s1.SequenceNumber, 0)
	h.waitIndexed("pk", s1.SnapshotID)

	h.addPartitions(commitTopic, 2)
	s2 := h.commit(55)
	h.notify(s2.SnapshotID, s2.SequenceNumber, 1)
	// The poll interval is an hour: only the notification moves the index.
	h.waitIndexed("pk", s2.SnapshotID)
	waitFor(t, "the new partition's offset is committed", func() bool { return h.committed(1) == 1 })
}

// TestBogusNotificationHoldsNoOtherTable: a notification of one table
// whose snapshot never appears holds no other table's, though they share
// the commit topic's one partition: the notification after it, of another
// table, moves that table's index at once (the poll interval is an hour).
func TestBogusNotificationHoldsNoOtherTable(t *testing.T) {
	h := newHarness(t, 1, "pk")
	ctx := context.Background()
	other := testtables.CreateTable(t, h.cat, testtables.TableConfig{Name: "returns", Schema: testtables.OrdersSchema, FormatVersion: 2, RowGroupRows: 16})
	other, _ = testtables.Append(t, other, testtables.OrderRows(0, 20, 0)...)
	testtables.CreateIndexes(t, h.indexes, other, definitions["pk"])
	h.cfg.Run.Indexes = append(h.cfg.Run.Indexes, config.IndexRef{Table: "test.returns", Index: "pk"})
	indexedOther := func() int64 {
		md, _, err := h.indexes.Load(ctx, other.Identifier(), "pk")
		if err != nil {
			t.Fatal(err)
		}
		if len(md.Snapshots) == 0 {
			return 0
		}
		return md.CurrentSnapshot().SourceTableSnapshotID
	}
	h.start(nil)
	h.waitIndexed("pk", h.tbl.CurrentSnapshot().SnapshotID)
	waitFor(t, "test.returns is built at start", func() bool { return indexedOther() == other.CurrentSnapshot().SnapshotID })

	h.notify(4242, 99, 0) // test.orders, a snapshot that never appears
	other, _ = testtables.Append(t, other, testtables.OrderRows(20, 25, 1)...)
	s := other.CurrentSnapshot()
	v := fmt.Sprintf(`{"table":"test.returns","snapshot-id":%d,"sequence-number":%d}`, s.SnapshotID, s.SequenceNumber)
	if _, err := h.producer.ProduceSync(ctx, &kgo.Record{Topic: commitTopic, Partition: 0, Value: []byte(v)}).First(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "test.returns' index covers the notified snapshot", func() bool { return indexedOther() == s.SnapshotID })
	if dl := h.deadLetters(); len(dl) != 0 {
		t.Fatalf("%d dead-letter records before the bogus notification timed out", len(dl))
	}
}
