package staging

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// DefaultMemoryStageBytes is the default of StoreOptions.MemoryStageBytes.
const DefaultMemoryStageBytes = 64 << 20

// memQuantum is how much of the memory budget a Stager takes at a time.
const memQuantum = 1 << 20

// memRecordBytes is what a staged mutation costs in memory beside its key
// and value: its memRecord.
const memRecordBytes = int64(unsafe.Sizeof(memRecord{}))

// A memory stage holds a recomputable stage (Stager.Recomputable) in the
// process instead of Pebble: its mutations in one buffer, sorted and summed
// at the seal. Such a stage has nothing to survive (its source gives it
// again), so it need not pass through Pebble's log and memtable: staging the
// 20,000 mutations of a 10,000-key upsert that way took 30 of the 50 ms the
// delta took at 10M rows. A stage whose mutations outgrow the store's
// memory budget (StoreOptions.MemoryStageBytes, shared by every memory
// stage of the store) moves to Pebble as it goes, as every stage was before;
// a crash loses a memory stage whole, which is one of the two outcomes a
// recomputable stage had already.
type memStage struct {
	index    string
	buf      []byte      // entry key, then entry value, of each record
	recs     []memRecord // in Add order until the seal, then sorted, summed and non-zero
	reserved int64       // of the store's memory budget
	meta     SealMeta    // set at the seal
	readers  int         // iterations in progress (Store.memMu)
}

// memSpares is how many dropped memory stages' buffers a store keeps for
// the next stages to fill again. A stage of a tail upsert at 10M rows
// holds some 6 MB; built up by doubling in fresh memory on every update,
// the copies and the page faults of its growth cost 11 ms of a 60 ms
// update in a daemon's CPU profile (2026-12-04).
const memSpares = 2

// memSpareMaxBytes bounds a kept buffer against the store's budget: one
// that a large stage grew stays with the garbage collector.
func (s *Store) memSpareMaxBytes() int64 { return s.opts.MemoryStageBytes / 4 }

// newMemStage starts a memory stage of index, on the buffers of a dropped
// one when the store keeps any and its budget is at most half taken: a
// stage takes its share of the budget by the capacity it holds, so a
// large spare in a busy store would send the stage to Pebble at its first
// mutation.
func (s *Store) newMemStage(index string) *memStage {
	m := &memStage{index: index}
	s.memMu.Lock()
	if n := len(s.memSpare); n > 0 && s.memBytes+s.memSpareMaxBytes() <= s.opts.MemoryStageBytes/2 {
		sp := s.memSpare[n-1]
		s.memSpare[n-1] = nil
		s.memSpare = s.memSpare[:n-1]
		m.buf, m.recs = sp.buf[:0], sp.recs[:0]
	}
	s.memMu.Unlock()
	return m
}

// recycle keeps the buffers of a memory stage nobody reads any more for the
// next one (Store.memMu held).
func (s *Store) recycle(m *memStage) {
	held := int64(cap(m.buf)) + int64(cap(m.recs))*memRecordBytes
	if m.readers > 0 || len(s.memSpare) >= memSpares || held > s.memSpareMaxBytes() || s.closed.Load() {
		return
	}
	s.memSpare = append(s.memSpare, &memStage{buf: m.buf, recs: m.recs})
	m.buf, m.recs = nil, nil
}

type memRecord struct {
	off           uint32
	keyLen, valLn uint32
	count         int64
}

func (r memRecord) bytes(buf []byte) []byte { return buf[r.off : r.off+r.keyLen+r.valLn] }

// reserveMem takes n bytes of the memory budget, or reports that there are
// not n left.
func (s *Store) reserveMem(n int64) bool {
	s.memMu.Lock()
	defer s.memMu.Unlock()
	if s.memBytes+n > s.opts.MemoryStageBytes {
		return false
	}
	s.memBytes += n
	return true
}

func (s *Store) releaseMem(n int64) {
	s.memMu.Lock()
	s.memBytes -= n
	s.memMu.Unlock()
}

// memStageOf returns the sealed memory stage of (index, snap), or nil.
func (s *Store) memStageOf(index string, snap int64) *memStage {
	s.memMu.Lock()
	defer s.memMu.Unlock()
	return s.memStages[memKey(index, snap)]
}

