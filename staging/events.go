package staging

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Change events are staged as they arrive, before the commit that covers
// them is known: per index, each event's entry mutations under its topic,
// partition and offset, and per index and partition the range of offsets
// staged so far. A commit notification later names the offsets its commit
// covers, and the mutations between the offsets of the index's last commit
// and those are moved into an ordinary stage (Stager) that is sealed and
// merged like a table delta.
//
// Layout:
//
//	0x03 | index | 0x00 | topic | 0x00 | partition (4 bytes) | offset (8 bytes) | seq (1 byte)
//	    -> count (varint) | entry key length (uvarint) | entry key | entry value
//	0x04 | index | 0x00 | topic | 0x00 | partition (4 bytes)  ->  from (8 bytes) | through (8 bytes)
//
// An event is keyed by where it was read, so staging it again after a crash
// writes the same keys: redelivery never doubles a mutation. The range
// record is written in the same batch as the events it covers, so after a
// crash it says exactly what survived, and the feed resumes there.

const (
	spaceEvent      byte = 0x03
	spaceEventRange byte = 0x04
)

// TopicPartition names a partition of a change topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// EventRange is the span of a partition's offsets whose events are staged
// for an index: From is the first offset the feed read, Through the next
// offset to read (every event in between is staged, or was trimmed after an
// index commit covered it).
type EventRange struct {
	From, Through int64
}

func checkTopic(tp TopicPartition) error {
	for i := 0; i < len(tp.Topic); i++ {
		if tp.Topic[i] == 0 {
			return fmt.Errorf("topic %q: must not hold NUL bytes", tp.Topic)
		}
	}
	if tp.Topic == "" || tp.Partition < 0 {
		return fmt.Errorf("topic partition %s: want a topic and a partition >= 0", tp)
	}
	return nil
}

func eventPartitionPrefix(space byte, index string, tp TopicPartition) []byte {
	k := make([]byte, 0, len(index)+len(tp.Topic)+16)
	k = append(k, space)
	k = append(k, index...)
	k = append(k, 0)
	k = append(k, tp.Topic...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

// eventKeyLen is the length of the keys appendEventKey makes.
func eventKeyLen(index string, tp TopicPartition) int {
	return 1 + len(index) + 1 + len(tp.Topic) + 1 + 4 + 8 + 1
}

func appendEventKey(dst []byte, index string, tp TopicPartition, offset int64, seq uint8) []byte {
	dst = append(dst, spaceEvent)
	dst = append(dst, index...)
	dst = append(dst, 0)
	dst = append(dst, tp.Topic...)
	dst = append(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(tp.Partition))
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	return append(dst, seq)
}

// EventBatch stages change-event mutations of any number of indexes and the
// ranges they reach, written at once by Commit. It belongs to one goroutine.
type EventBatch struct {
	s      *Store
	b      *pebble.Batch
	events int
}

// NewEventBatch starts a batch of change events. The batch keeps its buffer
// from one Commit to the next up to half a memtable (a larger batch goes to
// Pebble whole, as a memtable of its own), so that a feed committing a fetch
// at a time does not grow a fresh buffer for each.
func (s *Store) NewEventBatch() *EventBatch {
	return &EventBatch{s: s, b: s.db.NewBatch(pebble.WithMaxRetainedSizeBytes(int(s.opts.MemTableSize / 2)))}
}

// Add stages one mutation of the event at offset of tp for index: count
// copies of an entry (format.EntryCodec key and value; negative removes).
// seq tells the mutations of one event apart (an update's removal and
// addition); staging the same (tp, offset, seq) again replaces it.
func (b *EventBatch) Add(index string, tp TopicPartition, offset int64, seq uint8, entryKey, entryValue []byte, count int) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if err := checkTopic(tp); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("stage event of %s at offset %d: negative offset", tp, offset)
	}
	// Written in place in the batch: an event is staged with one copy.
	var head [2 * binary.MaxVarintLen64]byte
	h := binary.AppendUvarint(binary.AppendVarint(head[:0], int64(count)), uint64(len(entryKey)))
	op := b.b.SetDeferred(eventKeyLen(index, tp), len(h)+len(entryKey)+len(entryValue))
	appendEventKey(op.Key[:0], index, tp, offset, seq)
	copy(op.Value[copy(op.Value, h):], entryKey)
	copy(op.Value[len(h)+len(entryKey):], entryValue)
	if err := op.Finish(); err != nil {
		return fmt.Errorf("stage event of %s at offset %d: %w", tp, offset, err)
	}
	b.events++
	return nil
}

// SetRange records the staged range of tp for index, with the events of the
// batch.
func (b *EventBatch) SetRange(index string, tp TopicPartition, r EventRange) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if err := checkTopic(tp); err != nil {
		return err
	}
	if r.From < 0 || r.Through < r.From {
		return fmt.Errorf("event range of %s: [%d, %d) is not a range", tp, r.From, r.Through)
	}
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(r.From)), uint64(r.Through))
	if err := b.b.Set(eventPartitionPrefix(spaceEventRange, index, tp), v, nil); err != nil {
		return fmt.Errorf("record event range of %s: %w", tp, err)
	}
	return nil
}

