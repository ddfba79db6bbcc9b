package daemon

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamidx/streamidx/internal/config"
	"github.com/streamidx/streamidx/internal/testtables"
	"github.com/streamidx/streamidx/updater"
)

const changeTopic = "orders-cdc"

// changeFeed writes a change topic as a CDC source does, keyed by row id,
// and knows the offset each partition will give the next record.
type eventWriter struct {
	h     *harness
	topic string
	next  []int64 // next offset by partition
}

// newEventWriter creates the change topic with partitions partitions and
// binds it to test.orders in the daemon's configuration.
func newEventWriter(h *harness, partitions int) *eventWriter {
	h.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = changeTopic, int32(partitions), 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), h.producer)
	if err != nil || resp.Topics[0].ErrorCode != 0 {
		h.t.Fatalf("create %s: %v %+v", changeTopic, err, resp)
	}
	h.cfg.Run.Kafka.ChangeTopics = []string{changeTopic + "=test.orders"}
	return &eventWriter{h: h, topic: changeTopic, next: make([]int64, partitions)}
}

func (w *eventWriter) partition(id int64) int32 { return int32(id % int64(len(w.next))) }

// write produces events, checking that each lands where expected.
func (w *eventWriter) write(events []testtables.CDCEvent) {
	w.h.t.Helper()
	for _, ev := range events {
		p := w.partition(ev.ID)
		r, err := w.h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: w.topic, Partition: p, Key: ev.Key, Value: ev.Value}).First()
		if err != nil {
			w.h.t.Fatal(err)
		}
		if r.Offset != w.next[p] {
			w.h.t.Fatalf("event landed at %s/%d/%d, want offset %d", w.topic, p, r.Offset, w.next[p])
		}
		w.next[p]++
	}
}

// writeRaw produces one record on partition p as it is.
func (w *eventWriter) writeRaw(p int32, value []byte) {
	w.h.t.Helper()
	if err := w.h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: w.topic, Partition: p, Value: value}).FirstErr(); err != nil {
		w.h.t.Fatal(err)
	}
	w.next[p]++
}

// offsetsAfter is the "offsets" of a commit notification once events are
// written: per partition the next offset.
func (w *eventWriter) offsetsAfter(events []testtables.CDCEvent) string {
	next := append([]int64{}, w.next...)
	for _, ev := range events {
		next[w.partition(ev.ID)]++
	}
	var parts []string
	for p, off := range next {
		parts = append(parts, fmt.Sprintf("%q:%d", strconv.Itoa(p), off))
	}
	return fmt.Sprintf(`{%q:{%s}}`, w.topic, strings.Join(parts, ","))
}

// notifyWith produces the native notification of snap with offsets.
func (h *harness) notifyWith(snap *table.Snapshot, offsets string) {
	h.t.Helper()
	h.notifyOn(0, snap, offsets)
}

// notifyOn produces the native notification of snap with offsets on
// partition p of the commit topic.
func (h *harness) notifyOn(p int32, snap *table.Snapshot, offsets string) {
	h.t.Helper()
	v := fmt.Sprintf(`{"table":"test.orders","snapshot-id":%d,"sequence-number":%d,"offsets":%s}`, snap.SnapshotID, snap.SequenceNumber, offsets)
	if err := h.producer.ProduceSync(context.Background(), &kgo.Record{Topic: commitTopic, Partition: p, Value: []byte(v)}).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
}

