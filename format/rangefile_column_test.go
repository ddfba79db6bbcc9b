package format

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// TestColumnViewFastPathsMatchComparisons: the typed passes that
// statistics and order checks take (minMax, descent) find what comparing
// row by row finds, with nulls, repeated values and runs of equal ones.
func TestColumnViewFastPathsMatchComparisons(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(3, 5))
	types := []iceberg.Type{iceberg.PrimitiveTypes.Int64, iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Date,
		iceberg.PrimitiveTypes.TimestampTz, iceberg.PrimitiveTypes.String}
	for trial := range 400 {
		typ := types[trial%len(types)]
		at, err := ArrowType(typ)
		if err != nil {
			t.Fatal(err)
		}
		n := r.IntN(60)
		nullEvery := 0
		if trial%3 == 0 {
			nullEvery = 1 + r.IntN(5)
		}
		sorted := trial%2 == 0
		b := array.NewBuilder(mem, at)
		last := int64(-20)
		for i := range n {
			if nullEvery > 0 && r.IntN(nullEvery) == 0 {
				b.AppendNull()
				continue
			}
			v := int64(r.IntN(40) - 20)
			if sorted {
				last += int64(r.IntN(3)) // runs of equal values
				v = last
			}
			var err error
			switch typ.(type) {
			case iceberg.StringType:
				err = AppendValue(b, fmt.Sprintf("s3://warehouse/data/%03d.parquet", v+100))
			case iceberg.Int32Type:
				err = AppendValue(b, int32(v))
			case iceberg.DateType:
				err = AppendValue(b, int32(v))
			case iceberg.TimestampTzType:
				err = AppendValue(b, v)
			default:
				err = AppendValue(b, v)
			}
			if err != nil {
				t.Fatalf("trial %d row %d: %v", trial, i, err)
			}
		}
		arr := b.NewArray()
		b.Release()
		c, err := newColumnView(typ, arr)
		if err != nil {
			t.Fatal(err)
		}
		if c.minMax == nil || c.descent == nil {
			t.Fatalf("%s: no typed pass", typ)
		}
		wantLo, wantHi := -1, -1
		for i := range arr.Len() {
			if arr.IsNull(i) {
				continue
			}
			if wantLo < 0 || c.cmp(i, wantLo) < 0 {
				wantLo = i
			}
			if wantHi < 0 || c.cmp(i, wantHi) > 0 {
				wantHi = i
			}
		}
		lo, hi := c.minMax()
		if (lo < 0) != (wantLo < 0) || lo >= 0 && (c.cmp(lo, wantLo) != 0 || c.cmp(hi, wantHi) != 0) {
			t.Fatalf("trial %d (%s, %d rows, %d nulls): minMax rows %d, %d; want values of rows %d, %d", trial, typ, n, arr.NullN(), lo, hi, wantLo, wantHi)
		}
		if arr.NullN() == 0 {
			want := -1
			for i := 1; i < arr.Len(); i++ {
				if c.cmp(i-1, i) > 0 {
					want = i
					break
				}
			}
			if got := c.descent(); got != want {
				t.Fatalf("trial %d (%s, %d rows, sorted %v): descent %d, want %d", trial, typ, n, sorted, got, want)
			}
		}
		arr.Release()
	}
}

// TestRangeFileWriterRefusesADescentInOneKeyColumn: a batch whose one
// cluster field descends inside it is refused, naming both keys (the typed
// order check of a single-field key).
func TestRangeFileWriterRefusesADescentInOneKeyColumn(t *testing.T) {
	source := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "id", Type: iceberg.PrimitiveTypes.Int64, Required: true})
	md := &Metadata{FormatVersion: 1, IndexUUID: "u", TableUUID: "t", Location: "file:///x", Type: TypeScalar,
		IdentityFields: []int{1}, ClusterSpec: []int{1}}
	is, err := NewIndexSchema(md, source)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	as, err := ArrowSchema(is.EntrySchema())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ids  []int64
		want string // the key named after, or "" when accepted
	}{
		{[]int64{1, 2, 2, 5}, ""},
		{[]int64{1, 7, 6, 9}, "key (6) after (7)"},
		{[]int64{3, 3, 3, 2}, "key (2) after (3)"},
	} {
		w, err := NewRangeFileWriter(io.Discard, is, RangeFileOptions{Allocator: mem})
		if err != nil {
			t.Fatal(err)
		}
		b := array.NewRecordBuilder(mem, as)
		b.Field(0).(*array.Int64Builder).AppendValues(tc.ids, nil)
		rec := b.NewRecordBatch()
		b.Release()
		err = w.Write(rec)
		rec.Release()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v refused: %v", tc.ids, err)
		case tc.want != "" && (!errors.Is(err, ErrOutOfOrder) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want an error naming %q", tc.ids, err, tc.want)
		}
		if _, err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
