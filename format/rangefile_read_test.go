package format

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

func TestRangeFileRowGroupStatsSkipRowGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfSimpleIndex(t)
	rows := make([]rfRow, 1000)
	for i := range rows {
		var name any = fmt.Sprintf("name-%04d", i)
		if i%10 == 0 {
			name = nil
		}
		rows[i] = rfRow{1: int64(i * 3), 2: name, rfFileID: fmt.Sprintf("data/%02d.parquet", i/250), rfPosID: int64(i % 250)}
	}
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 100}, 33)
	r := rfOpen(t, mem, data, s)
	if r.NumRowGroups() != 10 {
		t.Fatalf("NumRowGroups = %d, want 10", r.NumRowGroups())
	}

	for g := range r.NumRowGroups() {
		n, stats := r.RowGroupStats(g)
		group := rows[g*100 : (g+1)*100]
		if n != 100 {
			t.Errorf("row group %d has %d rows, want 100", g, n)
		}
		want := rfExpectedStats(s, group)
		for _, id := range rfStoredIDs(s) {
			f, _ := s.Field(id)
			got := stats[id]
			if got == nil {
				t.Fatalf("row group %d: no stats for field %d", g, id)
			}
			if Compare(f.Type, got.LowerBound, want[id].LowerBound) != 0 || Compare(f.Type, got.UpperBound, want[id].UpperBound) != 0 {
				t.Errorf("row group %d field %s: bounds %s..%s, want %s..%s", g, f.Name,
					FormatValue(f.Type, got.LowerBound), FormatValue(f.Type, got.UpperBound),
					FormatValue(f.Type, want[id].LowerBound), FormatValue(f.Type, want[id].UpperBound))
			}
			if rfFormatCount(got.NullValueCount) != rfFormatCount(want[id].NullValueCount) || rfFormatCount(got.ValueCount) != "100" {
				t.Errorf("row group %d field %s: %s nulls of %s values, want %s of 100", g, f.Name,
					rfFormatCount(got.NullValueCount), rfFormatCount(got.ValueCount), rfFormatCount(want[id].NullValueCount))
			}
		}
	}

	// A lookup of one key reads only the row group whose bounds hold it.
	const key = int64(537 * 3)
	var candidates []int
	for g := range r.NumRowGroups() {
		_, stats := r.RowGroupStats(g)
		if lo, hi := stats[1].LowerBound.(int64), stats[1].UpperBound.(int64); lo <= key && key <= hi {
			candidates = append(candidates, g)
		}
	}
	if !slices.Equal(candidates, []int{5}) {
		t.Fatalf("row groups that may hold key %d: %v, want [5]", key, candidates)
	}
	got := rfReadRows(t, r, s, []int{1, rfPosID}, candidates)
	if len(got) != 100 {
		t.Fatalf("row group 5 read %d rows, want 100", len(got))
	}
	found := slices.IndexFunc(got, func(row rfRow) bool { return row[1] == key })
	if found < 0 || got[found][rfPosID] != int64(537%250) {
		t.Errorf("key %d not found in row group 5 with its position", key)
	}
}

func TestRangeFileReadArguments(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	data, _ := rfWrite(t, mem, s, rfRandomRows(s, 3, 50), RangeFileOptions{RowGroupRows: 20})
	r := rfOpen(t, mem, data, s)
	ctx := context.Background()
	noop := func(arrow.RecordBatch) error { return nil }

	for _, tc := range []struct {
		name      string
		fields    []int
		rowGroups []int
		want      string
	}{
		{"non-materialized field", []int{rfDayID}, nil, "field 2001 is not stored"},
		{"unknown field", []int{404}, nil, "field 404 is not stored"},
		{"field twice", []int{1, 1}, nil, "field 1 requested twice"},
		{"row group out of range", nil, []int{3}, "no row group 3 of 3"},
	} {
		if err := r.Read(ctx, tc.fields, tc.rowGroups, noop); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Read = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}

	calls := 0
	if err := r.Read(ctx, nil, []int{}, func(arrow.RecordBatch) error { calls++; return nil }); err != nil || calls != 0 {
		t.Errorf("Read of no row groups: %d batches, error %v; want none", calls, err)
	}
	stop := errors.New("stop")
	if err := r.Read(ctx, nil, nil, func(arrow.RecordBatch) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("Read = %v, want the callback's error", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := r.Read(cancelled, nil, nil, noop); !errors.Is(err, context.Canceled) {
		t.Errorf("Read with a cancelled context = %v, want context.Canceled", err)
	}
}

// rfWriteForeign writes rows with pqarrow directly in the Arrow schema sc,
// standing in for a range file written by another engine.
func rfWriteForeign(t testing.TB, sc *arrow.Schema, rows []rfRow, storeSchema bool) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	var arrowProps []pqarrow.WriterOption
	if storeSchema {
		arrowProps = append(arrowProps, pqarrow.WithStoreSchema())
	}
	var buf bytes.Buffer
	// No dictionaries: arrow-go's would fold -NaN into NaN (see NewRangeFileWriter).
	props := parquet.NewWriterProperties(parquet.WithDictionaryDefault(false))
	fw, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties(arrowProps...))
	if err != nil {
		t.Fatal(err)
	}
	rec := rfBatchOf(t, mem, sc, rows)
	defer rec.Release()
	if err := fw.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// rfStoredFields returns the Arrow fields of the stored schema, for building
// foreign files from.
func rfStoredFields(t testing.TB, s *IndexSchema) []arrow.Field {
	t.Helper()
	sc, err := ArrowSchema(s.StoredSchema())
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(sc.Fields())
}

func rfWithID(name string, typ arrow.DataType, id int) arrow.Field {
	return arrow.Field{Name: name, Type: typ, Nullable: true,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{fmt.Sprint(id)})}
}

