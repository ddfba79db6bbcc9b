package staging

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/iceberg-go"

	"github.com/streamidx/streamidx/format"
)

func openTestStore(t *testing.T, dir string, opts StoreOptions) *Store {
	t.Helper()
	s, err := OpenStore(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return s
}

// staged is one mutation as Iterate reports it.
type staged struct {
	key, value string
	count      int
}

func collect(t *testing.T, s *Store, index string, snap int64) []staged {
	t.Helper()
	var out []staged
	err := s.Iterate(index, snap, func(k, v []byte, count int) error {
		out = append(out, staged{string(k), string(v), count})
		return nil
	})
	if err != nil {
		t.Fatalf("iterate %s@%d: %v", index, snap, err)
	}
	return out
}

func mustStage(t *testing.T, s *Store, index string, snap int64) *Stager {
	t.Helper()
	st, err := s.Stage(index, snap)
	if err != nil {
		t.Fatalf("stage %s@%d: %v", index, snap, err)
	}
	return st
}

func mustAdd(t *testing.T, st *Stager, key, value []byte, count int) {
	t.Helper()
	if err := st.Add(key, value, count); err != nil {
		t.Fatal(err)
	}
}

// storeTestIndex is an index of identity id and a materialized
// truncate(2, name), clustered by id.
func storeTestIndex(t *testing.T) *format.EntryCodec {
	t.Helper()
	src := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
		iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String})
	md := &format.Metadata{IdentityFields: []int{1}, MaterializedFields: []format.ExprField{
		{FieldID: 1000, Type: format.ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: format.NewApply("truncate", format.IntLit(2), format.Ref{ID: 2})},
	}, ClusterSpec: []int{1}}
	is, err := format.NewIndexSchema(md, src)
	if err != nil {
		t.Fatal(err)
	}
	return format.NewEntryCodec(is)
}

