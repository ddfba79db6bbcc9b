package staging

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// memStageMutations makes n mutations of distinct entries (see
// randomMutations) and what Iterate must give for them.
func memStageMutations(seed uint64, n int) (adds []crashAdd, want []staged) {
	return randomMutations(rand.New(rand.NewPCG(seed, 11)), n, 20, 40)
}

// stageRecomputable stages adds as a recomputable stage of snap and seals it.
func stageRecomputable(t *testing.T, s *Store, snap int64, adds []crashAdd, seal bool) {
	t.Helper()
	st := mustStage(t, s, "idx", snap)
	st.Recomputable()
	for _, a := range adds {
		if err := st.Add(a.key, a.value, a.count); err != nil {
			t.Fatal(err)
		}
	}
	if !seal {
		if err := st.Abort(); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := st.Seal(SealMeta{Ordinal: uint64(snap)}); err != nil {
		t.Fatal(err)
	}
}

// TestRecomputableStagesInMemory: a recomputable stage reads back as a
// Pebble stage of the same mutations does (sorted, summed, cancelled ones
// left out), whether it stays in memory, outgrows the memory budget half
// way and moves to Pebble, or has no budget at all; it is sealed, listed,
// refused a second staging and an abandon, and dropped like any other, and
// gives its memory back when dropped. A memory stage does not survive the
// store, and leaves no partial stage behind.
func TestRecomputableStagesInMemory(t *testing.T) {
	adds, want := memStageMutations(5, 40000)
	for _, c := range []struct {
		name     string
		budget   int64
		inMemory bool
	}{
		{"in memory", 0, true},
		{"outgrows 1 MiB", 1 << 20, false},
		{"no budget", -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := OpenStore(dir, StoreOptions{MemTableSize: 1 << 20, BatchBytes: 64 << 10, MemoryStageBytes: c.budget})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			stageRecomputable(t, s, 7, adds, true)
			if got := s.memStageOf("idx", 7) != nil; got != c.inMemory {
				t.Fatalf("stage held in memory: %v, want %v", got, c.inMemory)
			}
			if c.inMemory && s.memBytes < int64(len(adds))*40 {
				t.Errorf("memory budget taken by %d mutations: %d bytes", len(adds), s.memBytes)
			}
			if !c.inMemory && s.memBytes != 0 {
				t.Errorf("a stage in Pebble holds %d bytes of the memory budget", s.memBytes)
			}
			metas, err := s.Sealed("idx")
			if err != nil {
				t.Fatal(err)
			}
			var net int64
			for _, w := range want {
				net += int64(w.count)
			}
			if len(metas) != 1 || metas[0].SourceSnapshotID != 7 || metas[0].Ordinal != 7 || metas[0].Mutations != int64(len(adds)) || metas[0].NetCount != net {
				t.Errorf("sealed: %+v, want stage 7, ordinal 7, %d mutations, net count %d", metas, len(adds), net)
			}
			if got := collect(t, s, "idx", 7); !slices.Equal(got, want) {
				t.Errorf("iterate: %d mutations, want %d (first difference at %s)", len(got), len(want), firstDiff(got, want))
			}
			if _, err := s.Stage("idx", 7); !errors.Is(err, ErrStageSealed) {
				t.Errorf("stage a sealed stage again: %v, want ErrStageSealed", err)
			}
			if err := s.Abandon("idx", 7); !errors.Is(err, ErrStageSealed) {
				t.Errorf("abandon a sealed stage: %v, want ErrStageSealed", err)
			}
			if partial, err := s.Unsealed(); err != nil || len(partial) != 0 {
				t.Errorf("unsealed: %v %v, want none", partial, err)
			}
			if err := s.Drop("idx", 7); err != nil {
				t.Fatal(err)
			}
			if metas, _ := s.Sealed("idx"); len(metas) != 0 || s.memBytes != 0 {
				t.Errorf("after the drop: sealed %v, %d bytes of the memory budget held", metas, s.memBytes)
			}
			if err := s.Iterate("idx", 7, func([]byte, []byte, int) error { return nil }); !errors.Is(err, ErrStageNotSealed) {
				t.Errorf("iterate a dropped stage: %v, want ErrStageNotSealed", err)
			}

			// Sealed again and the store closed: a memory stage is gone,
			// with nothing partial left; a Pebble one is there.
			stageRecomputable(t, s, 8, adds, true)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if s, err = OpenStore(dir, StoreOptions{MemoryStageBytes: c.budget}); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			metas, err = s.Sealed("idx")
			if err != nil {
				t.Fatal(err)
			}
			partial, err := s.Unsealed()
			if err != nil {
				t.Fatal(err)
			}
			if c.inMemory && (len(metas) != 0 || len(partial) != 0) {
				t.Errorf("a memory stage after a restart: sealed %v, partial %v; want neither", metas, partial)
			}
			if !c.inMemory && (len(metas) != 1 || !slices.Equal(collect(t, s, "idx", 8), want)) {
				t.Errorf("a Pebble stage after a restart: sealed %v; want stage 8 whole", metas)
			}
		})
	}
}