// addPartitions raises the partitions of topic to total.
func (h *harness) addPartitions(topic string, total int32) {
	h.t.Helper()
	req := kmsg.NewPtrCreatePartitionsRequest()
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = topic, total
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(context.Background(), h.producer)
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		h.t.Fatalf("add partitions to %s: %v %+v", topic, err, resp)
	}
	// A client produces only to the partitions its metadata knows.
	producer, err := kgo.NewClient(kgo.SeedBrokers(h.cluster.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(producer.Close)
	h.producer = producer
}

// startCDC starts a CDC pipeline on the harness's table. JSON cannot carry
// the sign of a NaN (Debezium writes "NaN" for both), so a pipeline's table
// never holds a negative NaN: the fixture rows that do are deleted first.
func startCDC(h *harness, seed uint64) *testtables.CDC {
	h.t.Helper()
	var keep [][]any
	var drop [][]any
	for _, row := range testtables.OrderRows(0, 50, 0) {
		if f, ok := row[3].(float64); ok && math.IsNaN(f) && math.Signbit(f) {
			drop = append(drop, []any{row[0]})
			continue
		}
		keep = append(keep, row)
	}
	h.tbl = testtables.AddEqualityDeletes(h.t, h.tbl, []int{1}, drop...)
	return testtables.NewCDC(seed, "test.orders", keep)
}

// checkOnePerSnapshot checks that index has one snapshot for every source
// snapshot from the first it indexed to the table's current one, in order.
func (h *harness) checkOnePerSnapshot(index string) {
	h.t.Helper()
	var all []int64
	for _, s := range h.tbl.Metadata().Snapshots() {
		all = append(all, s.SnapshotID)
	}
	snaps := h.snapshots(index)
	first := -1
	for i, id := range all {
		if id == snaps[0].SourceTableSnapshotID {
			first = i
		}
	}
	if first < 0 || len(all)-first != len(snaps) {
		h.t.Fatalf("index %s has %d snapshots for %d source snapshots from its first", index, len(snaps), len(all)-first)
	}
	for i, s := range snaps {
		if s.SourceTableSnapshotID != all[first+i] {
			h.t.Errorf("index %s snapshot %d is for source %d, want %d", index, i, s.SourceTableSnapshotID, all[first+i])
		}
	}
}

// TestEventsFedIndexFollowsTheTable: two events-fed indexes stay exactly
// equal to their table (every index snapshot verifies) across 30 commits of
// inserts, updates that move rows to other clustering keys, deletes and
// tombstones, written by a CDC pipeline as Debezium envelopes with and
// without schema and as native events, with commit notifications that
// carry the offsets. Events arrive before their notification and after it.
// The table is read once, for the first build: no other full build and no
// equality delete resolved by reading data files.
func TestEventsFedIndexFollowsTheTable(t *testing.T) {
	h := newHarness(t, 1, "ev_customer", "ev_name")
	w := newEventWriter(h, 2)
	cdc := startCDC(h, 7)
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil)) // the initial rows came before any event
	d := h.start(nil)
	r := rand.New(rand.NewPCG(1, 2))
	forms := []testtables.EventForm{testtables.Debezium, testtables.DebeziumSchema, testtables.Native}
	var held func() // a notification held back until the next commit's events are written
	for i := range 30 {
		var events []testtables.CDCEvent
		h.tbl, events = cdc.Commit(t, h.tbl, 1+r.IntN(8), forms[i%3])
		snap := h.tbl.CurrentSnapshot()
		offsets := w.offsetsAfter(events)
		switch i % 3 {
		case 0: // events, then the notification
			w.write(events)
			if held != nil {
				// The previous commit's notification, after this
				// commit's events but before its notification: a
				// notification arriving after the next one's would let
				// one index snapshot cover both commits.
				held()
				held = nil
			}
			h.notifyWith(snap, offsets)
		case 1: // the notification first: it waits for its events
			h.notifyWith(snap, offsets)
			w.write(events)
		case 2: // the events of the next commit come before this notification
			w.write(events)
			held = func() { h.notifyWith(snap, offsets) }
		}
	}
	if held != nil {
		held()
	}
	last := h.tbl.CurrentSnapshot().SnapshotID
	for _, index := range []string{"ev_customer", "ev_name"} {
		h.waitIndexed(index, last)
		h.verifyAll(index)
		h.checkOnePerSnapshot(index)
	}
	_, body := d.get(t, "/metrics")
	for sample, want := range map[string]string{
		`streamidx_compactor_full_builds_total{index="ev_customer",table="test.orders"}`:                  "1",
		`streamidx_compactor_full_builds_total{index="ev_name",table="test.orders"}`:                      "1",
		`streamidx_ingest_equality_delete_slow_path_files_total{index="ev_customer",table="test.orders"}`: "0",
		`streamidx_ingest_events_dead_lettered_total`:                                                     "0",
	} {
		if got, err := metric(body, sample); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s\n%s", sample, got, err, want, grepLines(h.logs.String(), "table"))
		}
	}
	if got, _ := metric(body, "streamidx_ingest_event_tombstones_total"); got == "0" || got == "" {
		t.Errorf("no tombstone counted: %q", got)
	}
}

