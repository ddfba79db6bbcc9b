package updater

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/apache/iceberg-go/table"

	"github.com/streamidx/streamidx/compactor"
	"github.com/streamidx/streamidx/format"
	"github.com/streamidx/streamidx/internal/lineage"
	"github.com/streamidx/streamidx/staging"
)

// PropEventOffsets is the index snapshot property of an events-fed index
// that says which change events it holds: per topic and partition, the next
// offset after the last event applied (Kafka's committed-offset convention),
// as {"topic": {"0": 1042}}. The delta of the next source snapshot starts
// there.
const PropEventOffsets = "streamidx.event-offsets"

// EventFeed is the change feed of one table, as an events-fed index sees
// it. The daemon implements it from its change-topic consumer and its
// commit notifications.
type EventFeed interface {
	// Topics are the change topics that feed the table.
	Topics() []string
	// CommitOffsets returns the change-topic offsets that the commit
	// notification of source snapshot snapshotID names (per topic and
	// partition, the next offset after the last event the commit covers),
	// and whether such a notification was read.
	CommitOffsets(snapshotID int64) (map[staging.TopicPartition]int64, bool)
}

// EventLog is the name under which the change events of an index are
// staged (staging.EventBatch, Store.IterateEvents).
func EventLog(tbl table.Identifier, index string) string {
	return strings.Join(tbl, ".") + "/" + index
}

// eventOffsets are positions in the change topics.
type eventOffsets map[staging.TopicPartition]int64

// encodeOffsets writes offsets as {"topic": {"partition": offset}}.
func encodeOffsets(o eventOffsets) string {
	byTopic := map[string]map[string]int64{}
	for tp, off := range o {
		if byTopic[tp.Topic] == nil {
			byTopic[tp.Topic] = map[string]int64{}
		}
		byTopic[tp.Topic][strconv.Itoa(int(tp.Partition))] = off
	}
	b, _ := json.Marshal(byTopic) // maps of strings and numbers always encode
	return string(b)
}

// DecodeOffsets reads {"topic": {"partition": offset}}, the offsets of a
// commit notification and of PropEventOffsets; offsets may be numbers or
// numeric strings.
func DecodeOffsets(data []byte) (map[staging.TopicPartition]int64, error) {
	var byTopic map[string]map[string]json.Number
	if err := json.Unmarshal(data, &byTopic); err != nil {
		return nil, fmt.Errorf("offsets: want {\"topic\": {\"partition\": offset}}: %w", err)
	}
	out := map[staging.TopicPartition]int64{}
	for topic, parts := range byTopic {
		for p, v := range parts {
			part, err := strconv.ParseInt(p, 10, 32)
			if err != nil || part < 0 {
				return nil, fmt.Errorf("offsets of %s: partition %q is not a partition number", topic, p)
			}
			off, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil || off < 0 {
				return nil, fmt.Errorf("offsets of %s/%s: %q is not an offset", topic, p, v)
			}
			out[staging.TopicPartition{Topic: topic, Partition: int32(part)}] = off
		}
	}
	return out, nil
}

// eventPosition is the change-feed position of index snapshot s: its
// PropEventOffsets, else the offsets of the notification of its source
// snapshot when the feed still has it.
func (u *Updater) eventPosition(s *format.Snapshot) (eventOffsets, bool) {
	if v, ok := s.Properties[PropEventOffsets]; ok {
		if o, err := DecodeOffsets([]byte(v)); err == nil {
			return o, true
		}
		u.log.Warn("unreadable event offsets in an index snapshot; rebuilding from the table", "snapshot", s.SnapshotID)
		return nil, false
	}
	return u.notified(s.SourceTableSnapshotID)
}

// notified returns the offsets of the table's change topics that the
// notification of source snapshot id names.
func (u *Updater) notified(id int64) (eventOffsets, bool) {
	all, ok := u.opts.Events.CommitOffsets(id)
	if !ok {
		return nil, false
	}
	topics := u.opts.Events.Topics()
	out := eventOffsets{}
	for tp, off := range all {
		if slices.Contains(topics, tp.Topic) {
			out[tp] = off
		}
	}
	return out, true
}

// withEventOffsets adds PropEventOffsets to the properties props gives.
func withEventOffsets(props PropertiesFunc, o eventOffsets) PropertiesFunc {
	return func(tbl *table.Table, snap *table.Snapshot) map[string]string {
		out := map[string]string{}
		if props != nil {
			maps.Copy(out, props(tbl, snap))
		}
		if o != nil {
			out[PropEventOffsets] = encodeOffsets(o)
		}
		return out
	}
}

