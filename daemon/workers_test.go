package daemon

import (
	"strconv"
	"sync"
	"testing"

	"github.com/apache/iceberg-go/table"
)

// TestSlowIndexDoesNotHoldBackAFastOne: two indexes on one table, one made
// slow on purpose (its updates wait at a gate the test holds closed), and
// commits streaming in through notifications. The fast index gets an index
// snapshot for every source snapshot, in order, while the slow one is still
// at the first; the commit topic's offset waits for both (bookkeeping,
// not a gate on work); once the gate opens the slow one catches up.
func TestSlowIndexDoesNotHoldBackAFastOne(t *testing.T) {
	h := newHarness(t, 1, "pk", "by_customer")
	var gateOnce sync.Once
	gate, gated := make(chan struct{}), make(chan struct{}, 100)
	open := func() { gateOnce.Do(func() { close(gate) }) }
	var slow sync.Mutex // guards hold
	hold := false
	d := h.start(func(d *Daemon) {
		d.beforeStep = func(w *worker) {
			slow.Lock()
			held := hold && w.index == "by_customer"
			slow.Unlock()
			if held {
				gated <- struct{}{}
				<-gate
			}
		}
	})
	t.Cleanup(open) // runs before the daemon's clean-up closes it
	first := h.tbl.CurrentSnapshot()
	h.waitIndexed("pk", first.SnapshotID)
	h.waitIndexed("by_customer", first.SnapshotID)
	slow.Lock()
	hold = true
	slow.Unlock()

	var sources []*table.Snapshot
	for i := range 5 {
		s := h.commit(50 + 5*i)
		sources = append(sources, s)
		h.notify(s.SnapshotID, s.SequenceNumber, 0)
		// The fast index covers each commit before the next one is made.
		h.waitIndexed("pk", s.SnapshotID)
	}
	<-gated // the slow index was woken and is inside its update
	if got := h.indexed("by_customer"); got != first.SnapshotID {
		t.Fatalf("by_customer moved to %d through a closed gate", got)
	}
	// pk has one index snapshot per source snapshot, in commit order,
	// all published while by_customer had none of them.
	var pk []int64
	for _, s := range h.snapshots("pk") {
		pk = append(pk, s.SourceTableSnapshotID)
	}
	want := []int64{first.SnapshotID}
	for _, s := range sources {
		want = append(want, s.SnapshotID)
	}
	if len(pk) != len(want) {
		t.Fatalf("pk index snapshots for %v, want %v", pk, want)
	}
	for i := range want {
		if pk[i] != want[i] {
			t.Fatalf("pk index snapshots for %v, want %v", pk, want)
		}
	}
	if got := len(h.snapshots("by_customer")); got != 1 {
		t.Fatalf("by_customer has %d snapshots while held, want 1", got)
	}
	// Every notification stays pending, and nothing is committed on the
	// commit topic, while by_customer lags: a crash now must read every
	// notification again.
	_, body := d.get(t, "/metrics")
	if v, err := metric(body, "streamidx_ingest_notifications_pending"); err != nil || v != strconv.Itoa(len(sources)) {
		t.Errorf("streamidx_ingest_notifications_pending = %q (%v), want %d", v, err, len(sources))
	}
	// And /metrics says how far behind each index is, now.
	for index, want := range map[string]int{"pk": 0, "by_customer": len(sources)} {
		sample := `streamidx_flush_snapshots_behind{index="` + index + `",table="test.orders"}`
		if v, err := metric(body, sample); err != nil || v != strconv.Itoa(want) {
			t.Errorf("%s = %q (%v), want %d", sample, v, err, want)
		}
	}
	if got := h.committed(0); got > 0 {
		t.Errorf("offset %d committed while by_customer covers none of the notified snapshots", got)
	}

	slow.Lock()
	hold = false
	slow.Unlock()
	open()
	last := sources[len(sources)-1]
	h.waitIndexed("by_customer", last.SnapshotID)
	waitFor(t, "the offset of every notification is committed", func() bool { return h.committed(0) == int64(len(sources)) })
	h.verifyAll("pk")
	h.verifyAll("by_customer")
	_, body = d.get(t, "/metrics")
	for _, index := range []string{"pk", "by_customer"} {
		sample := `streamidx_flush_commit_lag_seconds_count{index="` + index + `",table="test.orders"}`
		v, err := metric(body, sample)
		if n, _ := strconv.Atoi(v); err != nil || n != len(sources)+1 {
			t.Errorf("%s = %q (%v), want %d observations", sample, v, err, len(sources)+1)
		}
	}
}
