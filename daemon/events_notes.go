package daemon

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamidx/streamidx/ingest"
	"github.com/streamidx/streamidx/staging"
	"github.com/streamidx/streamidx/updater"
)

// An events-fed index needs the offsets of the commit notification of
// every snapshot it indexes, whichever process of the consumer group reads
// the partition that holds it, and at once after a restart, when the group
// may take a while to hand the partitions out again. So the change feed
// also reads every partition of the commit topic itself, from the group's
// committed offset on (what lies before is covered by every index), and
// keeps the offsets of the notifications it sees. The group's consumer
// still does the bookkeeping: offsets, dead letters, properties.

// maxKnownNotes bounds the notifications kept per table.
const maxKnownNotes = 4096

// knownNotes are the notifications the change feed has read, by table.
type knownNotes struct {
	mu      sync.Mutex
	byTable map[string]map[int64]map[staging.TopicPartition]int64
	order   map[string][]int64 // snapshot ids by arrival, to forget the oldest
	// commits gathers the offsets of Kafka Connect commits by commit id.
	commits map[uuid.UUID]map[staging.TopicPartition]int64
}

func newKnownNotes() *knownNotes {
	return &knownNotes{byTable: map[string]map[int64]map[staging.TopicPartition]int64{}, order: map[string][]int64{},
		commits: map[uuid.UUID]map[staging.TopicPartition]int64{}}
}

// offsets returns the offsets of the notification of snapshotID of table.
func (k *knownNotes) offsets(table string, snapshotID int64) (map[staging.TopicPartition]int64, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	o, ok := k.byTable[table][snapshotID]
	return o, ok
}

func (k *knownNotes) add(table string, snapshotID int64, offsets map[staging.TopicPartition]int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	m := k.byTable[table]
	if m == nil {
		m = map[int64]map[staging.TopicPartition]int64{}
		k.byTable[table] = m
	}
	if _, seen := m[snapshotID]; !seen {
		k.order[table] = append(k.order[table], snapshotID)
		if len(k.order[table]) > maxKnownNotes {
			delete(m, k.order[table][0])
			k.order[table] = k.order[table][1:]
		}
	}
	m[snapshotID] = offsets
}

// record reads one record of the commit topic; it returns the table whose
// notification it was, "" for anything else. Records that do not decode
// are the group consumer's to send to the dead-letter topic.
func (k *knownNotes) record(r *kgo.Record, format string) string {
	if format != "kafka-connect" {
		n, err := ingest.DecodeNotification(r.Value)
		if err != nil {
			return ""
		}
		o := map[staging.TopicPartition]int64{}
		if len(n.Offsets) > 0 {
			if o, err = updater.DecodeOffsets(n.Offsets); err != nil {
				o = map[staging.TopicPartition]int64{}
			}
		}
		k.add(n.Table, n.SnapshotID, o)
		return n.Table
	}
	ev, err := ingest.DecodeControlEvent(r.Value)
	if err != nil {
		return ""
	}
	k.mu.Lock()
	switch ev.Type {
	case ingest.DataComplete:
		o := k.commits[ev.CommitID]
		if o == nil {
			if len(k.commits) >= maxKnownNotes {
				clear(k.commits) // commits that never completed
			}
			o = map[staging.TopicPartition]int64{}
			k.commits[ev.CommitID] = o
		}
		for _, a := range ev.Assignments {
			if tp := (staging.TopicPartition{Topic: a.Topic, Partition: a.Partition}); a.HasOffset && a.Offset > o[tp] {
				o[tp] = a.Offset
			}
		}
	case ingest.CommitComplete:
		delete(k.commits, ev.CommitID)
	}
	o := k.commits[ev.CommitID]
	k.mu.Unlock()
	if ev.Type != ingest.CommitToTable || !ev.HasSnapshot {
		return ""
	}
	out := map[staging.TopicPartition]int64{}
	for tp, off := range o {
		out[tp] = off
	}
	k.add(ev.Table(), ev.SnapshotID, out)
	return ev.Table()
}

// commitTopicStart returns where to read each partition of the commit
// topic: the group's committed offset, or the start when it has none.
func commitTopicStart(ctx context.Context, cl *kgo.Client, topic, group string, partitions []int32) (map[int32]kgo.Offset, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = partitions
	req.Topics = append(req.Topics, rt)
	out := map[int32]kgo.Offset{}
	for _, p := range partitions {
		out[p] = kgo.NewOffset().AtStart()
	}
	resp, err := req.RequestWith(ctx, cl)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the committed offsets of %s: %w", topic, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, fmt.Errorf("read the committed offsets of %s: %w", topic, err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode == 0 && p.Offset >= 0 {
				out[p.Partition] = kgo.NewOffset().At(p.Offset)
			}
		}
	}
	return out, nil
}