func TestRangeFileReaderMatchesColumnsByFieldID(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 4, 200)

	// Another writer's file: every column renamed, the order reversed, a
	// column that takes a stored field's name under another ID, one without
	// an ID, strings as large_string (restored from the stored Arrow
	// schema), uuid as plain fixed(16), decimals as fixed_len_byte_array.
	var fields []arrow.Field
	for _, f := range slices.Backward(rfStoredFields(t, s)) {
		id, _ := arrowFieldID(f)
		f.Name = "renamed_" + f.Name
		switch id {
		case 15:
			f.Type = arrow.BinaryTypes.LargeString
		case 16:
			f.Type = &arrow.FixedSizeBinaryType{ByteWidth: 16}
		}
		fields = append(fields, f)
	}
	fields = append(fields,
		rfWithID("c_1", arrow.PrimitiveTypes.Int32, 9999),
		arrow.Field{Name: "c_2", Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	data := rfWriteForeign(t, arrow.NewSchema(fields, nil), rows, true)

	r := rfOpen(t, mem, data, s)
	stored := rfStoredIDs(s)
	rfCheckRows(t, s, stored, rfReadRows(t, r, s, nil, nil), rows)

	// Its string and binary columns asked for as dictionaries read the
	// same values: binary as a dictionary, the large_string column (which
	// arrow-go decodes plain) as plain strings.
	dr, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 100,
		DictionaryFields: []int{15, 18}})
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	var dictRows []rfRow
	err = dr.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
		for c, f := range rec.Schema().Fields() {
			id, _ := arrowFieldID(f)
			_, isDict := rec.Column(c).(*array.Dictionary)
			if id == 18 && !isDict || id == 15 && !isDict && rec.Column(c).DataType().ID() != arrow.STRING {
				return fmt.Errorf("field %d read as %s", id, rec.Column(c).DataType())
			}
		}
		dictRows = append(dictRows, rfRowsOf(s, rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rfCheckRows(t, s, stored, dictRows, rows)

	// Statistics come from that writer's Parquet statistics, converted.
	_, stats := r.RowGroupStats(0)
	want := rfExpectedStats(s, rows)
	for _, id := range stored {
		f, _ := s.Field(id)
		got := stats[id]
		if Compare(f.Type, got.LowerBound, want[id].LowerBound) != 0 || Compare(f.Type, got.UpperBound, want[id].UpperBound) != 0 {
			t.Errorf("field %d (%s): bounds %s..%s, want %s..%s", id, f.Type,
				FormatValue(f.Type, got.LowerBound), FormatValue(f.Type, got.UpperBound),
				FormatValue(f.Type, want[id].LowerBound), FormatValue(f.Type, want[id].UpperBound))
		}
	}
}

func TestRangeFileCorruptFiles(t *testing.T) {
	s := rfAllTypesIndex(t)
	rows := rfRandomRows(s, 5, 40)
	good, _ := rfWrite(t, memory.NewGoAllocator(), s, rows, RangeFileOptions{})
	stored := rfStoredFields(t, s)
	// Rows of nulls fit any column type.
	nullRows := []rfRow{{}, {}, {}}
	foreign := func(edit func([]arrow.Field) []arrow.Field) []byte {
		return rfWriteForeign(t, arrow.NewSchema(edit(slices.Clone(stored)), nil), nullRows, false)
	}
	replace := func(fields []arrow.Field, id int, typ arrow.DataType) []arrow.Field {
		for i, f := range fields {
			if got, _ := arrowFieldID(f); got == id {
				fields[i].Type = typ
			}
		}
		return fields
	}
	garbage := bytes.Repeat([]byte("range file? "), 100)

	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"missing field", foreign(func(fs []arrow.Field) []arrow.Field { return slices.Delete(fs, 2, 3) }), "no column has field ID 3"},
		// A wider type than the field's is no promotion: int, float and
		// decimal(9, 2) fields stored as long, double and decimal(18, 2).
		{"int stored as long", foreign(func(fs []arrow.Field) []arrow.Field { return replace(fs, 2, arrow.PrimitiveTypes.Int64) }), "field ID 2"},
		{"float stored as double", foreign(func(fs []arrow.Field) []arrow.Field { return replace(fs, 4, arrow.PrimitiveTypes.Float64) }), "field ID 4"},
		{"decimal stored wider", foreign(func(fs []arrow.Field) []arrow.Field {
			return replace(fs, 6, &arrow.Decimal128Type{Precision: 18, Scale: 2})
		}), "field ID 6"},
		{"timestamptz stored without zone", foreign(func(fs []arrow.Field) []arrow.Field {
			return replace(fs, 12, &arrow.TimestampType{Unit: arrow.Microsecond})
		}), "field ID 12"},
		{"timestamp in milliseconds", foreign(func(fs []arrow.Field) []arrow.Field {
			return replace(fs, 11, &arrow.TimestampType{Unit: arrow.Millisecond})
		}), "field ID 11"},
		{"decimal of another scale", foreign(func(fs []arrow.Field) []arrow.Field {
			return replace(fs, 6, &arrow.Decimal128Type{Precision: 9, Scale: 3})
		}), "field ID 6"},
		{"struct under a stored field ID", foreign(func(fs []arrow.Field) []arrow.Field {
			return replace(fs, 2, arrow.StructOf(rfWithID("inner", arrow.PrimitiveTypes.Int32, 5000)))
		}), "field ID 2"},
		{"field ID twice", foreign(func(fs []arrow.Field) []arrow.Field {
			return append(fs, rfWithID("again", arrow.PrimitiveTypes.Int32, 2))
		}), "two columns have field ID 2"},
		{"empty", nil, ""},
		{"magic only", []byte("PAR1"), ""},
		{"truncated footer", good[:len(good)-1], ""},
		{"truncated in half", good[:len(good)/2], ""},
		{"footer of another size", append(slices.Clone(good[:len(good)-8]), 0xff, 0xff, 0, 0, 'P', 'A', 'R', '1'), ""},
		{"garbage", garbage, ""},
		{"garbage between magics", append(append([]byte("PAR1"), garbage...), 40, 0, 0, 0, 'P', 'A', 'R', '1'), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const name = "s3://bucket/index/range-00042.parquet"
			r, err := OpenRangeFile(bytes.NewReader(tc.data), name, s, RangeFileReadOptions{})
			if err == nil {
				r.Close()
				t.Fatal("OpenRangeFile succeeded")
			}
			var corrupt *CorruptFileError
			if !errors.As(err, &corrupt) || corrupt.Path != name || !strings.Contains(err.Error(), name) || !IsCorruption(err) {
				t.Fatalf("error %v (%T), want a *CorruptFileError naming %s", err, err, name)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestRangeFileCorruptPageIsFoundOnRead(t *testing.T) {
	s := rfSimpleIndex(t)
	rows := make([]rfRow, 100)
	for i := range rows {
		rows[i] = rfRow{1: int64(i), 2: "x", rfFileID: "f", rfPosID: int64(i)}
	}
	data, _ := rfWrite(t, memory.NewGoAllocator(), s, rows, RangeFileOptions{})
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	cc, err := pf.MetaData().RowGroup(0).ColumnChunk(0)
	if err != nil {
		t.Fatal(err)
	}
	off := cc.DataPageOffset()
	pf.Close()
	data = slices.Clone(data)
	copy(data[off:], bytes.Repeat([]byte{0xff}, 12)) // the page header

	const name = "file:///tmp/range.parquet"
	r, err := OpenRangeFile(bytes.NewReader(data), name, s, RangeFileReadOptions{})
	if err != nil {
		t.Fatalf("open: %v (the footer is intact)", err)
	}
	defer r.Close()
	err = r.Read(context.Background(), nil, nil, func(arrow.RecordBatch) error { return nil })
	var corrupt *CorruptFileError
	if !errors.As(err, &corrupt) || corrupt.Path != name {
		t.Fatalf("Read = %v, want a *CorruptFileError naming %s", err, name)
	}
	// The direct decode of an IN over every page says the same.
	done, err := r.ReadMatchingInts(context.Background(), 0, []int{1},
		func([][]int64, [][]bool, []bool) error { return nil }, func(arrow.RecordBatch) error { return nil })
	if !done || !errors.As(err, &corrupt) || corrupt.Path != name {
		t.Fatalf("ReadMatchingInts = %v, %v, want a *CorruptFileError naming %s", done, err, name)
	}
}

var errRFStorage = errors.New("storage unavailable")

// rfFlakyReader fails every read once failing is set, as a storage outage
// would.
type rfFlakyReader struct {
	*bytes.Reader
	failing bool
}

func (f *rfFlakyReader) ReadAt(p []byte, off int64) (int, error) {
	if f.failing {
		return 0, errRFStorage
	}
	return f.Reader.ReadAt(p, off)
}

func TestRangeFileStorageFailureIsNotCorruption(t *testing.T) {
	s := rfSimpleIndex(t)
	rows := []rfRow{{1: int64(1), 2: "a", rfFileID: "f", rfPosID: int64(0)}}
	data, _ := rfWrite(t, memory.NewGoAllocator(), s, rows, RangeFileOptions{})

	src := &rfFlakyReader{Reader: bytes.NewReader(data), failing: true}
	_, err := OpenRangeFile(src, "r.parquet", s, RangeFileReadOptions{})
	var corrupt *CorruptFileError
	if !errors.Is(err, errRFStorage) || errors.As(err, &corrupt) {
		t.Errorf("open over failing storage = %v, want the storage error, not corruption", err)
	}

	src.failing = false
	r, err := OpenRangeFile(src, "r.parquet", s, RangeFileReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	src.failing = true
	err = r.Read(context.Background(), nil, nil, func(arrow.RecordBatch) error { return nil })
	if !errors.Is(err, errRFStorage) || errors.As(err, &corrupt) || !strings.Contains(err.Error(), "r.parquet") {
		t.Errorf("read over failing storage = %v, want the storage error naming the file, not corruption", err)
	}
}

func FuzzOpenRangeFile(f *testing.F) {
	s := rfAllTypesIndex(f)
	data, _ := rfWrite(f, memory.NewGoAllocator(), s, rfRandomRows(s, 6, 30), RangeFileOptions{RowGroupRows: 10})
	f.Add(data)
	f.Add(data[:len(data)-3])
	f.Add(data[len(data)/3:])
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := OpenRangeFile(bytes.NewReader(data), "fuzz.parquet", s, RangeFileReadOptions{})
		var corrupt *CorruptFileError
		if err != nil {
			if !errors.As(err, &corrupt) {
				t.Fatalf("open: %v is not a *CorruptFileError", err)
			}
			return
		}
		defer r.Close()
		for g := range r.NumRowGroups() {
			r.RowGroupStats(g)
		}
		err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
			// Every value must be usable as what its type promises.
			for c, fld := range rec.Schema().Fields() {
				id, _ := arrowFieldID(fld)
				f, _ := s.Field(id)
				for i := range int(rec.NumRows()) {
					if err := CheckValue(f.Type, ValueAtAs(f.Type, rec.Column(c), i)); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil && !errors.As(err, &corrupt) {
			t.Fatalf("read: %v is not a *CorruptFileError", err)
		}
	})
}

// A field asked for as a dictionary comes as one, with the values a plain
// read gives, from Read and ReadRows alike; other fields are untouched.
func TestRangeFileReadsDictionaryFields(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s := rfSimpleIndex(t)
	rows := make([]rfRow, 500)
	for i := range rows {
		rows[i] = rfRow{1: int64(i), 2: fmt.Sprintf("name-%03d", i), rfFileID: fmt.Sprintf("s3://bucket/table/data/%02d.parquet", i%3), rfPosID: int64(i / 3)}
	}
	data, _ := rfWrite(t, mem, s, rows, RangeFileOptions{RowGroupRows: 200})
	r, err := OpenRangeFile(bytes.NewReader(data), "mem://range.parquet", s, RangeFileReadOptions{Allocator: mem, BatchRows: 64, DictionaryFields: []int{rfFileID}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []rfRow
	err = r.Read(context.Background(), nil, nil, func(rec arrow.RecordBatch) error {
		for c, f := range rec.Schema().Fields() {
			id, _ := arrowFieldID(f)
			_, isDict := rec.Column(c).(*array.Dictionary)
			if isDict != (id == rfFileID) {
				return fmt.Errorf("field %d (%s) read as %s", id, f.Name, rec.Column(c).DataType())
			}
		}
		got = append(got, rfRowsOf(s, rec)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rfCheckRows(t, s, rfStoredIDs(s), got, rows)

	var picked []string
	err = r.ReadRows(context.Background(), []int{rfFileID}, 1, []int64{0, 7, 199}, func(rec arrow.RecordBatch) error {
		for i := range int(rec.NumRows()) {
			picked = append(picked, strings.Clone(ValueAt(rec.Column(0), i).(string)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{rows[200][rfFileID].(string), rows[207][rfFileID].(string), rows[399][rfFileID].(string)}
	if !slices.Equal(picked, want) {
		t.Errorf("ReadRows of a dictionary field: %q, want %q", picked, want)
	}
}