// stepEvents moves an events-fed index one index snapshot closer to the
// table's current snapshot target. The delta of the next source snapshot is
// the staged events between the index's position in the change feed and
// the offsets its commit notification names; the table is not read. The
// table is read (a full build) only where the events cannot say: the first
// build, a position the feed does not know, a notification without offsets
// of the table's change topics, events no longer staged, or a delta that
// does not fit the index.
func (u *Updater) stepEvents(ctx context.Context, tbl *table.Table, md *format.Metadata, target *table.Snapshot, props PropertiesFunc, st *Stats) error {
	cur := md.CurrentSnapshot()
	if cur != nil && cur.SourceTableSnapshotID == target.SnapshotID {
		st.Aligned = true
		return nil
	}
	var chain []*table.Snapshot // source snapshots after cur's, oldest first
	inHistory := false
	if cur != nil {
		chain, inHistory = lineage.Since(tbl, target, cur.SourceTableSnapshotID)
	}
	var pos eventOffsets
	havePos := false
	if inHistory {
		pos, havePos = u.eventPosition(cur)
	}
	if !havePos {
		return u.buildForEvents(ctx, tbl, md, target, cur, props, st)
	}
	next, nextPos, err := u.nextNotified(chain, pos)
	if err != nil {
		return err
	}
	if next == nil {
		st.Waiting = fmt.Sprintf("no commit notification yet for source snapshot %d or a later one", chain[0].SnapshotID)
		return nil
	}
	if nextPos == nil {
		u.log.Warn("commit notification names none of the table's change topics: building from the table",
			"source_snapshot", next.SnapshotID, "topics", u.opts.Events.Topics())
		return u.fullBuild(ctx, tbl, md, next, props, st)
	}
	ready, gap, err := u.eventsStaged(md, pos, nextPos)
	if err != nil {
		return err
	}
	if gap != "" {
		u.log.Warn("events of the index's position are no longer staged: building from the table", "why", gap,
			"source_snapshot", next.SnapshotID)
		return u.fullBuild(ctx, tbl, md, next, withEventOffsets(props, nextPos), st)
	}
	if ready != "" {
		st.Waiting = ready
		return nil
	}
	log := EventLog(u.table, u.index)
	err = u.incremental(ctx, tbl, md, cur, nil, next, withEventOffsets(props, nextPos), st,
		func(is *format.IndexSchema, stage string, _ *resolver, pub *Publication) error {
			return u.stageEvents(log, stage, next, pos, nextPos, pub)
		})
	if errors.Is(err, compactor.ErrDeltaMismatch) || errors.Is(err, compactor.ErrUnsortedRangeFile) {
		u.log.Warn("the events do not fit the index: building from the table", "err", err)
		return u.fullBuild(ctx, tbl, md, next, withEventOffsets(props, nextPos), st)
	}
	if err != nil {
		return err
	}
	for tp, off := range nextPos {
		if err := u.store.TrimEvents(log, tp, off); err != nil {
			u.log.Warn("could not trim applied events; trimmed after the next commit", "err", err)
		}
	}
	return nil
}

// buildForEvents builds an events-fed index from the table at a source
// snapshot after cur whose commit notification is known, so that the index
// has a position in the change feed to follow from: the newest such
// snapshot for an index without snapshots or under policy latest, the
// oldest otherwise, so that policy every still gives each later snapshot
// its own index snapshot. With none known, an index with no snapshot at all
// is built at target without a position (usable for lookups; it follows the
// feed from the next notification on), and one with a snapshot waits.
func (u *Updater) buildForEvents(ctx context.Context, tbl *table.Table, md *format.Metadata, target *table.Snapshot, cur *format.Snapshot,
	props PropertiesFunc, st *Stats) error {
	var since int64
	if cur != nil {
		since = cur.SourceTableSnapshotID
	}
	newest := cur == nil || u.opts.Policy == PolicyLatest
	var at *table.Snapshot
	var pos eventOffsets
	for _, s := range lineage.Ancestors(tbl, target) { // newest first
		if s.SnapshotID == since {
			break
		}
		if o, ok := u.notified(s.SnapshotID); ok && len(o) > 0 {
			at, pos = s, o
			if newest {
				break
			}
		}
	}
	if at != nil {
		u.log.Info("events-fed index has no position in the change feed: building from the table at a notified snapshot",
			"source_snapshot", at.SnapshotID)
		return u.fullBuild(ctx, tbl, md, at, withEventOffsets(props, pos), st)
	}
	if cur == nil {
		return u.fullBuild(ctx, tbl, md, target, props, st)
	}
	st.Waiting = "no commit notification with change-topic offsets for a snapshot after the indexed one yet"
	return nil
}