// TestPartitionsAddedWhileRunningAreRead: partitions added to the change
// topic and to the commit topic while the daemon runs are read from their
// start within run.kafka.metadata-max-age, without a restart: a commit
// whose events are spread over the new partitions, notified on a new
// partition of the commit topic, is indexed exactly.
func TestPartitionsAddedWhileRunningAreRead(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	w := newEventWriter(h, 1)
	cdc := startCDC(h, 11)
	h.cfg.Run.Kafka.MetadataMaxAge = config.Duration(200 * time.Millisecond)
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil))
	h.start(nil)
	var events []testtables.CDCEvent
	h.tbl, events = cdc.Commit(t, h.tbl, 6, testtables.Debezium)
	offsets := w.offsetsAfter(events)
	w.write(events)
	h.notifyWith(h.tbl.CurrentSnapshot(), offsets)
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)

	h.addPartitions(changeTopic, 3)
	h.addPartitions(commitTopic, 2)
	w.next = append(w.next, 0, 0)
	for range 3 {
		h.tbl, events = cdc.Commit(t, h.tbl, 12, testtables.Native)
		offsets = w.offsetsAfter(events)
		w.write(events)
		h.notifyOn(1, h.tbl.CurrentSnapshot(), offsets)
	}
	for p := int32(1); p < 3; p++ {
		if w.next[p] == 0 {
			t.Fatalf("no event landed on new partition %d: the test shows nothing", p)
		}
	}
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	h.verifyAll("ev_customer")
	for _, want := range []string{"topic=" + changeTopic + " partition=1", "topic=" + changeTopic + " partition=2", "topic=" + commitTopic + " partition=1"} {
		if !strings.Contains(grepLines(h.logs.String(), "partition added"), want) {
			t.Errorf("no log of reading the added partition %s:\n%s", want, grepLines(h.logs.String(), "partition"))
		}
	}
}

// TestMalformedEventsGoToDeadLetters: records that cannot be decoded or do
// not fit the table, in the middle of a commit's events, go to the change
// topic's dead-letter topic with the reason and their origin, are counted,
// and every event after them is indexed.
func TestMalformedEventsGoToDeadLetters(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	w := newEventWriter(h, 1)
	cdc := startCDC(h, 3)
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil))
	d := h.start(nil)
	var events []testtables.CDCEvent
	h.tbl, events = cdc.Commit(t, h.tbl, 12, testtables.Debezium)
	half := len(events) / 2
	w.write(events[:half])
	bad := []struct{ value, reason string }{
		{`{"before":null,"after":{"id":900,`, "malformed JSON"},
		{`{"op":"c","after":{"id":901,"customer_id":1,"name":"x","score":1,"ts":1,"amount":"AA==","colour":"red"}}`, "column not in the table schema: colour"},
		{`{"op":"u","before":{"id":3},"after":{"id":3,"customer_id":1,"name":"x","score":1,"ts":1,"amount":"AA=="}}`, "before image"},
		{`{"op":"t","source":{"table":"orders"}}`, "truncate"},
		// Native events for another table on a topic bound to test.orders,
		// whether or not their rows would fit it.
		{`{"op":"upsert","table":"test.other","row":{"id":902,"customer_id":1,"name":"x","score":1,"ts":1,"amount":"0.00"}}`,
			"native event for table test.other on change topic " + changeTopic + ", which feeds test.orders"},
		{`{"op":"upsert","table":"test.other","row":{"sku":"a"}}`, "native event for table test.other on change topic"},
	}
	for _, b := range bad {
		w.writeRaw(0, []byte(b.value))
	}
	w.write(events[half:])
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil))
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	h.verifyAll("ev_customer")

	dl := h.deadLettersOf(changeTopic + ".dlq")
	if len(dl) != len(bad) {
		t.Fatalf("%d dead letters, want %d", len(dl), len(bad))
	}
	for i, r := range dl {
		reason, source := header(r, HeaderError), header(r, HeaderSource)
		if !strings.Contains(reason, bad[i].reason) {
			t.Errorf("dead letter %d: reason %q, want it to say %q", i, reason, bad[i].reason)
		}
		if want := fmt.Sprintf("%s/0/%d", changeTopic, half+i); source != want || string(r.Value) != bad[i].value {
			t.Errorf("dead letter %d: source %q value %q, want %s and the record as it was", i, source, r.Value, want)
		}
		if topic, part, off := header(r, HeaderSourceTopic), header(r, HeaderSourcePartition), header(r, HeaderSourceOffset); topic != changeTopic ||
			part != "0" || off != strconv.Itoa(half+i) {
			t.Errorf("dead letter %d: origin headers topic %q partition %q offset %q, want %s, 0, %d", i, topic, part, off, changeTopic, half+i)
		}
	}
	_, body := d.get(t, "/metrics")
	if got, _ := metric(body, "streamidx_ingest_events_dead_lettered_total"); got != strconv.Itoa(len(bad)) {
		t.Errorf("dead-lettered count %q, want %d", got, len(bad))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && !strings.Contains(l, "level=DEBUG") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestEventsFedIndexReadsTheCommitTopicBeforeItsFirstBuild: notifications
// already in the commit topic when the daemon starts are read before an
// events-fed index is first built, however slowly the consumer reads them,
// so that the build has a position in the change feed: the commits after
// it are indexed from their events, without a second full build.
func TestEventsFedIndexReadsTheCommitTopicBeforeItsFirstBuild(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	w := newEventWriter(h, 1)
	cdc := startCDC(h, 5)
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil))
	commit := func() {
		var events []testtables.CDCEvent
		h.tbl, events = cdc.Commit(t, h.tbl, 4, testtables.Debezium)
		offsets := w.offsetsAfter(events)
		w.write(events)
		h.notifyWith(h.tbl.CurrentSnapshot(), offsets)
	}
	commit()
	commit()
	d := h.start(func(d *Daemon) {
		d.beforeNote = func(*kgo.Record) { time.Sleep(300 * time.Millisecond) } // a slow read of the commit topic
	})
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	if props := h.snapshots("ev_customer")[0].Properties; props[updater.PropEventOffsets] == "" {
		t.Errorf("the first index snapshot has no position in the change feed: %v\n%s", props, grepLines(h.logs.String(), "commit topic"))
	}
	commit()
	commit()
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	h.verifyAll("ev_customer")
	h.checkOnePerSnapshot("ev_customer")
	_, body := d.get(t, "/metrics")
	sample := `streamidx_compactor_full_builds_total{index="ev_customer",table="test.orders"}`
	if got, err := metric(body, sample); err != nil || got != "1" {
		t.Errorf("%s = %q (%v), want 1\n%s", sample, got, err, grepLines(h.logs.String(), "table"))
	}
	if !strings.Contains(h.logs.String(), "commit topic read up to its end at start") {
		t.Errorf("no log of the catch-up:\n%s", h.logs.String())
	}
}

