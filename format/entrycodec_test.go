package format

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
)

// TestEntryCodecTypedPathsMatchValues: AppendRow (and AppendRowKey,
// AppendRowValue, AppendColumnsKey) encodes every row of an entry batch of
// every type (edge values and nulls included) exactly as AppendKey and
// AppendValue encode its Go values, with and without a field fixed to given
// bytes; DecodeValueInto builds the same arrays as
// DecodeValue and AppendValue, hands a field without builder to raw, and
// refuses what DecodeValue refuses.
func TestEntryCodecTypedPathsMatchValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 5, 300)
	rec := rfBatch(t, mem, s, rows)
	defer rec.Release()
	c := NewEntryCodec(s)
	strField := -1
	for i, typ := range c.Types() {
		if _, ok := typ.(iceberg.StringType); ok && strField < 0 {
			strField = i
		}
	}
	if strField < 0 {
		t.Fatal("the all-types index has no string field")
	}
	fixedEnc, err := AppendValueKey(nil, iceberg.PrimitiveTypes.String, "\x00\x00\x00\x07")
	if err != nil {
		t.Fatal(err)
	}
	newBuilders := func() []array.Builder {
		bs := make([]array.Builder, rec.NumCols())
		for i := range bs {
			bs[i] = array.NewBuilder(mem, rec.Schema().Field(i).Type)
		}
		return bs
	}
	want, got := newBuilders(), newBuilders()
	var values [][]byte
	for i := range int(rec.NumRows()) {
		row := c.Row(nil, rec, i)
		k1, err := c.AppendKey(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := c.AppendValue(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		k2, v2, err := c.AppendRow([]byte{9}, []byte{9}, rec, i, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k2[1:], k1) || !bytes.Equal(v2[1:], v1) {
			t.Fatalf("row %d: AppendRow gives key %x value %x, the values give %x and %x", i, k2[1:], v2[1:], k1, v1)
		}
		k3, err := c.AppendRowKey([]byte{9}, rec, i)
		if err != nil || !bytes.Equal(k3[1:], k1) {
			t.Fatalf("row %d: AppendRowKey gives %x (%v), the values %x", i, k3, err, k1)
		}
		v3, err := c.AppendRowValue([]byte{9}, rec, i)
		if err != nil || !bytes.Equal(v3[1:], v1) {
			t.Fatalf("row %d: AppendRowValue gives %x (%v), the values %x", i, v3, err, v1)
		}
		// Every leading run of columns, as an equality join encodes them.
		for n := 1; n <= len(c.Types()); n++ {
			want, err := AppendKey(nil, c.Types()[:n], row[:n])
			if err != nil {
				t.Fatal(err)
			}
			got, err := AppendColumnsKey([]byte{9}, c.Types()[:n], rec, i)
			if err != nil || !bytes.Equal(got[1:], want) {
				t.Fatalf("row %d, %d columns: AppendColumnsKey gives %x (%v), the values %x", i, n, got, err, want)
			}
		}
		row[strField] = "\x00\x00\x00\x07"
		k1, _ = c.AppendKey(nil, row)
		v1, _ = c.AppendValue(nil, row)
		k2, v2, err = c.AppendRow(nil, nil, rec, i, []int{strField}, fixedEnc)
		if err != nil || !bytes.Equal(k2, k1) || !bytes.Equal(v2, v1) {
			t.Fatalf("row %d, field %d fixed: AppendRow gives %x %x (%v), the values %x %x", i, strField, k2, v2, err, k1, v1)
		}
		values = append(values, v1)

		decoded, err := c.DecodeValue(v1)
		if err != nil {
			t.Fatal(err)
		}
		for f, v := range decoded {
			if err := AppendValue(want[f], v); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.DecodeValueInto(v1, got, nil); err != nil {
			t.Fatalf("row %d: %v", i, err)
		}
	}
	for f := range want {
		a, b := want[f].NewArray(), got[f].NewArray()
		// Compared as printed: NaN equals NaN there, -0 is not 0.
		if a.String() != b.String() || !arrow.TypeEqual(a.DataType(), b.DataType()) {
			t.Errorf("field %d: DecodeValueInto built %v, DecodeValue and AppendValue %v", f, b, a)
		}
		a.Release()
		b.Release()
		want[f].Release()
		got[f].Release()
	}

	bs := newBuilders()
	defer func() {
		for _, b := range bs {
			if b != nil {
				b.Release()
			}
		}
	}()
	bs[strField].Release()
	bs[strField] = nil
	var rawGot []byte
	raw := func(field int, v []byte) error {
		if field != strField {
			t.Errorf("raw called for field %d, not %d", field, strField)
		}
		rawGot = append(rawGot[:0], v...)
		return nil
	}
	if err := c.DecodeValueInto(values[0], bs, raw); err != nil || string(rawGot) != "\x00\x00\x00\x07" {
		t.Errorf("raw field: got %q (%v), want the fixed bytes", rawGot, err)
	}
	for _, bad := range [][]byte{values[0][:len(values[0])-1], append(bytes.Clone(values[0]), 0), {0x05}, {}} {
		_, errOld := c.DecodeValue(bad)
		errNew := c.DecodeValueInto(bad, bs, raw)
		if errOld == nil || errNew == nil || errOld.Error() != errNew.Error() {
			t.Errorf("decode %x: DecodeValue says %v, DecodeValueInto %v", bad, errOld, errNew)
		}
	}
}