func encodeEntry(t *testing.T, c *format.EntryCodec, e format.Key) (key, value []byte) {
	t.Helper()
	key, err := c.AppendKey(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	value, err = c.AppendValue(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	return key, value
}

// TestStoreIterateInClusterOrder stages entries in random order, with
// repeats, and reads them back in cluster order with their counts summed.
func TestStoreIterateInClusterOrder(t *testing.T) {
	codec := storeTestIndex(t)
	s := openTestStore(t, t.TempDir(), StoreOptions{BatchBytes: 512})
	r := rand.New(rand.NewPCG(5, 6))
	want := map[string]int{} // by encoded value
	type add struct {
		e     format.Key
		count int
	}
	var adds []add
	for i := range 300 {
		id := int64(r.IntN(100)) - 50
		var trunc any = []string{"aa", "bb", "cc"}[r.IntN(3)]
		if i%17 == 0 {
			trunc = nil
		}
		count := []int{1, -1, 2}[r.IntN(3)]
		adds = append(adds, add{format.Key{id, trunc}, count})
	}
	// The materialized value lies outside the key (cluster id, identity
	// id): two entries of one key.
	adds = append(adds, add{format.Key{int64(7), "ab"}, 1}, add{format.Key{int64(7), "cd"}, -1})
	// Counts that cancel out.
	adds = append(adds, add{format.Key{int64(1000), "zz"}, 1}, add{format.Key{int64(1000), "zz"}, -1})
	st := mustStage(t, s, "orders_by_id", 42)
	net := 0
	for _, a := range adds {
		k, v := encodeEntry(t, codec, a.e)
		mustAdd(t, st, k, v, a.count)
		want[string(v)] += a.count
		net += a.count
	}
	if got, err := s.Sealed("orders_by_id"); err != nil || len(got) != 0 {
		t.Fatalf("before Seal: Sealed = %v, %v; want nothing", got, err)
	}
	if err := s.Iterate("orders_by_id", 42, func([]byte, []byte, int) error { return nil }); !errors.Is(err, ErrStageNotSealed) {
		t.Fatalf("Iterate before Seal: %v, want ErrStageNotSealed", err)
	}
	if err := st.Seal(SealMeta{Ordinal: 9, SequenceNumber: 9, TimestampMs: 1234, Offsets: map[string]string{"commits/0": "17"}}); err != nil {
		t.Fatal(err)
	}
	got := collect(t, s, "orders_by_id", 42)
	var prev format.Key
	seen := map[string]int{}
	for i, g := range got {
		e, err := codec.DecodeValue([]byte(g.value))
		if err != nil {
			t.Fatal(err)
		}
		if k, _ := encodeEntry(t, codec, e); !bytes.Equal(k, []byte(g.key)) {
			t.Errorf("entry %v came with key %x", e, g.key)
		}
		cluster := codec.ClusterKey(nil, e)
		if i > 0 && format.CompareKeys([]iceberg.Type{iceberg.PrimitiveTypes.Int64}, codec.ClusterKey(nil, prev), cluster) > 0 {
			t.Errorf("entry %v after %v: not in cluster order", e, prev)
		}
		prev = e
		seen[g.value] = g.count
	}
	for v, c := range want {
		if c == 0 {
			continue
		}
		if seen[v] != c {
			e, _ := codec.DecodeValue([]byte(v))
			t.Errorf("entry %v: count %d, want %d", e, seen[v], c)
		}
	}
	for v, c := range seen {
		if want[v] == 0 {
			e, _ := codec.DecodeValue([]byte(v))
			t.Errorf("entry %v reported with count %d; its counts cancel out", e, c)
		}
	}
	sealed, err := s.Sealed("orders_by_id")
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := SealMeta{Ordinal: 9, SourceSnapshotID: 42, SequenceNumber: 9, TimestampMs: 1234, Offsets: map[string]string{"commits/0": "17"},
		Mutations: int64(len(adds)), NetCount: int64(net)}
	if len(sealed) != 1 || fmt.Sprint(sealed[0]) != fmt.Sprint(wantMeta) {
		t.Errorf("Sealed = %+v, want [%+v]", sealed, wantMeta)
	}
}

// TestStoreStagesAreSeparate checks that indexes whose names share a prefix
// and neighbouring snapshot IDs do not see each other's mutations, that
// Sealed orders by ordinal, and that Drop removes exactly one stage.
func TestStoreStagesAreSeparate(t *testing.T) {
	s := openTestStore(t, t.TempDir(), StoreOptions{})
	stages := []struct {
		index   string
		snap    int64
		ordinal uint64
	}{{"a", 5, 3}, {"a", 6, 1}, {"a", -1, 2}, {"ab", 5, 1}, {"a\x01", 5, 1}}
	for i, sg := range stages {
		st := mustStage(t, s, sg.index, sg.snap)
		mustAdd(t, st, []byte{byte(i)}, []byte(sg.index), 1)
		if err := st.Seal(SealMeta{Ordinal: sg.ordinal}); err != nil {
			t.Fatal(err)
		}
	}
	for i, sg := range stages {
		got := collect(t, s, sg.index, sg.snap)
		if len(got) != 1 || got[0] != (staged{string([]byte{byte(i)}), sg.index, 1}) {
			t.Errorf("%q@%d holds %+v", sg.index, sg.snap, got)
		}
	}
	sealed, err := s.Sealed("a")
	if err != nil {
		t.Fatal(err)
	}
	var order []int64
	for _, m := range sealed {
		order = append(order, m.SourceSnapshotID)
	}
	if !slices.Equal(order, []int64{6, -1, 5}) {
		t.Errorf("Sealed(a) lists snapshots %v, want [6 -1 5] (ordinal order)", order)
	}
	if err := s.Drop("a", 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Drop("a", 5); err != nil {
		t.Errorf("second Drop: %v", err)
	}
	if err := s.Iterate("a", 5, func([]byte, []byte, int) error { return nil }); !errors.Is(err, ErrStageNotSealed) {
		t.Errorf("Iterate after Drop: %v, want ErrStageNotSealed", err)
	}
	if got := collect(t, s, "a", 6); len(got) != 1 {
		t.Errorf("a@6 after dropping a@5: %+v", got)
	}
	if got := collect(t, s, "ab", 5); len(got) != 1 {
		t.Errorf("ab@5 after dropping a@5: %+v", got)
	}
	// A dropped stage can be staged again, from nothing.
	st := mustStage(t, s, "a", 5)
	mustAdd(t, st, []byte("k"), []byte("v"), -1)
	if err := st.Seal(SealMeta{Ordinal: 3}); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s, "a", 5); len(got) != 1 || got[0] != (staged{"k", "v", -1}) {
		t.Errorf("restaged a@5 holds %+v", got)
	}
}

// TestStorePartialStageAfterReopen leaves a stage unsealed across a
// restart: it stays invisible, is reported, and restaging or abandoning it
// discards what it held.
func TestStorePartialStageAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, StoreOptions{BatchBytes: 256})
	if err != nil {
		t.Fatal(err)
	}
	st := mustStage(t, s, "idx", 11)
	for i := range 200 {
		mustAdd(t, st, fmt.Appendf(nil, "key%04d", i), []byte("v"), 1)
	}
	if got, err := s.Unsealed(); err != nil || len(got) != 0 {
		t.Errorf("Unsealed while the Stager runs = %v, %v; want nothing", got, err)
	}
	done := mustStage(t, s, "idx", 10)
	mustAdd(t, done, []byte("k"), []byte("v"), 1)
	if err := done.Seal(SealMeta{Ordinal: 1}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // st is never sealed
		t.Fatal(err)
	}
	if err := st.Add([]byte("late"), nil, 1); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Add after Close: %v, want ErrStoreClosed", err)
	}

	s = openTestStore(t, dir, StoreOptions{})
	partial, err := s.Unsealed()
	if err != nil {
		t.Fatal(err)
	}
	if len(partial) != 1 || partial[0] != (StageRef{"idx", 11}) {
		t.Fatalf("Unsealed = %v, want [idx@11]", partial)
	}
	if sealed, _ := s.Sealed("idx"); len(sealed) != 1 || sealed[0].SourceSnapshotID != 10 {
		t.Errorf("Sealed = %+v, want only idx@10", sealed)
	}
	if err := s.Iterate("idx", 11, func([]byte, []byte, int) error { return nil }); !errors.Is(err, ErrStageNotSealed) {
		t.Errorf("Iterate of a partial stage: %v, want ErrStageNotSealed", err)
	}
	// Restaging starts from nothing.
	st = mustStage(t, s, "idx", 11)
	mustAdd(t, st, []byte("key0001"), []byte("new"), 1)
	if err := st.Seal(SealMeta{Ordinal: 2}); err != nil {
		t.Fatal(err)
	}
	if got := collect(t, s, "idx", 11); len(got) != 1 || got[0] != (staged{"key0001", "new", 1}) {
		t.Errorf("restaged stage holds %+v, want only its new mutation", got)
	}
	// Abandon removes a partial stage and refuses a sealed one.
	st = mustStage(t, s, "idx", 12)
	mustAdd(t, st, []byte("x"), nil, 1)
	if err := s.Abandon("idx", 12); !errors.Is(err, ErrStageBusy) {
		t.Errorf("Abandon of a stage being written: %v, want ErrStageBusy", err)
	}
	if err := st.Abort(); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Unsealed(); len(got) != 0 {
		t.Errorf("Unsealed after Abort = %v", got)
	}
	if err := s.Abandon("idx", 11); !errors.Is(err, ErrStageSealed) {
		t.Errorf("Abandon of a sealed stage: %v, want ErrStageSealed", err)
	}
}