// TestEventsFedIndexWithoutPositionKeepsEverySnapshot: an events-fed index
// built before any notification was sent (so without a position in the
// change feed) that is two notified commits behind when it next updates
// takes its position at the first of them, so that policy every still
// gives each commit its own index snapshot.
func TestEventsFedIndexWithoutPositionKeepsEverySnapshot(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	w := newEventWriter(h, 1)
	cdc := startCDC(h, 9)
	hold := make(chan struct{})
	var holding atomic.Bool
	d := h.start(func(d *Daemon) {
		d.beforeStep = func(*worker) {
			if holding.Load() {
				<-hold
			}
		}
	})
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	if props := h.snapshots("ev_customer")[0].Properties; props[updater.PropEventOffsets] != "" {
		t.Fatalf("the first index snapshot has a position although no notification was sent: %v", props)
	}
	holding.Store(true)
	for range 2 {
		var events []testtables.CDCEvent
		h.tbl, events = cdc.Commit(t, h.tbl, 4, testtables.Native)
		offsets := w.offsetsAfter(events)
		w.write(events)
		h.notifyWith(h.tbl.CurrentSnapshot(), offsets)
	}
	// Both notifications read before the index's next update.
	feed := &tableFeed{table: "test.orders", ledger: d.ledger, notes: d.feed.notes}
	last := h.tbl.CurrentSnapshot().SnapshotID
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, ok := feed.CommitOffsets(last); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not read the notification of the last commit")
		}
		time.Sleep(10 * time.Millisecond)
	}
	holding.Store(false)
	close(hold)
	h.waitIndexed("ev_customer", last)
	h.verifyAll("ev_customer")
	h.checkOnePerSnapshot("ev_customer")
}

// TestEventsFedIndexStartsAfterTheCatchUpTimeout: a commit topic that is
// not read to its end within run.kafka.catch-up-timeout holds the first
// build of an events-fed index no longer than that, and says so.
func TestEventsFedIndexStartsAfterTheCatchUpTimeout(t *testing.T) {
	h := newHarness(t, 1, "ev_customer")
	w := newEventWriter(h, 1)
	startCDC(h, 3)
	h.notifyWith(h.tbl.CurrentSnapshot(), w.offsetsAfter(nil))
	h.cfg.Run.Kafka.CatchUpTimeout = config.Duration(300 * time.Millisecond)
	stuck := make(chan struct{})
	h.start(func(d *Daemon) {
		d.beforeNote = func(*kgo.Record) { <-stuck } // the commit topic cannot be read
	})
	t.Cleanup(func() { close(stuck) }) // before the daemon stops
	h.waitIndexed("ev_customer", h.tbl.CurrentSnapshot().SnapshotID)
	logs := h.logs.String()
	warned, built := strings.Index(logs, "not read up to its end within run.kafka.catch-up-timeout"), strings.Index(logs, "index snapshot published")
	if warned < 0 || built < warned {
		t.Errorf("want the warning of the timeout, then the first build:\n%s", logs)
	}
}
