package tablescan

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"

	"github.com/streamidx/streamidx/format"
)

func TestEqualityDeletesMatching(t *testing.T) {
	nan1 := math.NaN()
	nan2 := math.Float64frombits(0x7ff8000000000001) // another NaN payload
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	cases := []struct {
		name    string
		deleted format.Key
		row     format.Key
		match   bool
	}{
		{"null equals null", format.Key{nil}, format.Key{nil}, true},
		{"null is not the empty string", format.Key{nil}, format.Key{""}, false},
		{"empty string is not null", format.Key{""}, format.Key{nil}, false},
		{"null is not false", format.Key{nil}, format.Key{false}, false},
		{"null is not zero", format.Key{nil}, format.Key{int64(0)}, false},
		{"same long", format.Key{int64(7)}, format.Key{int64(7)}, true},
		{"other long", format.Key{int64(7)}, format.Key{int64(8)}, false},
		{"negative long", format.Key{int64(-1)}, format.Key{int64(-1)}, true},
		{"-1 is not the largest long", format.Key{int64(-1)}, format.Key{int64(math.MaxInt64)}, false},
		{"smallest long", format.Key{int64(math.MinInt64)}, format.Key{int64(math.MinInt64)}, true},
		{"string boundaries are kept", format.Key{"ab", "c"}, format.Key{"a", "bc"}, false},
		{"same pair", format.Key{"ab", int32(1)}, format.Key{"ab", int32(1)}, true},
		{"null in a pair", format.Key{nil, int32(1)}, format.Key{nil, int32(1)}, true},
		{"pair differs in second", format.Key{"ab", int32(1)}, format.Key{"ab", nil}, false},
		{"NaN equals NaN", format.Key{nan1}, format.Key{nan2}, true},
		{"float NaN equals NaN", format.Key{float32(nan1)}, format.Key{float32(math.Float32frombits(0x7fc00001))}, true},
		{"-0.0 is not 0.0", format.Key{math.Copysign(0, -1)}, format.Key{0.0}, false},
		{"-0.0 equals -0.0", format.Key{math.Copysign(0, -1)}, format.Key{math.Copysign(0, -1)}, true},
		{"decimal", format.Key{decimal128.FromI64(-1)}, format.Key{decimal128.FromI64(-1)}, true},
		{"other decimal", format.Key{decimal128.FromI64(-1)}, format.Key{decimal128.FromI64(1)}, false},
		{"uuid", format.Key{u}, format.Key{u}, true},
		{"binary", format.Key{[]byte{0, 1}}, format.Key{[]byte{0, 1}}, true},
		{"binary prefix", format.Key{[]byte{0, 1}, []byte{}}, format.Key{[]byte{0}, []byte{1}}, false},
		{"bool", format.Key{true}, format.Key{false}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ids := make([]int, len(c.deleted))
			for i := range ids {
				ids[i] = i + 1
			}
			set := NewEqualityDeletes(ids)
			if err := set.Add(c.deleted); err != nil {
				t.Fatal(err)
			}
			got, err := set.Contains(c.row)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.match {
				t.Errorf("delete %v, row %v: match %v, want %v", c.deleted, c.row, got, c.match)
			}
		})
	}
}

func TestEqualityDeletesFieldOrder(t *testing.T) {
	set := NewEqualityDeletes([]int{5, 2, 9})
	if !slices.Equal(set.FieldIDs, []int{2, 5, 9}) {
		t.Errorf("field IDs %v, want them sorted", set.FieldIDs)
	}
	if err := set.Add(format.Key{struct{}{}}); err == nil {
		t.Error("a value of no Iceberg type was accepted")
	}
}

type fakeDeleteFile struct {
	iceberg.DataFile
	lower, upper map[int][]byte
	spec         int32
	partition    map[int]any
}

func (f fakeDeleteFile) LowerBoundValues() map[int][]byte { return f.lower }
func (f fakeDeleteFile) UpperBoundValues() map[int][]byte { return f.upper }
func (f fakeDeleteFile) SpecID() int32                    { return f.spec }
func (f fakeDeleteFile) Partition() map[int]any           { return f.partition }

