package format

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/apache/iceberg-go"
)

// TestBlockSeek: the rows a binary search of a sorted block finds are the
// rows a test of every row finds, for points, ranges and values outside
// the block, on an integer and on a (dictionary-encoded) string key; a
// block whose key does not ascend refuses to seek.
func TestBlockSeek(t *testing.T) {
	ctx := compute.WithAllocator(context.Background(), memory.DefaultAllocator)
	open := func(t *testing.T, s *IndexSchema, data []byte, n int) *Block {
		t.Helper()
		r, err := OpenRangeFile(bytes.NewReader(data), "mem://seek.parquet", s, RangeFileReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		b, err := r.ReadBlock(ctx, 0, 0, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	block := func(t *testing.T, s *IndexSchema, rows []rfRow) *Block {
		t.Helper()
		data, _ := rfWrite(t, memory.DefaultAllocator, s, rows, RangeFileOptions{RowGroupRows: 1000})
		return open(t, s, data, len(rows))
	}
	row := func(id int64, name string, i int) rfRow {
		return rfRow{1: id, 2: name, rfFileID: fmt.Sprintf("s3://b/data/f%d.parquet", i%3), rfPosID: int64(i)}
	}

	t.Run("ints", func(t *testing.T) {
		s := rfSimpleIndex(t)
		var rows []rfRow
		for i := range 600 {
			rows = append(rows, row(int64(i/3)*2-100, "n", i)) // each key three times, even keys only
		}
		b := block(t, s, rows)
		for _, tc := range []struct{ lo, hi []int64 }{
			{[]int64{0}, []int64{0}},                       // a point, three rows
			{[]int64{1}, []int64{1}},                       // an odd key: none
			{[]int64{-100, 50}, []int64{-100, 60}},         // first key, and a range
			{[]int64{-1000, 498}, []int64{-101, 5000}},     // before the block; the last key and beyond
			{[]int64{-1000}, []int64{1000}},                // everything
			{[]int64{700, 800}, []int64{750, 900}},         // after the block
			{[]int64{-7, -3, 3, 9}, []int64{-5, -3, 5, 9}}, // several
		} {
			got, ok := b.SeekInts(1, tc.lo, tc.hi)
			if !ok {
				t.Fatalf("SeekInts(%v, %v) refused a sorted block", tc.lo, tc.hi)
			}
			var want []int64
			for i, r := range rows {
				v := r[1].(int64)
				for k := range tc.lo {
					if tc.lo[k] <= v && v <= tc.hi[k] {
						want = append(want, int64(i))
					}
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("SeekInts(%v, %v) = %v, want %v", tc.lo, tc.hi, got, want)
			}
		}
		if _, ok := b.SeekInts(rfPosID, []int64{0}, []int64{0}); !ok {
			t.Error("SeekInts refused _pos, which ascends here too")
		}
		if _, ok := b.SeekStrings(1, []string{"x"}); ok {
			t.Error("SeekStrings accepted a long field")
		}
	})

	t.Run("strings", func(t *testing.T) {
		md := &Metadata{
			IdentityFields: []int{1, 2},
			MaterializedFields: []ExprField{
				{FieldID: rfFileID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.String, Expr: Ref{ID: FieldIDFile}},
				{FieldID: rfPosID, Type: ExprFieldType, DataType: iceberg.PrimitiveTypes.Int64, Expr: Ref{ID: FieldIDPos}},
			},
			ClusterSpec: []int{2},
		}
		s, err := NewIndexSchema(md, iceberg.NewSchema(0,
			iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64},
			iceberg.NestedField{ID: 2, Name: "name", Type: iceberg.PrimitiveTypes.String}))
		if err != nil {
			t.Fatal(err)
		}
		var rows []rfRow
		for i := range 400 {
			rows = append(rows, row(int64(i), fmt.Sprintf("k%03d", i/4), i)) // few distinct: Parquet keeps a dictionary
		}
		b := block(t, s, rows)
		for _, values := range [][]string{{"k000"}, {"a", "k050", "k051", "k099", "zzz"}, {"k0505"}, {}} {
			got, ok := b.SeekStrings(2, values)
			if !ok {
				t.Fatalf("SeekStrings(%q) refused a sorted block", values)
			}
			var want []int64
			for i, r := range rows {
				if slices.Contains(values, r[2].(string)) {
					want = append(want, int64(i))
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("SeekStrings(%q) = %v, want %v", values, got, want)
			}
		}
		if _, ok := b.SeekStrings(rfFileID, []string{"s3://b/data/f0.parquet"}); ok {
			t.Error("SeekStrings accepted _file, which does not ascend")
		}
	})

	t.Run("out of order", func(t *testing.T) {
		// A file another writer got wrong (streamidx's refuses to): the
		// key does not ascend.
		s := rfSimpleIndex(t)
		sc, err := ArrowSchema(s.StoredSchema())
		if err != nil {
			t.Fatal(err)
		}
		rec := rfBatchOf(t, memory.DefaultAllocator, sc, []rfRow{row(5, "n", 0), row(3, "n", 1), row(9, "n", 2)})
		defer rec.Release()
		var buf bytes.Buffer
		w, err := pqarrow.NewFileWriter(sc, &buf, nil, pqarrow.DefaultWriterProps())
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		b := open(t, s, buf.Bytes(), 3)
		if got, ok := b.SeekInts(1, []int64{3}, []int64{3}); ok {
			t.Errorf("SeekInts on a key out of order = %v, true; want a refusal", got)
		}
	})
}

// TestSeekInt64sMatchesSeek: the slice search of an ascending column of
// longs finds the same rows as the general search, duplicates, interval
// ends at the extremes of int64 and intervals outside the block included.
func TestSeekInt64sMatchesSeek(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		n := rng.IntN(40)
		v := make([]int64, n)
		at := int64(rng.IntN(20)) - 10
		if trial%10 == 0 {
			at = math.MaxInt64 - 30
		}
		for i := range v {
			v[i] = at
			at += int64(rng.IntN(3))
		}
		var lo, hi []int64
		for x := int64(-15); len(lo) < 4; {
			a := x + int64(rng.IntN(6))
			z := a + int64(rng.IntN(5))
			if trial%10 == 0 {
				a, z = math.MaxInt64-int64(rng.IntN(40)), math.MaxInt64
			}
			if len(hi) > 0 && a <= hi[len(hi)-1] {
				break
			}
			lo, hi = append(lo, a), append(hi, z)
			x = z + 1
		}
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		ib.AppendValues(v, nil)
		col := ib.NewArray()
		ib.Release()
		b := &Block{rec: array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil), []arrow.Array{col}, int64(n))}
		col.Release()
		want, _ := seek(b, 1, func(i int) int64 { return v[i] }, lo, hi)
		if got := seekInt64s(v, lo, hi); !slices.Equal(got, want) {
			t.Fatalf("values %v, intervals %v-%v: slice search %v, general %v", v, lo, hi, got, want)
		}
	}
}
