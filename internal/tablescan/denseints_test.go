package tablescan

import (
	"math/rand/v2"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"

	"github.com/streamidx/streamidx/format"
)

// upsertSets returns k equality sets of n order ids each, drawn from
// [from, from+span), as an upsert table's delete files hold them.
func upsertSets(t testing.TB, r *rand.Rand, k, n int, from, span int64) []*EqualityDeletes {
	out := make([]*EqualityDeletes, k)
	for i := range out {
		out[i] = NewEqualityDeletes([]int{1})
		for range n {
			if err := out[i].Add(format.Key{from + r.Int64N(span)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func TestMergeSetsDenseUnionEqualsRoaringUnion(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct {
		name      string
		k, n      int
		from      int64
		span      int64
		wantDense bool
	}{
		{"ids close together", 40, 500, 1_000_000, 100_000, true},
		{"one set per id range, edges of words", 3, 64, 0, 130, true},
		{"ids far apart", 5, 100, 0, 1 << 40, false},
		{"negative and positive ids", 4, 300, -600, 1200, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sets := upsertSets(t, r, c.k, c.n, c.from, c.span)
			merged := mergeSets(sets)
			if (merged.dense != nil) != c.wantDense {
				t.Fatalf("dense union: %v, want %v", merged.dense != nil, c.wantDense)
			}
			want := roaring64.New()
			for _, s := range sets {
				want.Or(s.ints)
			}
			if got := merged.Len(); got != int(want.GetCardinality()) {
				t.Fatalf("union holds %d keys, want %d", got, want.GetCardinality())
			}
			// Every id of the range and a margin either side: in the union
			// exactly when some set holds it.
			for v := c.from - 70; v < c.from+min(c.span, 200_000)+70; v++ {
				key := format.Key{v}
				got, err := merged.Contains(key)
				if err != nil {
					t.Fatal(err)
				}
				if exp := want.Contains(uint64(v)); got != exp {
					t.Fatalf("Contains(%d) = %v, want %v", v, got, exp)
				}
			}
			// A union of unions (a merged set met again) and a key added to
			// a merged set keep every key.
			again := mergeSets([]*EqualityDeletes{merged, NewEqualityDeletes([]int{1})})
			if again.Len() != merged.Len() {
				t.Fatalf("union of the union holds %d, want %d", again.Len(), merged.Len())
			}
			extra := c.from + c.span + 1000
			if err := again.Add(format.Key{extra}); err != nil {
				t.Fatal(err)
			}
			if ok, _ := again.Contains(format.Key{extra}); !ok || again.Len() != merged.Len()+1 {
				t.Fatalf("after Add(%d): holds it %v, %d keys, want %d", extra, ok, again.Len(), merged.Len()+1)
			}
			lo, hi := merged.intsRange()
			if lo != want.Minimum() || hi != want.Maximum() {
				t.Fatalf("range [%d, %d], want [%d, %d]", lo, hi, want.Minimum(), want.Maximum())
			}
		})
	}
}

// BenchmarkMergeSets merges the equality deletes of 120 upsert commits of
// 10,000 ids spread uniformly over 10M, what each older data file of a CDC
// table with that history meets in a scan.
func BenchmarkMergeSets(b *testing.B) {
	sets := upsertSets(b, rand.New(rand.NewPCG(1, 2)), 120, 10_000, 0, 10_000_000)
	for b.Loop() {
		mergeSets(sets)
	}
}
