package staging

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestPipeStagesWhatStagerWould feeds the same mutations to one stage
// through a Pipe and to another directly: both read back the same.
func TestPipeStagesWhatStagerWould(t *testing.T) {
	s := openTestStore(t, t.TempDir(), StoreOptions{BatchBytes: 8 << 10})
	adds, want := crashStage(42) // thousands of mutations, repeated entries among them
	direct, err := s.Stage("idx", 1)
	if err != nil {
		t.Fatal(err)
	}
	piped, err := s.Stage("idx", 2)
	if err != nil {
		t.Fatal(err)
	}
	pipe := NewPipe(piped)
	for _, a := range adds {
		if err := direct.Add(a.key, a.value, a.count); err != nil {
			t.Fatal(err)
		}
		// The caller reuses its buffers: the pipe must have copied them.
		k, v := slices.Clone(a.key), slices.Clone(a.value)
		if err := pipe.Add(k, v, a.count); err != nil {
			t.Fatal(err)
		}
		clear(k)
		clear(v)
	}
	if err := pipe.Close(); err != nil {
		t.Fatal(err)
	}
	if err := pipe.Add([]byte("k"), nil, 1); err == nil {
		t.Error("Add after Close succeeded")
	}
	for id, st := range map[int64]*Stager{1: direct, 2: piped} {
		if err := st.Seal(SealMeta{Ordinal: uint64(id)}); err != nil {
			t.Fatal(err)
		}
	}
	metas, err := s.Sealed("idx")
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || metas[0].Mutations != int64(len(adds)) || metas[1].Mutations != metas[0].Mutations || metas[1].NetCount != metas[0].NetCount {
		t.Fatalf("seals %+v, want two of %d mutations each", metas, len(adds))
	}
	got1, got2 := collect(t, s, "idx", 1), collect(t, s, "idx", 2)
	if !slices.Equal(got1, want) || !slices.Equal(got2, want) {
		t.Fatalf("read back %d mutations directly and %d through the pipe, want %d of each, the same", len(got1), len(got2), len(want))
	}
}

// TestPipeReportsWriteError: a mutation the Stager refuses (its store is
// closed) comes back from an Add soon after, and from Close.
func TestPipeReportsWriteError(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Stage("idx", 1)
	if err != nil {
		t.Fatal(err)
	}
	pipe := NewPipe(st)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var addErr error
	for i := 0; i < 100_000 && addErr == nil; i++ {
		addErr = pipe.Add([]byte("key-"+strconv.Itoa(i)), []byte("value"), 1)
	}
	if !errors.Is(addErr, ErrStoreClosed) {
		t.Errorf("Add after the store closed: %v, want ErrStoreClosed", addErr)
	}
	if err := pipe.Close(); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Close: %v, want ErrStoreClosed", err)
	}
}

// TestRecomputableSealAfterMachineCrash stages on a file system that
// forgets what was not synced when the machine crashes (Pebble's crashable
// MemFS), a stage of change events (synced seal) and then a table delta
// (Recomputable), and crashes with part of the unsynced data kept: the
// events' stage is always there whole; the table delta's is there whole or
// not sealed, never sealed with mutations missing. With nothing unsynced
// kept, the table delta's seal is gone: it did not wait for the disk.
func TestRecomputableSealAfterMachineCrash(t *testing.T) {
	// MemoryStageBytes -1: the table delta goes to Pebble, as one too big
	// for memory does (a memory stage never survives a crash).
	opts := StoreOptions{MemTableSize: 1 << 20, BatchBytes: 16 << 10, MemoryStageBytes: -1}
	r := rand.New(rand.NewPCG(3, 4))
	var kept, lost int
	for trial := range 12 {
		mem := vfs.NewCrashableMem()
		opts.FS = mem
		s, err := OpenStore("/stage", opts)
		if err != nil {
			t.Fatal(err)
		}
		events, table := int64(2*trial+1), int64(2*trial+2)
		for _, id := range []int64{events, table} {
			st, err := s.Stage("idx", id)
			if err != nil {
				t.Fatal(err)
			}
			if id == table {
				st.Recomputable()
			}
			adds, _ := crashStage(id)
			for _, a := range adds {
				if err := st.Add(a.key, a.value, a.count); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Seal(SealMeta{Ordinal: uint64(id)}); err != nil {
				t.Fatal(err)
			}
		}
		// Pebble writes its log from a buffer in the background: give it
		// the moment it takes, so that the crash has unsynced log to keep
		// part of (whether it did is not asserted: a process killed before
		// the write loses the buffer too).
		time.Sleep(20 * time.Millisecond)
		unsynced := []int{0, 30, 70, 100}[trial%4]
		crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: r})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		opts.FS = crashed
		s, err = OpenStore("/stage", opts)
		if err != nil {
			t.Fatalf("trial %d: reopen after the crash: %v", trial, err)
		}
		metas, err := s.Sealed("idx")
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, m := range metas {
			ids = append(ids, m.SourceSnapshotID)
			if _, want := crashStage(m.SourceSnapshotID); !slices.Equal(collect(t, s, "idx", m.SourceSnapshotID), want) {
				t.Errorf("trial %d (%d%% of unsynced data kept): sealed stage %d lacks mutations", trial, unsynced, m.SourceSnapshotID)
			}
		}
		if !slices.Contains(ids, events) {
			t.Errorf("trial %d: the synced seal of stage %d was lost: sealed %v", trial, events, ids)
		}
		if slices.Contains(ids, table) {
			kept++
		} else {
			lost++
		}
		if unsynced == 0 && slices.Contains(ids, table) {
			t.Errorf("trial %d: the recomputable stage %d is sealed after a crash that kept nothing unsynced: its seal waited for the disk", trial, table)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("recomputable stages: %d kept whole, %d lost whole", kept, lost)
}
