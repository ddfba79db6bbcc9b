package daemon

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamidx/streamidx/ingest"
)

// The Iceberg Kafka Connect sink announces a commit on its control topic in
// several events: the workers' DATA_COMPLETE events name the source-topic
// offsets their data covers, then the coordinator's COMMIT_TO_TABLE (one per
// table) names the snapshot, and COMMIT_COMPLETE ends the commit. With
// run.kafka.commit-format kafka-connect each COMMIT_TO_TABLE becomes a
// notification whose offsets are those of the DATA_COMPLETE events of its
// commit id. A DATA_COMPLETE is done (its offset may be committed) only
// when its commit is complete and every COMMIT_TO_TABLE of it is done, so a
// crash never commits past the offsets that a notification still needs;
// one whose commit never completes (a coordinator that died mid-commit) is
// let go after run.kafka.notification-timeout. START_COMMIT, DATA_WRITTEN
// and COMMIT_COMPLETE events are done at once.

// connectCommit gathers the control events of one commit id.
type connectCommit struct {
	offsets  map[string]map[string]int64 // topic -> partition -> next offset
	data     []*note                     // DATA_COMPLETE events
	tables   []*note                     // COMMIT_TO_TABLE events with a snapshot
	complete bool                        // COMMIT_COMPLETE was read
	first    time.Time                   // when its first event was read
}

// offsetsJSON renders the commit's offsets as a notification's "offsets".
func (c *connectCommit) offsetsJSON() json.RawMessage {
	if len(c.offsets) == 0 {
		return nil
	}
	b, _ := json.Marshal(c.offsets) // maps of strings and numbers always encode
	return b
}

// readControl records one record of the Kafka Connect control topic in the
// ledger, the way read records a native notification.
func (c *consumer) readControl(r *kgo.Record) {
	ev, err := ingest.DecodeControlEvent(r.Value)
	if err != nil {
		c.d.metrics.decodeErrors.Inc()
		c.d.log.Warn("undecodable control event sent to the dead-letter topic",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
		_, dl := c.d.ledger.add(r, ingest.Notification{}, err, c.d.now())
		c.send(dl)
		return
	}
	wake := c.d.ledger.addControl(r, ev, c.d.now())
	if ev.Type == ingest.CommitToTable && ev.HasSnapshot {
		c.d.metrics.notifications.Inc()
	}
	for _, w := range wake {
		w.poke()
	}
	c.d.metrics.pending.Set(float64(c.d.ledger.pending()))
}

// addControl records a decoded control event and returns the workers to
// wake.
func (l *ledger) addControl(rec *kgo.Record, ev ingest.ControlEvent, now time.Time) []*worker {
	l.mu.Lock()
	defer l.unlock()
	l.seq++
	nt := &note{rec: rec, arrived: now, seq: l.seq, covered: map[*worker]bool{}}
	var wake []*worker
	commit := l.connectCommit(ev, now)
	switch {
	case ev.Type == ingest.DataComplete:
		for _, a := range ev.Assignments {
			if !a.HasOffset {
				continue
			}
			if commit.offsets[a.Topic] == nil {
				commit.offsets[a.Topic] = map[string]int64{}
			}
			p := strconv.Itoa(int(a.Partition))
			commit.offsets[a.Topic][p] = max(commit.offsets[a.Topic][p], a.Offset)
		}
		commit.data = append(commit.data, nt)
		// A DATA_COMPLETE read after its COMMIT_TO_TABLE (the control
		// topic has several partitions) still counts for it.
		for _, t := range commit.tables {
			if t.waiting() {
				t.n.Offsets = commit.offsetsJSON()
			}
		}
	case ev.Type == ingest.CommitToTable && ev.HasSnapshot:
		nt.n = ingest.Notification{Table: ev.Table(), SnapshotID: ev.SnapshotID, Offsets: commit.offsetsJSON(),
			Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
		if len(l.byTable[nt.n.Table]) == 0 {
			nt.done = true
		} else {
			nt.served = true
			wake = l.byTable[nt.n.Table]
			l.complete(nt)
		}
		commit.tables = append(commit.tables, nt)
	case ev.Type == ingest.CommitComplete:
		commit.complete = true
		nt.done = true
	default: // START_COMMIT, DATA_WRITTEN, a COMMIT_TO_TABLE that wrote nothing
		nt.done = true
	}
	tp := topicPartition{rec.Topic, rec.Partition}
	l.parts[tp] = append(l.parts[tp], nt)
	l.advance(tp)
	return wake
}

// connectCommit returns the gathering of ev's commit, for the events that
// name one. Called with l.mu held.
func (l *ledger) connectCommit(ev ingest.ControlEvent, now time.Time) *connectCommit {
	if l.commits == nil {
		l.commits = map[uuid.UUID]*connectCommit{}
	}
	c := l.commits[ev.CommitID]
	if c == nil {
		c = &connectCommit{offsets: map[string]map[string]int64{}, first: now}
		l.commits[ev.CommitID] = c
	}
	return c
}

// releaseCommits marks the DATA_COMPLETE events of complete commits done
// once every COMMIT_TO_TABLE of theirs is, and forgets finished commits.
// Called with l.mu held, by advance.
func (l *ledger) releaseCommits() {
next:
	for id, c := range l.commits {
		if !c.complete {
			continue
		}
		for _, t := range c.tables {
			if !t.done {
				continue next
			}
		}
		for _, d := range c.data {
			d.done = true
		}
		delete(l.commits, id)
	}
}

// expireCommits lets go of the DATA_COMPLETE events of commits that did not
// complete within timeout: no COMMIT_TO_TABLE will need their offsets.
func (l *ledger) expireCommits(now time.Time, timeout time.Duration) []uuid.UUID {
	l.mu.Lock()
	defer l.unlock()
	var out []uuid.UUID
	for id, c := range l.commits {
		if c.complete || now.Sub(c.first) < timeout {
			continue
		}
		for _, d := range c.data {
			d.done = true
		}
		delete(l.commits, id)
		out = append(out, id)
	}
	for tp := range l.parts {
		l.advance(tp)
	}
	return out
}
