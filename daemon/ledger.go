package daemon

import (
	"fmt"
	"sync"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// Index snapshot properties that record the feed positions a snapshot
// covers. An index snapshot names only a notification whose snapshot it
// covers (the source snapshot it indexes, or an ancestor of it).
const (
	// PropSourceOffsets holds the "offsets" object of that notification:
	// the change-topic offsets its commit covers.
	PropSourceOffsets = "streamidx.source-offsets"
	// PropCommitNotification is topic/partition/offset of that notification.
	PropCommitNotification = "streamidx.commit-notification"
)

// note is one record of the commit topic, from the moment it is read until
// its offset may be committed.
type note struct {
	rec *kgo.Record
	n   ingest.Notification
	// served is false for a record of a table no index here serves and for
	// one that could not be decoded.
	served  bool
	arrived time.Time
	// seq orders notes by arrival, to break ties between notifications of
	// the same snapshot.
	seq uint64
	// reason is set when the record goes to the dead-letter topic; sending
	// while that record is being produced.
	reason  string
	sending bool
	// covered holds the workers whose index covers the snapshot.
	covered map[*worker]bool
	done    bool
}

type topicPartition struct {
	topic     string
	partition int32
}

// ledger is the bookkeeping of the notification feed. A notification never
// waits in the consumer: it is recorded here and its table's workers are
// woken. It is done when every running worker of its table covers its
// snapshot, when it goes to the dead-letter topic, or at once when no index
// here serves its table. A partition's committed offset follows its notes in
// offset order and stops at the first that is not done (Kafka's committed
// offset is the next one to read), so a crash redelivers exactly what is not
// done and one slow note holds back only its own partition's offset, never
// any work.
//
// Concurrency: every method is safe for concurrent use.
type ledger struct {
	byTable map[string][]*worker // fixed at start
	mark    func(*kgo.Record)    // makes rec.Offset+1 its partition's offset to commit; set by Run before use

	mu    sync.Mutex
	parts map[topicPartition][]*note
	seq   uint64
	// commits gathers the control events of Kafka Connect commits by
	// commit id (connect.go).
	commits map[uuid.UUID]*connectCommit
	// recent keeps the last notifications of each table after they are
	// done, for events-fed indexes that need the offsets of a snapshot
	// they covered without them (built from the table before its
	// notification was read).
	recent map[string][]*note
	marks  []*kgo.Record // to mark once mu is released
}

func newLedger(byTable map[string][]*worker, mark func(*kgo.Record)) *ledger {
	return &ledger{byTable: byTable, mark: mark, parts: map[topicPartition][]*note{}}
}

// add records a record read at now: n when it decoded, else decodeErr. It
// returns the workers to wake, and the note when it must go to the
// dead-letter topic.
func (l *ledger) add(rec *kgo.Record, n ingest.Notification, decodeErr error, now time.Time) (wake []*worker, deadLetter *note) {
	l.mu.Lock()
	defer l.unlock()
	l.seq++
	nt := &note{rec: rec, n: n, arrived: now, seq: l.seq, covered: map[*worker]bool{}}
	switch {
	case decodeErr != nil:
		nt.reason, nt.sending, deadLetter = decodeErr.Error(), true, nt
	case len(l.byTable[n.Table]) == 0:
		nt.done = true
	default:
		nt.served = true
		wake = l.byTable[n.Table]
		l.complete(nt) // done at once when every worker of the table is halted
	}
	tp := topicPartition{rec.Topic, rec.Partition}
	l.parts[tp] = append(l.parts[tp], nt)
	l.advance(tp)
	return wake, deadLetter
}

// propsFor returns the properties function of w's next update: the newest
// notification (by sequence number, then arrival) that w's index does not
// cover yet and whose snapshot the snapshot being published covers.
func (l *ledger) propsFor(w *worker) updater.PropertiesFunc {
	return func(tbl *table.Table, snap *table.Snapshot) map[string]string {
		l.mu.Lock()
		defer l.mu.Unlock()
		var best *note
		for _, notes := range l.parts {
			for _, nt := range notes {
				if !nt.waiting() || nt.n.Table != w.table || nt.covered[w] ||
					!lineage.IsAncestor(tbl, snap.SnapshotID, nt.n.SnapshotID) {
					continue
				}
				if best == nil || nt.n.SequenceNumber > best.n.SequenceNumber ||
					nt.n.SequenceNumber == best.n.SequenceNumber && nt.seq > best.seq {
					best = nt
				}
			}
		}
		if best == nil {
			return nil
		}
		props := map[string]string{PropCommitNotification: fmt.Sprintf("%s/%d/%d", best.n.Topic, best.n.Partition, best.n.Offset)}
		if len(best.n.Offsets) > 0 {
			props[PropSourceOffsets] = string(best.n.Offsets)
		}
		return props
	}
}

// waiting reports whether the note waits for the indexes to cover it.
func (nt *note) waiting() bool { return nt.served && !nt.done && nt.reason == "" }

// cover records that w's index covers source snapshot indexed of tbl (and
// so its ancestors), and completes the notes every running worker of their
// table now covers.
func (l *ledger) cover(w *worker, tbl *table.Table, indexed int64) {
	l.mu.Lock()
	defer l.unlock()
	for tp, notes := range l.parts {
		for _, nt := range notes {
			if nt.waiting() && nt.n.Table == w.table && !nt.covered[w] && indexed != 0 &&
				lineage.IsAncestor(tbl, indexed, nt.n.SnapshotID) {
				nt.covered[w] = true
				l.complete(nt)
			}
		}
		l.advance(tp)
	}
}

// settle completes the notes of table that every running worker covers; it
// is called when a worker halts, since a halted index no longer holds the
// feed.
func (l *ledger) settle(tableName string) {
	l.mu.Lock()
	defer l.unlock()
	for tp, notes := range l.parts {
		for _, nt := range notes {
			if nt.waiting() && nt.n.Table == tableName {
				l.complete(nt)
			}
		}
		l.advance(tp)
	}
}

// complete marks nt done when every running worker of its table covers it.
func (l *ledger) complete(nt *note) {
	for _, w := range l.byTable[nt.n.Table] {
		if !nt.covered[w] && !w.isHalted() {
			return
		}
	}
	nt.done = true
}

// advance drops the done notes at the head of tp; the last of them is
// marked for commit when mu is released. Called with l.mu held.
func (l *ledger) advance(tp topicPartition) {
	l.releaseCommits()
	notes := l.parts[tp]
	i := 0
	for i < len(notes) && notes[i].done {
		i++
	}
	if i == 0 {
		return
	}
	l.marks = append(l.marks, notes[i-1].rec)
	for _, nt := range notes[:i] {
		if nt.served && nt.reason == "" {
			l.remember(nt)
		}
	}
	l.parts[tp] = notes[i:]
}

// unlock releases mu, then marks what advance found, so that the Kafka
// client is never called with mu held. Marks never move an offset back, so
// their order does not matter.
func (l *ledger) unlock() {
	marks := l.marks
	l.marks = nil
	l.mu.Unlock()
	for _, r := range marks {
		l.mark(r)
	}
}

// expired returns, by table, the notes still waiting that arrived at least
// timeout before now.
func (l *ledger) expired(now time.Time, timeout time.Duration) map[string][]*note {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]*note{}
	for _, notes := range l.parts {
		for _, nt := range notes {
			if nt.waiting() && now.Sub(nt.arrived) >= timeout {
				out[nt.n.Table] = append(out[nt.n.Table], nt)
			}
		}
	}
	return out
}