func TestMayName(t *testing.T) {
	bounds := func(lo, hi string) fakeDeleteFile {
		f := fakeDeleteFile{lower: map[int][]byte{}, upper: map[int][]byte{}}
		if lo != "" {
			f.lower[format.FieldIDDeleteFilePath] = []byte(lo)
		}
		if hi != "" {
			f.upper[format.FieldIDDeleteFilePath] = []byte(hi)
		}
		return f
	}
	cases := []struct {
		name   string
		file   fakeDeleteFile
		path   string
		admits bool
	}{
		{"no bounds", bounds("", ""), "s3://b/t/a.parquet", true},
		{"inside", bounds("s3://b/t/a", "s3://b/t/c"), "s3://b/t/b.parquet", true},
		{"equal to both", bounds("s3://b/t/a.parquet", "s3://b/t/a.parquet"), "s3://b/t/a.parquet", true},
		{"below", bounds("s3://b/t/b", "s3://b/t/c"), "s3://b/t/a.parquet", false},
		{"above", bounds("s3://b/t/a", "s3://b/t/b"), "s3://b/t/c.parquet", false},
		{"truncated lower bound is a prefix", bounds("s3://b/t/a", ""), "s3://b/t/a.parquet", true},
		{"only an upper bound", bounds("", "s3://b/t/b"), "s3://b/t/c.parquet", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := mayName(c.file, c.path); got != c.admits {
				t.Errorf("mayName = %v, want %v", got, c.admits)
			}
		})
	}
}

func TestPartitionKey(t *testing.T) {
	key := func(spec int32, p map[int]any) string {
		return partitionKey(fakeDeleteFile{spec: spec, partition: p})
	}
	same := [][2]string{
		{key(1, map[int]any{1000: "x", 1001: int32(3)}), key(1, map[int]any{1001: int32(3), 1000: "x"})},
	}
	differ := [][2]string{
		{key(1, map[int]any{1000: "x"}), key(2, map[int]any{1000: "x"})},
		{key(1, map[int]any{1000: nil}), key(1, map[int]any{1000: "<nil>"})},
		{key(1, map[int]any{1000: "1"}), key(1, map[int]any{1000: int32(1)})},
		{key(1, map[int]any{1000: "x"}), key(1, map[int]any{1000: "y"})},
	}
	for _, p := range same {
		if p[0] != p[1] {
			t.Errorf("keys %q and %q differ", p[0], p[1])
		}
	}
	for _, p := range differ {
		if p[0] == p[1] {
			t.Errorf("two partitions share the key %q", p[0])
		}
	}
}

// TestEqualityDeletesUnionAndMerge: a union of sets holds every tuple of
// each, integer keys and others; the sets that apply to a data file are
// merged when its rows outnumber what the merge costs: one set per upsert
// commit of integer keys merges for a file of as many rows as a commit
// deletes, sets of string tuples do not.
func TestEqualityDeletesUnionAndMerge(t *testing.T) {
	var ints, strs []*EqualityDeletes
	for c := range 3 {
		is, ss := NewEqualityDeletes([]int{1}), NewEqualityDeletes([]int{2})
		for k := range 1000 {
			if err := is.Add(format.Key{int64(c*1000 + k - 1500)}); err != nil {
				t.Fatal(err)
			}
			if err := ss.Add(format.Key{fmt.Sprint(c*1000 + k)}); err != nil {
				t.Fatal(err)
			}
		}
		ints, strs = append(ints, is), append(strs, ss)
	}
	merged := mergeSets(ints)
	if merged.Len() != 3000 {
		t.Errorf("union of three sets of 1000 distinct longs holds %d", merged.Len())
	}
	for _, k := range []int64{-1500, -1, 0, 1499} {
		if ok, _ := merged.Contains(format.Key{k}); !ok {
			t.Errorf("union lost %d", k)
		}
	}
	if ok, _ := merged.Contains(format.Key{int64(1500)}); ok {
		t.Error("union holds 1500, which no set held")
	}
	if !mergeWorth(ints, 1000) {
		t.Error("three sets of 1000 longs, a data file of 1000 rows: not merged")
	}
	if mergeWorth(strs, 1000) {
		t.Error("three sets of 1000 strings, a data file of 1000 rows: merged, which costs more than it saves")
	}
	if mergeWorth(ints[:1], 1<<20) {
		t.Error("a lone set merged")
	}
}
