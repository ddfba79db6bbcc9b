package format

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestUnpackBinaryMatchesCast: a dictionary of strings, and of binary
// values, with null slots and a null dictionary value, unpacks to the same
// array as Arrow's cast, which the reader used before.
func TestUnpackBinaryMatchesCast(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	for _, vt := range []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.Binary} {
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: vt}
		vb := array.NewBuilder(mem, vt)
		for _, v := range []string{"s3://b/data/a.parquet", "", "s3://b/data/c.parquet"} {
			vb.(interface{ AppendString(string) }).AppendString(v)
		}
		vb.AppendNull()
		dict := vb.NewArray()
		vb.Release()
		ib := array.NewInt32Builder(mem)
		ib.AppendValues([]int32{2, 0, 0, 3, 1, 2}, []bool{true, true, false, true, true, true})
		idx := ib.NewArray()
		ib.Release()
		d := array.NewDictionaryArray(dt, idx, dict)
		idx.Release()
		dict.Release()

		got := unpackBinary(mem, d)
		if got == nil {
			t.Fatalf("%s: not unpacked", vt)
		}
		want, err := compute.CastArray(compute.WithAllocator(context.Background(), mem), d, compute.SafeCastOptions(vt))
		if err != nil {
			t.Fatal(err)
		}
		if !array.Equal(got, want) {
			t.Errorf("%s: unpacked %v, cast gives %v", vt, got, want)
		}
		got.Release()
		want.Release()
		// Every run of rows, unpacked from the dictionary of the whole
		// array, as a Block unpacks the rows it is asked for.
		for from := 0; from <= d.Len(); from++ {
			for n := 0; from+n <= d.Len(); n++ {
				part := array.NewSlice(d, int64(from), int64(from+n))
				want, err := compute.CastArray(compute.WithAllocator(context.Background(), mem), part, compute.SafeCastOptions(vt))
				if err != nil {
					t.Fatal(err)
				}
				got := unpackRun(mem, d, d.Dictionary(), from, n)
				if !array.Equal(got, want) {
					t.Errorf("%s rows [%d, %d): unpacked %v, cast gives %v", vt, from, from+n, got, want)
				}
				got.Release()
				want.Release()
				part.Release()
			}
		}
		d.Release()
	}
}