// deadLetter sends nt to the dead-letter topic with reason, unless it was
// done meanwhile. It reports whether it did.
func (l *ledger) deadLetter(nt *note, reason string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !nt.waiting() {
		return false
	}
	nt.reason, nt.sending = reason, true
	return true
}

// unsent returns the notes bound for the dead-letter topic whose record is
// not being produced (an earlier attempt failed) and marks them as being
// produced.
func (l *ledger) unsent() []*note {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*note
	for _, notes := range l.parts {
		for _, nt := range notes {
			if nt.reason != "" && !nt.done && !nt.sending {
				nt.sending = true
				out = append(out, nt)
			}
		}
	}
	return out
}

// sent records the outcome of producing nt's dead-letter record: done, or
// to be tried again.
func (l *ledger) sent(nt *note, err error) {
	l.mu.Lock()
	defer l.unlock()
	nt.sending = false
	if err != nil {
		return
	}
	nt.done = true
	l.advance(topicPartition{nt.rec.Topic, nt.rec.Partition})
}

// lagging returns the running workers that do not cover a waiting note of
// their table: they are woken again, since a snapshot may reach the catalog
// after its notification.
func (l *ledger) lagging() map[*worker]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[*worker]bool{}
	for _, notes := range l.parts {
		for _, nt := range notes {
			if !nt.waiting() {
				continue
			}
			for _, w := range l.byTable[nt.n.Table] {
				if !nt.covered[w] && !w.isHalted() {
					out[w] = true
				}
			}
		}
	}
	return out
}

// pending counts the notes not done.
func (l *ledger) pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, notes := range l.parts {
		for _, nt := range notes {
			if !nt.done {
				n++
			}
		}
	}
	return n
}

// drop forgets the notes of partitions this process no longer consumes:
// their new owner reads them again from the committed offset.
func (l *ledger) drop(partitions map[string][]int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for topic, ps := range partitions {
		for _, p := range ps {
			delete(l.parts, topicPartition{topic, p})
		}
	}
}

// recentNotes is how many done notifications per table recent keeps.
const recentNotes = 64

// remember keeps a done notification in recent. Called with l.mu held.
func (l *ledger) remember(nt *note) {
	if l.recent == nil {
		l.recent = map[string][]*note{}
	}
	r := append(l.recent[nt.n.Table], nt)
	if len(r) > recentNotes {
		r = r[len(r)-recentNotes:]
	}
	l.recent[nt.n.Table] = r
}

// commitOffsets returns the offsets that the notification of snapshot
// snapshotID of tableName names, for an events-fed index: the newest such
// notification still in the ledger or among the recent ones. A
// notification without offsets gives an empty map.
func (l *ledger) commitOffsets(tableName string, snapshotID int64) (map[staging.TopicPartition]int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var best *note
	consider := func(nt *note) {
		if nt.served && nt.reason == "" && nt.n.Table == tableName && nt.n.SnapshotID == snapshotID &&
			(best == nil || nt.seq > best.seq) {
			best = nt
		}
	}
	for _, notes := range l.parts {
		for _, nt := range notes {
			consider(nt)
		}
	}
	for _, nt := range l.recent[tableName] {
		consider(nt)
	}
	if best == nil {
		return nil, false
	}
	if len(best.n.Offsets) == 0 {
		return map[staging.TopicPartition]int64{}, true
	}
	o, err := updater.DecodeOffsets(best.n.Offsets)
	if err != nil {
		return map[staging.TopicPartition]int64{}, true // DecodeNotification checked the shape; not the values
	}
	return o, true
}