// iterateMem iterates the sealed memory stage of (index, snap), whose
// buffers are not reused while it does; found is false when there is none.
func (s *Store) iterateMem(index string, snap int64, fn func(entryKey, entryValue []byte, count int) error) (found bool, err error) {
	k := memKey(index, snap)
	s.memMu.Lock()
	m := s.memStages[k]
	if m != nil {
		m.readers++
	}
	s.memMu.Unlock()
	if m == nil {
		return false, nil
	}
	defer func() {
		s.memMu.Lock()
		m.readers--
		if s.memStages[k] != m { // dropped meanwhile
			s.recycle(m)
		}
		s.memMu.Unlock()
	}()
	return true, m.iterate(fn)
}

func memKey(index string, snap int64) string { return string(stagePrefix(spaceStage, index, snap)) }

// memAdd stages a mutation in memory. ok is false when the memory budget
// is spent and the stage must move to Pebble (spill); added says whether
// the mutation is in the memory stage all the same (spill moves it).
func (st *Stager) memAdd(entryKey, entryValue []byte, count int) (ok, added bool) {
	m := st.mem
	if len(m.buf)+len(entryKey)+len(entryValue) > math.MaxUint32 {
		return false, false
	}
	off := len(m.buf)
	m.buf = append(append(m.buf, entryKey...), entryValue...)
	m.recs = append(m.recs, memRecord{off: uint32(off), keyLen: uint32(len(entryKey)), valLn: uint32(len(entryValue)), count: int64(count)})
	for held := int64(cap(m.buf)) + int64(cap(m.recs))*memRecordBytes; m.reserved < held; {
		if !st.s.reserveMem(memQuantum) {
			return false, true
		}
		m.reserved += memQuantum
	}
	return true, true
}

// spill moves a memory stage to Pebble: its mutations so far go into the
// Stager's batch, and the Stager writes to Pebble from then on.
func (st *Stager) spill() error {
	m := st.mem
	st.mem = nil
	defer st.s.releaseMem(m.reserved)
	for _, r := range m.recs {
		b := r.bytes(m.buf)
		if err := st.pebbleAdd(b[:r.keyLen], b[r.keyLen:], int(r.count)); err != nil {
			return err
		}
	}
	return nil
}

// memSeal seals a memory stage: its records sorted as Pebble would order
// them, equal entries summed, cancelled ones dropped. The stage's open
// record in Pebble goes (unsynced: if a crash keeps it, the stage is
// partial and redone, as it would be anyway).
func (st *Stager) memSeal(meta SealMeta) error {
	m := st.mem
	m.recs = sortRecords(m.recs, m.buf)
	out := m.recs[:0]
	for _, r := range m.recs {
		if n := len(out); n > 0 && out[n-1].keyLen == r.keyLen && bytes.Equal(out[n-1].bytes(m.buf), r.bytes(m.buf)) {
			out[n-1].count += r.count
			continue
		}
		out = append(out, r)
	}
	m.recs = slices.DeleteFunc(out, func(r memRecord) bool { return r.count == 0 })
	if err := st.s.room(); err != nil {
		return fmt.Errorf("seal stage %s@%d: %w", st.index, st.snap, err)
	}
	b := st.s.db.NewBatch()
	err := b.Delete(st.stageKey, nil)
	if err == nil {
		err = b.Commit(pebble.NoSync)
	}
	if err = joinClose(err, b); err != nil {
		return fmt.Errorf("seal stage %s@%d: %w", st.index, st.snap, err)
	}
	m.meta = meta
	st.s.memMu.Lock()
	st.s.memStages[memKey(st.index, st.snap)] = m
	st.s.memMu.Unlock()
	st.mem = nil
	return nil
}

func joinClose(err error, b *pebble.Batch) error {
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	return err
}

// iterate calls fn with the sealed stage's mutations (see Store.Iterate).
func (m *memStage) iterate(fn func(entryKey, entryValue []byte, count int) error) error {
	for _, r := range m.recs {
		b := r.bytes(m.buf)
		if err := fn(b[:r.keyLen], b[r.keyLen:], int(r.count)); err != nil {
			return err
		}
	}
	return nil
}

// dropMem removes a sealed memory stage; false when there is none.
func (s *Store) dropMem(index string, snap int64) bool {
	s.memMu.Lock()
	k := memKey(index, snap)
	m := s.memStages[k]
	delete(s.memStages, k)
	if m != nil {
		s.recycle(m)
	}
	s.memMu.Unlock()
	if m == nil {
		return false
	}
	s.releaseMem(m.reserved)
	return true
}