// Len is the number of mutations added.
func (b *EventBatch) Len() int { return b.events }

// memtableEntryOverhead is what Pebble charges a memtable for each entry
// beyond its key and value: a skiplist node with a full tower of links
// (about 190 bytes) and the key's trailer. Pebble sizes a batch by these
// charges, not by its bytes, when it decides that a batch is too large for
// the memtable.
const memtableEntryOverhead = 200

// Full reports that the batch has grown as large as it should: a quarter of
// a memtable, counted as Pebble counts it (entries of change events are
// small, so the nodes of the memtable's skiplist weigh more than the events
// themselves). A batch of half a memtable or more would go to Pebble as a
// memtable of its own, flushed early and its buffer dropped; below that it
// goes into the memtable like any write and keeps its buffer for the next.
// A caller commits it at the next point its ranges can stand.
func (b *EventBatch) Full() bool {
	return uint64(b.b.Len())+uint64(b.b.Count())*memtableEntryOverhead >= b.s.opts.MemTableSize/4
}

// Commit writes the batch without waiting for the disk: the events and the
// ranges reach the disk together or not at all, and a seal that follows
// them (synced) takes them along, since Pebble's log is replayed in order.
// It fails with ErrDiskFull like every write of the store. The batch is
// empty afterwards and can be reused.
func (b *EventBatch) Commit() error {
	if b.s.closed.Load() {
		return ErrStoreClosed
	}
	if b.b.Empty() {
		return nil
	}
	if err := b.s.room(); err != nil {
		return fmt.Errorf("stage events: %w", err)
	}
	if err := b.b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("stage events: %w", err)
	}
	b.b.Reset()
	b.events = 0
	return nil
}

// Close releases the batch, dropping what was not committed.
func (b *EventBatch) Close() { _ = b.b.Close() }

// EventRanges returns the staged ranges of every partition for index.
func (s *Store) EventRanges(index string) (map[TopicPartition]EventRange, error) {
	if err := checkIndex(index); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrStoreClosed
	}
	prefix := indexPrefix(spaceEventRange, index)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, fmt.Errorf("read event ranges of %s: %w", index, err)
	}
	out := map[TopicPartition]EventRange{}
	for it.First(); it.Valid(); it.Next() {
		rest := it.Key()[len(prefix):]
		v, err := it.ValueAndErr()
		if err == nil && (len(rest) < 5 || rest[len(rest)-5] != 0 || len(v) != 16) {
			err = fmt.Errorf("malformed event range record %x", it.Key())
		}
		if err != nil {
			return nil, errors.Join(fmt.Errorf("read event ranges of %s: %w", index, err), it.Close())
		}
		tp := TopicPartition{Topic: string(rest[:len(rest)-5]), Partition: int32(binary.BigEndian.Uint32(rest[len(rest)-4:]))}
		out[tp] = EventRange{From: int64(binary.BigEndian.Uint64(v)), Through: int64(binary.BigEndian.Uint64(v[8:]))}
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("read event ranges of %s: %w", index, err)
	}
	return out, nil
}

// IterateEvents calls fn with the staged mutations of index read from tp at
// offsets from <= offset < to, in offset order.
func (s *Store) IterateEvents(index string, tp TopicPartition, from, to int64, fn func(entryKey, entryValue []byte, count int) error) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if err := checkTopic(tp); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrStoreClosed
	}
	if from < 0 || to <= from {
		return nil
	}
	lower := appendEventKey(nil, index, tp, from, 0)
	upper := appendEventKey(nil, index, tp, to, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("read staged events of %s %s: %w", index, tp, err)
	}
	for it.First(); it.Valid(); it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(fmt.Errorf("read staged events of %s %s: %w", index, tp, err), it.Close())
		}
		count, n := binary.Varint(v)
		keyLen, m := uint64(0), 0
		if n > 0 {
			keyLen, m = binary.Uvarint(v[n:])
		}
		if n <= 0 || m <= 0 || keyLen > uint64(len(v)-n-m) {
			return errors.Join(fmt.Errorf("read staged events of %s %s: malformed event record %x", index, tp, it.Key()), it.Close())
		}
		body := v[n+m:]
		if err := fn(body[:keyLen], body[keyLen:], int(count)); err != nil {
			return errors.Join(err, it.Close())
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("read staged events of %s %s: %w", index, tp, err)
	}
	return nil
}

// TrimEvents removes the staged events of index read from tp below offset
// below: an index commit covers them.
func (s *Store) TrimEvents(index string, tp TopicPartition, below int64) error {
	if err := checkIndex(index); err != nil {
		return err
	}
	if err := checkTopic(tp); err != nil {
		return err
	}
	if s.closed.Load() {
		return ErrStoreClosed
	}
	if below <= 0 {
		return nil
	}
	if err := s.room(); err != nil {
		return fmt.Errorf("trim staged events of %s %s: %w", index, tp, err)
	}
	start := eventPartitionPrefix(spaceEvent, index, tp)
	end := appendEventKey(nil, index, tp, below, 0)
	if err := s.db.DeleteRange(start, end, pebble.NoSync); err != nil {
		return fmt.Errorf("trim staged events of %s %s: %w", index, tp, err)
	}
	return nil
}