// nextNotified picks the source snapshot the next index snapshot is for:
// the first snapshot of chain (the newest, under policy latest) whose
// commit notification is known, with the position it takes the index to;
// snapshots before it without a notification are covered by the same
// events. A leading snapshot that changes no live row (a replace, or a
// snapshot of rewrite-deletes) needs no notification. nextPos is nil when the
// notification names none of the table's change topics; next is nil when
// no snapshot of chain has a known notification yet.
func (u *Updater) nextNotified(chain []*table.Snapshot, pos eventOffsets) (next *table.Snapshot, nextPos eventOffsets, err error) {
	if len(chain) > 0 && lineage.KeepsLiveRows(chain[0]) {
		if _, ok := u.opts.Events.CommitOffsets(chain[0].SnapshotID); !ok {
			return chain[0], maps.Clone(pos), nil
		}
	}
	for i, s := range chain {
		if u.opts.Policy == PolicyLatest {
			s = chain[len(chain)-1-i]
		}
		o, ok := u.notified(s.SnapshotID)
		if !ok {
			continue
		}
		if len(o) == 0 {
			return s, nil, nil
		}
		out := maps.Clone(pos)
		for tp, off := range o {
			if off < out[tp] {
				return nil, nil, fmt.Errorf("the notification of source snapshot %d names offset %d of %s, before the index's position %d: "+
					"notifications and change topics disagree", s.SnapshotID, off, tp, out[tp])
			}
			out[tp] = off
		}
		return s, out, nil
	}
	return nil, nil, nil
}

// eventsStaged checks that the events between pos and nextPos are staged.
// ready says what is still missing ("" when all is there); gap says which
// events are gone for good (staged once and lost, or never read).
func (u *Updater) eventsStaged(md *format.Metadata, pos, nextPos eventOffsets) (ready, gap string, err error) {
	ranges, err := u.store.EventRanges(EventLog(u.table, u.index))
	if err != nil {
		return "", "", err
	}
	tps := slices.SortedFunc(maps.Keys(nextPos), func(a, b staging.TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, tp := range tps {
		from, to := pos[tp], nextPos[tp]
		if to <= from {
			continue
		}
		r, ok := ranges[tp]
		if ok && r.From > from {
			return "", fmt.Sprintf("%s is staged from offset %d, the index holds events up to %d", tp, r.From, from), nil
		}
		if !ok || r.Through < to {
			return fmt.Sprintf("waiting for the events of %s up to offset %d (staged up to %d)", tp, to, r.Through), "", nil
		}
	}
	return "", "", nil
}

// stageEvents makes sure the sealed stage of the events between pos and
// nextPos exists, for the merge into the index snapshot of next.
func (u *Updater) stageEvents(log, stage string, next *table.Snapshot, pos, nextPos eventOffsets, pub *Publication) error {
	sealed, err := u.store.Sealed(stage)
	if err != nil {
		return err
	}
	for _, m := range sealed {
		if m.SourceSnapshotID == next.SnapshotID {
			return nil
		}
	}
	stager, err := u.store.Stage(stage, next.SnapshotID)
	if err != nil {
		return err
	}
	var mutations int64
	for tp, to := range nextPos {
		err := u.store.IterateEvents(log, tp, pos[tp], to, func(k, v []byte, count int) error {
			mutations++
			return stager.Add(k, v, count)
		})
		if err != nil {
			_ = stager.Abort()
			return fmt.Errorf("stage the events of source snapshot %d: %w", next.SnapshotID, err)
		}
	}
	offsets := map[string]string{}
	for tp, off := range nextPos {
		offsets[tp.String()] = strconv.FormatInt(off, 10)
	}
	if err := stager.Seal(staging.SealMeta{Ordinal: uint64(next.SequenceNumber), SourceSnapshotID: next.SnapshotID,
		SequenceNumber: next.SequenceNumber, TimestampMs: next.TimestampMs, Offsets: offsets}); err != nil {
		return err
	}
	pub.StagedMutations = mutations
	return nil
}
