package extsort

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os"
	"testing"
)

func sortAndCollect(t *testing.T, budget int64, keys [][]byte) (got [][]byte, spilled bool) {
	t.Helper()
	dir := t.TempDir()
	s := NewSorter(dir, budget, nil)
	for i, k := range keys {
		v := binary.BigEndian.AppendUint32(nil, uint32(i))
		if err := s.Add(k, v); err != nil {
			t.Fatal(err)
		}
	}
	var prevKey []byte
	var prevIdx uint32
	err := s.Iterate(func(k, v []byte) error {
		idx := binary.BigEndian.Uint32(v)
		if !bytes.Equal(k, keys[idx]) {
			t.Fatalf("value %d came with key %x, was added with %x", idx, k, keys[idx])
		}
		if c := bytes.Compare(prevKey, k); got != nil && (c > 0 || c == 0 && idx < prevIdx) {
			t.Fatalf("out of order: %x (#%d) after %x (#%d)", k, idx, prevKey, prevIdx)
		}
		prevKey, prevIdx = append(prevKey[:0], k...), idx
		got = append(got, append([]byte(nil), k...))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	spilled = s.Spilled()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 0 {
		t.Errorf("spill directory left behind: %v", entries)
	}
	return got, spilled
}

func randomKeys(n int, r *rand.Rand) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 1+r.IntN(24))
		for j := range k {
			k[j] = byte(r.IntN(4)) // few symbols: many equal keys and shared prefixes
		}
		keys[i] = k
	}
	return keys
}

func TestSorterInMemory(t *testing.T) {
	keys := randomKeys(5000, rand.New(rand.NewPCG(1, 2)))
	got, spilled := sortAndCollect(t, 64<<20, keys)
	if spilled {
		t.Error("5000 small records should sort in memory")
	}
	if len(got) != len(keys) {
		t.Fatalf("got %d records, added %d", len(got), len(keys))
	}
}

func TestSorterSpillsAndKeepsEveryRecord(t *testing.T) {
	keys := randomKeys(60000, rand.New(rand.NewPCG(3, 4)))
	got, spilled := sortAndCollect(t, 1<<20, keys) // ~6 MB of records through a 1 MiB budget
	if !spilled {
		t.Fatal("expected the sort to spill")
	}
	if len(got) != len(keys) {
		t.Fatalf("got %d records, added %d: records lost or duplicated", len(got), len(keys))
	}
}

// TestMergeSorters fills several sorters, some spilling and some not, with
// keys that repeat within and across them; Merge must return every record
// once, in key order, equal keys in the order of sorters and then of Add.
func TestMergeSorters(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	dir := t.TempDir()
	budgets := []int64{256 << 10, 64 << 20, 128 << 10, 64 << 20}
	sorters := make([]*Sorter, len(budgets))
	added := 0
	for i, budget := range budgets {
		sorters[i] = NewSorter(dir, budget, nil)
		for j := range 20000 + i*5000 {
			// value: sorter, then the order of Add within it
			v := binary.BigEndian.AppendUint32([]byte{byte(i)}, uint32(j))
			if err := sorters[i].Add(randomKeys(1, r)[0], v); err != nil {
				t.Fatal(err)
			}
			added++
		}
	}
	if !sorters[0].Spilled() || !sorters[2].Spilled() || sorters[1].Spilled() {
		t.Fatal("expected sorters 0 and 2 to spill and 1 to sort in memory")
	}
	var prevKey, prevVal []byte
	got := 0
	err := Merge(sorters, func(k, v []byte) error {
		if got > 0 {
			if c := bytes.Compare(prevKey, k); c > 0 || c == 0 && bytes.Compare(prevVal, v) >= 0 {
				t.Fatalf("out of order: %x/%x after %x/%x", k, v, prevKey, prevVal)
			}
		}
		prevKey, prevVal = append(prevKey[:0], k...), append(prevVal[:0], v...)
		got++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != added {
		t.Fatalf("merged %d records, added %d", got, added)
	}
	for _, s := range sorters {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("spill directories left behind: %v", entries)
	}
}
