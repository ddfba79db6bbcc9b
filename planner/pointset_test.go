package planner

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestApplyIntsSweep: testing a column against a set of intervals gives
// what testing each value does, whether the column ascends (one sweep),
// starts ascending and then does not, or holds nulls, whatever rows an
// earlier filter already dropped.
func TestApplyIntsSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		s := &intSet{null: trial%2 == 0}
		for v := int64(-50); v < 250; v += 1 + rng.Int64N(40) {
			hi := v + rng.Int64N(5)
			s.lo, s.hi = append(s.lo, v), append(s.hi, hi)
			v = hi + 1
		}
		n := 1 + rng.IntN(300)
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = rng.Int64N(300) - 60
		}
		switch trial % 3 {
		case 0:
			slices.Sort(vals)
		case 1: // ascending, then out of order from somewhere on
			slices.Sort(vals[:n/2])
		}
		valid := make([]bool, n)
		keep := make([]bool, n)
		for i := range n {
			valid[i] = trial%4 != 0 || rng.IntN(10) > 0
			keep[i] = rng.IntN(5) > 0
		}
		b := array.NewInt64Builder(memory.DefaultAllocator)
		b.AppendValues(vals, valid)
		col := b.NewInt64Array()
		b.Release()
		want := slices.Clone(keep)
		for i := range want {
			if want[i] {
				want[i] = (!valid[i] && s.null) || (valid[i] && s.contains(vals[i]))
			}
		}
		if !applyInts(s, col, keep) {
			t.Fatal("applyInts refused an int64 column")
		}
		col.Release()
		if !slices.Equal(keep, want) {
			t.Fatalf("trial %d: applyInts kept %v, want %v (values %v, set %v..%v)", trial, keep, want, vals, s.lo, s.hi)
		}
	}
}
