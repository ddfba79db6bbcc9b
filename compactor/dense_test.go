package compactor

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// denseRef is a part's values as join must give them: nil for a null row.
type denseRef struct {
	value []byte
	null  bool
}

// randomPart is a string or binary array of n rows, plain or a dictionary
// (with null rows, null and empty dictionary values, indexes of a random
// width), sliced out of a larger array now and then, with the values it
// holds.
func randomPart(t *testing.T, r *rand.Rand, typ arrow.DataType, n int) (arrow.Array, []denseRef) {
	mem := memory.DefaultAllocator
	value := func() ([]byte, bool) {
		switch r.IntN(8) {
		case 0:
			return nil, false
		case 1:
			return []byte{}, true
		}
		return []byte(fmt.Sprintf("s3://warehouse/db/t/data/%05d-%d.parquet", r.IntN(50), r.IntN(3))), true
	}
	pad := 0
	if r.IntN(3) == 0 {
		pad = 1 + r.IntN(5) // rows sliced off the front and the back
	}
	if r.IntN(2) == 0 {
		bb := array.NewBinaryBuilder(mem, typ.(arrow.BinaryDataType))
		defer bb.Release()
		var want []denseRef
		for i := range n + 2*pad {
			v, ok := value()
			if ok {
				bb.Append(v)
			} else {
				bb.AppendNull()
			}
			if i >= pad && i < pad+n {
				want = append(want, denseRef{v, !ok})
			}
		}
		full := bb.NewArray()
		defer full.Release()
		return array.NewSlice(full, int64(pad), int64(pad+n)), want
	}
	indexTypes := []arrow.DataType{arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
		arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64}
	dt := &arrow.DictionaryType{IndexType: indexTypes[r.IntN(len(indexTypes))], ValueType: typ}
	db := array.NewBinaryBuilder(mem, typ.(arrow.BinaryDataType))
	defer db.Release()
	var dictVals []denseRef
	for range 1 + r.IntN(8) {
		v, ok := value()
		if ok {
			db.Append(v)
		} else {
			db.AppendNull()
		}
		dictVals = append(dictVals, denseRef{v, !ok})
	}
	dict := db.NewArray()
	defer dict.Release()
	ib := array.NewBuilder(mem, dt.IndexType)
	defer ib.Release()
	var want []denseRef
	var rowNull []bool
	for i := range n + 2*pad {
		k := r.IntN(len(dictVals))
		if err := ib.AppendValueFromString(strconv.Itoa(k)); err != nil {
			t.Fatal(err)
		}
		null := r.IntN(10) == 0 // a null row whose index is still a valid one
		rowNull = append(rowNull, null)
		if i >= pad && i < pad+n {
			if null {
				want = append(want, denseRef{nil, true})
			} else {
				want = append(want, dictVals[k])
			}
		}
	}
	idx := ib.NewArray()
	defer idx.Release()
	idxData := idx.Data()
	valid := make([]byte, (idx.Len()+7)/8)
	nulls := 0
	for i, null := range rowNull {
		if null {
			nulls++
			continue
		}
		valid[i/8] |= 1 << (i % 8)
	}
	withNulls := array.NewData(idxData.DataType(), idx.Len(), []*memory.Buffer{memory.NewBufferBytes(valid), idxData.Buffers()[1]}, nil, nulls, 0)
	defer withNulls.Release()
	indexes := array.MakeFromData(withNulls)
	defer indexes.Release()
	d := array.NewDictionaryArray(dt, indexes, dict)
	defer d.Release()
	return array.NewSlice(d, int64(pad), int64(pad+n)), want
}

// TestJoinGivesEveryPartsValues: joining plain, sliced and dictionary parts
// of strings and binaries gives each row's value, nulls where a row or its
// dictionary value is null, in buffers reused from join to join.
func TestJoinGivesEveryPartsValues(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	var b denseBuffers
	for round := range 200 {
		typ := []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.Binary}[r.IntN(2)]
		var parts []arrow.Array
		var want []denseRef
		for range 1 + r.IntN(4) {
			p, w := randomPart(t, r, typ, r.IntN(40))
			parts = append(parts, p)
			want = append(want, w...)
		}
		var mem memory.Allocator
		if r.IntN(2) == 0 {
			mem = memory.DefaultAllocator
		}
		got, err := b.join(typ, parts, mem)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got.Len() != len(want) || !arrow.TypeEqual(got.DataType(), typ) {
			t.Fatalf("round %d: %d rows of %s, want %d of %s", round, got.Len(), got.DataType(), len(want), typ)
		}
		nulls := 0
		for i, w := range want {
			v, ok := binaryValueAt(got, i)
			if w.null {
				nulls++
			}
			if ok == w.null || string(v) != string(w.value) {
				t.Fatalf("round %d row %d: got %q (valid %v), want %q (null %v)", round, i, v, ok, w.value, w.null)
			}
		}
		if got.NullN() != nulls {
			t.Fatalf("round %d: null count %d, want %d", round, got.NullN(), nulls)
		}
		got.Release()
		for _, p := range parts {
			p.Release()
		}
	}
}

// A dictionary index past its dictionary is an error, not a panic.
func TestJoinRefusesAnIndexPastTheDictionary(t *testing.T) {
	mem := memory.DefaultAllocator
	db := array.NewStringBuilder(mem)
	db.Append("a")
	dict := db.NewArray()
	db.Release()
	defer dict.Release()
	ib := array.NewInt8Builder(mem)
	ib.AppendValues([]int8{0, 3}, nil)
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	d := array.NewDictionaryArray(&arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}, idx, dict)
	defer d.Release()
	var b denseBuffers
	if _, err := b.join(arrow.BinaryTypes.String, []arrow.Array{d}, nil); err == nil {
		t.Fatal("joined a dictionary whose index 3 is past its 1 value")
	}
}