// TestMemoryStagesShareTheBudget: the memory budget is the store's, not a
// stage's: a sealed memory stage keeps its share until dropped, so the
// next stage that does not fit beside it goes to Pebble, and one aborted
// gives its share back.
func TestMemoryStagesShareTheBudget(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{MemoryStageBytes: 6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	adds, want := memStageMutations(9, 40000) // about 3.5 MiB in memory
	stage := func(snap int64, seal bool) { stageRecomputable(t, s, snap, adds, seal) }
	stage(1, true)
	stage(2, true)
	if s.memStageOf("idx", 1) == nil || s.memStageOf("idx", 2) != nil {
		t.Errorf("in memory: stage 1 %v, stage 2 %v; want only stage 1", s.memStageOf("idx", 1) != nil, s.memStageOf("idx", 2) != nil)
	}
	for _, snap := range []int64{1, 2} {
		if got := collect(t, s, "idx", snap); !slices.Equal(got, want) {
			t.Errorf("stage %d: %d mutations, want %d", snap, len(got), len(want))
		}
	}
	held := s.memBytes
	stage(3, false)
	if s.memBytes != held {
		t.Errorf("an aborted stage kept memory: %d bytes held, %d before it", s.memBytes, held)
	}
	for _, snap := range []int64{1, 2} {
		if err := s.Drop("idx", snap); err != nil {
			t.Fatal(err)
		}
	}
	if s.memBytes != 0 {
		t.Errorf("%d bytes held after every stage was dropped", s.memBytes)
	}
	stage(4, true)
	if s.memStageOf("idx", 4) == nil {
		t.Error("with the budget free again, a stage that fits is not held in memory")
	}
}

func firstDiff(a, b []staged) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprint(i)
		}
	}
	return fmt.Sprint(min(len(a), len(b)))
}

