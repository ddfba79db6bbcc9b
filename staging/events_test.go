package staging

import (
	"fmt"
	"testing"
)

func eventsOf(t *testing.T, s *Store, index string, tp TopicPartition, from, to int64) []staged {
	t.Helper()
	var out []staged
	if err := s.IterateEvents(index, tp, from, to, func(k, v []byte, c int) error {
		out = append(out, staged{string(k), string(v), c})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestEventStaging: events are read back by offset range per partition and
// index, staging one again replaces it, ranges survive a reopen with the
// events they cover, and a trim removes only what is below its offset.
func TestEventStaging(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p0, p1 := TopicPartition{"cdc", 0}, TopicPartition{"cdc", 1}
	b := s.NewEventBatch()
	for off := int64(0); off < 10; off++ {
		for _, idx := range []string{"t/pk", "t/pk2"} {
			if err := b.Add(idx, p0, off, 0, []byte(fmt.Sprintf("k%d", off)), []byte("v"), 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	// An update at offset 3 of partition 1: removal and addition.
	if err := b.Add("t/pk", p1, 3, 0, []byte("old"), []byte("v"), -1); err != nil {
		t.Fatal(err)
	}
	if err := b.Add("t/pk", p1, 3, 1, []byte("new"), []byte("v"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRange("t/pk", p0, EventRange{0, 10}); err != nil {
		t.Fatal(err)
	}
	if err := b.SetRange("t/pk", p1, EventRange{3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// Redelivered: the same keys again.
	if err := b.Add("t/pk", p0, 4, 0, []byte("k4"), []byte("v"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir, StoreOptions{})

	got := eventsOf(t, s, "t/pk", p0, 2, 5)
	if len(got) != 3 || got[0].key != "k2" || got[2].key != "k4" || got[1].count != 1 {
		t.Errorf("events [2,5) of p0: %+v", got)
	}
	if got := eventsOf(t, s, "t/pk", p1, 0, 100); len(got) != 2 || got[0].key != "old" || got[0].count != -1 || got[1].key != "new" {
		t.Errorf("update at p1: %+v", got)
	}
	ranges, err := s.EventRanges("t/pk")
	if err != nil {
		t.Fatal(err)
	}
	if len(ranges) != 2 || ranges[p0] != (EventRange{0, 10}) || ranges[p1] != (EventRange{3, 4}) {
		t.Errorf("ranges %v", ranges)
	}
	if r, _ := s.EventRanges("t/pk2"); len(r) != 0 {
		t.Errorf("ranges of t/pk2: %v (none recorded)", r)
	}
	if err := s.TrimEvents("t/pk", p0, 7); err != nil {
		t.Fatal(err)
	}
	if got := eventsOf(t, s, "t/pk", p0, 0, 100); len(got) != 3 || got[0].key != "k7" {
		t.Errorf("after trim below 7: %+v", got)
	}
	if got := eventsOf(t, s, "t/pk2", p0, 0, 100); len(got) != 10 {
		t.Errorf("trim of t/pk touched t/pk2: %d events left", len(got))
	}
	if got := eventsOf(t, s, "t/pk", p1, 0, 100); len(got) != 2 {
		t.Errorf("trim of p0 touched p1: %+v", got)
	}
	bad := s.NewEventBatch()
	defer bad.Close()
	if err := bad.Add("t/pk", TopicPartition{"a\x00b", 0}, 1, 0, nil, nil, 1); err == nil {
		t.Error("a topic with NUL was accepted")
	}
	if err := bad.SetRange("t/pk", p0, EventRange{5, 4}); err == nil {
		t.Error("an inverted range was accepted")
	}
}

// TestEventBatchFull: a batch says it is full once it holds a quarter of a
// memtable as Pebble counts it, and committed it is empty again and keeps serving: every event
// of the batches written reads back, and the range committed last stands.
func TestEventBatchFull(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, StoreOptions{MemTableSize: 1 << 20})
	tp := TopicPartition{"cdc", 0}
	b := s.NewEventBatch()
	defer b.Close()
	value := make([]byte, 500)
	off, commits := int64(0), 0
	for commits < 3 {
		if b.Full() {
			t.Fatalf("full with %d events", b.Len())
		}
		for !b.Full() {
			if err := b.Add("t/pk", tp, off, 0, fmt.Appendf(nil, "k%07d", off), value, 1); err != nil {
				t.Fatal(err)
			}
			off++
		}
		// An event takes its value, some 40 bytes of key and framing, and
		// the memtable's node for it (memtableEntryOverhead).
		if n := b.Len(); n*(len(value)+memtableEntryOverhead) > (1<<20)/4 || n*(len(value)+memtableEntryOverhead+100) < (1<<20)/4 {
			t.Fatalf("full after %d events of %d bytes, want a quarter of the memtable", n, len(value))
		}
		if err := b.SetRange("t/pk", tp, EventRange{0, off}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		commits++
	}
	if got := eventsOf(t, s, "t/pk", tp, 0, off); int64(len(got)) != off || got[len(got)-1].key != fmt.Sprintf("k%07d", off-1) {
		t.Fatalf("%d events read back, want %d", len(got), off)
	}
	if r, err := s.EventRanges("t/pk"); err != nil || r[tp] != (EventRange{0, off}) {
		t.Errorf("range %v (%v), want [0, %d)", r[tp], err, off)
	}
}

// TestFullEventBatchKeepsItsBuffer: a batch of small change-event entries
// (the common case: a key and a location of a few dozen bytes) filled until
// it says it is full is committed into the memtable like any write, so the
// batch keeps its buffer for the next fill instead of growing a new one;
// Pebble would take a batch of half a memtable or more, counted with the
// memtable's per-entry overhead, as a memtable of its own and drop its
// buffer. What the batches held reads back.
func TestFullEventBatchKeepsItsBuffer(t *testing.T) {
	s := openTestStore(t, t.TempDir(), StoreOptions{MemTableSize: 4 << 20})
	tp := TopicPartition{"cdc", 0}
	b := s.NewEventBatch()
	defer b.Close()
	off := int64(0)
	for range 3 {
		for !b.Full() {
			if err := b.Add("db.orders/by_customer", tp, off, 0, fmt.Appendf(nil, "\x00\x00\x00\x07%016d", off), []byte("\x00\x00\x01\x02\x03"), 1); err != nil {
				t.Fatal(err)
			}
			off++
		}
		held := len(b.b.Repr())
		if err := b.SetRange("db.orders/by_customer", tp, EventRange{0, off}); err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if c := cap(b.b.Repr()); c < held {
			t.Fatalf("after committing a full batch of %d bytes its buffer holds %d: the batch went to Pebble as a memtable of its own", held, c)
		}
	}
	if got := eventsOf(t, s, "db.orders/by_customer", tp, 0, off); int64(len(got)) != off {
		t.Fatalf("%d events read back, want %d", len(got), off)
	}
}

// BenchmarkEventBatch stages change-event mutations the way the daemon's
// change feed does with large fetches: events of two partitions, each an
// entry of a secondary index, committed with their ranges once the batch
// is full.
func BenchmarkEventBatch(b *testing.B) {
	s, err := OpenStore(b.TempDir(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const index = "bench.orders/by_customer_events"
	tps := [2]TopicPartition{{"orders-cdc", 0}, {"orders-cdc", 1}}
	key := make([]byte, 0, 32)
	batch := s.NewEventBatch()
	defer batch.Close()
	b.ReportAllocs()
	offset := int64(0)
	for i := 0; b.Loop(); i++ {
		tp := tps[i%2]
		key = fmt.Appendf(key[:0], "\x00\x00\x00\x07%08d%08d", i%100_000, i)
		if err := batch.Add(index, tp, offset, 0, key, []byte("\x00\x00\x00\x00\x00\x01\x02\x03"), 1); err != nil {
			b.Fatal(err)
		}
		if i%2 == 1 {
			offset++
		}
		if batch.Full() {
			for _, tp := range tps {
				if err := batch.SetRange(index, tp, EventRange{0, offset}); err != nil {
					b.Fatal(err)
				}
			}
			if err := batch.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "mutations/s")
}