func TestStoreStageErrors(t *testing.T) {
	s, err := OpenStore(t.TempDir(), StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := mustStage(t, s, "i", 1)
	if _, err := s.Stage("i", 1); !errors.Is(err, ErrStageBusy) {
		t.Errorf("second Stager of one stage: %v, want ErrStageBusy", err)
	}
	if err := st.Seal(SealMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := st.Add([]byte("k"), nil, 1); err == nil {
		t.Error("Add after Seal succeeded")
	}
	if _, err := s.Stage("i", 1); !errors.Is(err, ErrStageSealed) {
		t.Errorf("Stage of a sealed stage: %v, want ErrStageSealed", err)
	}
	for _, bad := range []string{"", "a\x00b"} {
		if _, err := s.Stage(bad, 1); err == nil {
			t.Errorf("Stage(%q) succeeded", bad)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Stage("i", 2); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Stage after Close: %v, want ErrStoreClosed", err)
	}
	if _, err := s.Sealed("i"); !errors.Is(err, ErrStoreClosed) {
		t.Errorf("Sealed after Close: %v, want ErrStoreClosed", err)
	}
}

// BenchmarkStoreStage stages entries of the shape of a long key with a
// string and a location, and seals them.
func BenchmarkStoreStage(b *testing.B) {
	s, err := OpenStore(b.TempDir(), StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := rand.New(rand.NewPCG(1, 1))
	key := make([]byte, 0, 64)
	value := make([]byte, 0, 128)
	const perStage = 100_000
	b.ResetTimer()
	var st *Stager
	for i := range b.N {
		if i%perStage == 0 {
			if st != nil {
				if err := st.Seal(SealMeta{Ordinal: uint64(i)}); err != nil {
					b.Fatal(err)
				}
			}
			if st, err = s.Stage("bench", int64(i)); err != nil {
				b.Fatal(err)
			}
		}
		key = fmt.Appendf(key[:0], "%016x%s", r.Uint64(), "file:///warehouse/t/data/00001.parquet")
		value = fmt.Appendf(value[:0], "%s-customer-name-%d", key, i)
		if err := st.Add(key, value, 1); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Seal(SealMeta{Ordinal: uint64(b.N)}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