// TestDroppedMemoryStageBuffersReused: the next memory stage fills the
// buffers of one dropped before it, and never those of one still being
// iterated: a stage dropped and followed by another during an Iterate
// still reads back whole, and the one after it is whole too.
func TestDroppedMemoryStageBuffersReused(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	adds1, want1 := memStageMutations(21, 20000)
	adds2, want2 := memStageMutations(22, 20000)

	stageRecomputable(t, s, 1, adds1, true)
	first := unsafe.SliceData(s.memStageOf("idx", 1).buf)
	if err := s.Drop("idx", 1); err != nil {
		t.Fatal(err)
	}
	stageRecomputable(t, s, 2, adds2, true)
	if got := unsafe.SliceData(s.memStageOf("idx", 2).buf); got != first {
		t.Error("the stage after a dropped one did not reuse its buffer")
	}
	if got := collect(t, s, "idx", 2); !slices.Equal(got, want2) {
		t.Errorf("stage 2 on a reused buffer: %d mutations, want %d (first difference at %s)", len(got), len(want2), firstDiff(got, want2))
	}

	// Dropped while iterated, and another staged meanwhile.
	var got []staged
	err = s.Iterate("idx", 2, func(k, v []byte, count int) error {
		if len(got) == 0 {
			if err := s.Drop("idx", 2); err != nil {
				return err
			}
			stageRecomputable(t, s, 3, adds1, true)
		}
		got = append(got, staged{string(k), string(v), count})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want2) {
		t.Errorf("stage 2 dropped during its iteration: %d mutations, want %d (first difference at %s)", len(got), len(want2), firstDiff(got, want2))
	}
	if got := collect(t, s, "idx", 3); !slices.Equal(got, want1) {
		t.Errorf("stage 3, staged during that iteration: %d mutations, want %d (first difference at %s)", len(got), len(want1), firstDiff(got, want1))
	}
	// The iterated stage's buffers went back once it was done.
	if err := s.Drop("idx", 3); err != nil {
		t.Fatal(err)
	}
	if n := len(s.memSpare); n != memSpares {
		t.Errorf("%d spare buffers kept after the iterated stage ended and the next was dropped, want %d", n, memSpares)
	}
}

// BenchmarkMemoryStage stages, seals, reads and drops the stage of a tail
// upsert of 10,000 keys on a primary-key index with `_file` and `_pos`:
// each key's old entry deleted and its new one inserted, in the order a
// delta emits them (the deletes by data file, then the inserts).
func BenchmarkMemoryStage(b *testing.B) {
	s, err := OpenStore(b.TempDir(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const keys = 10_000
	type mutation struct {
		key, val []byte
		count    int
	}
	r := rand.New(rand.NewPCG(1, 2))
	var muts []mutation
	for gen, count := range []int{-1, 1} {
		for i := range keys {
			id := 9_990_000 + int64(r.IntN(keys*4)) // the tail, as old entries lie: not in key order
			if gen == 1 {
				id = 9_990_000 + int64(i)
			}
			// As format encodes them: a tag byte and the big-endian
			// value with its sign bit flipped, then the value's fields.
			key := binary.BigEndian.AppendUint64([]byte{0x01}, uint64(id)^1<<63)
			val := fmt.Appendf([]byte{0x01}, "file:///warehouse/bench.db/orders/data/%05d-0-6f1c2a7e-9b3d-4d0e-8f0a-2b6c9d1e4f57-00001.parquet\x00", gen)
			val = binary.BigEndian.AppendUint64(append(val, 0x01), uint64(i)^1<<63)
			muts = append(muts, mutation{key, val, count})
		}
	}
	snap := int64(0)
	for b.Loop() {
		snap++
		st, err := s.Stage("bench", snap)
		if err != nil {
			b.Fatal(err)
		}
		st.Recomputable()
		for _, m := range muts {
			if err := st.Add(m.key, m.val, m.count); err != nil {
				b.Fatal(err)
			}
		}
		if err := st.Seal(SealMeta{Ordinal: uint64(snap)}); err != nil {
			b.Fatal(err)
		}
		if err := s.Iterate("bench", snap, func([]byte, []byte, int) error { return nil }); err != nil {
			b.Fatal(err)
		}
		if err := s.Drop("bench", snap); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSpareBuffersWaitForABudgetHalfFree: a dropped stage's buffers are
// filled again only while the store's memory budget is at most half
// taken, so that a small stage beside large ones does not take a spare's
// share of the budget and go to Pebble for it.
func TestSpareBuffersWaitForABudgetHalfFree(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{MemoryStageBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	small, wantSmall := memStageMutations(31, 5000)
	large, _ := memStageMutations(32, 100000)

	stageRecomputable(t, s, 1, large, true) // holds more than half the budget
	if s.memStageOf("idx", 1) == nil || s.memBytes <= 8<<20 {
		t.Fatalf("the large stage holds %d bytes of a 16 MiB budget in memory, want over half", s.memBytes)
	}
	stageRecomputable(t, s, 2, small, true)
	spare := unsafe.SliceData(s.memStageOf("idx", 2).buf)
	if err := s.Drop("idx", 2); err != nil {
		t.Fatal(err)
	}
	if len(s.memSpare) != 1 {
		t.Fatalf("%d spare buffers after a small stage was dropped, want 1", len(s.memSpare))
	}
	stageRecomputable(t, s, 3, small, true)
	if got := unsafe.SliceData(s.memStageOf("idx", 3).buf); got == spare || len(s.memSpare) != 1 {
		t.Error("a stage took a spare buffer while the budget was more than half taken")
	}
	for _, snap := range []int64{1, 3} {
		if err := s.Drop("idx", snap); err != nil {
			t.Fatal(err)
		}
	}
	var spares []*byte // stage 2's, then stage 3's
	for _, sp := range s.memSpare {
		spares = append(spares, unsafe.SliceData(sp.buf))
	}
	stageRecomputable(t, s, 4, small, true)
	if got := unsafe.SliceData(s.memStageOf("idx", 4).buf); len(spares) != memSpares || spares[0] != spare || got != spares[1] {
		t.Error("with the budget free again, the next stage did not take the last spare buffer")
	}
	if got := collect(t, s, "idx", 4); !slices.Equal(got, wantSmall) {
		t.Errorf("stage 4 on a reused buffer: %d mutations, want %d (first difference at %s)", len(got), len(wantSmall), firstDiff(got, wantSmall))
	}
}
