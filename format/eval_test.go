package format

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

// randomValue draws a canonical value of type t, null one time in five.
func randomValue(r *rand.Rand, t iceberg.Type) any {
	if r.IntN(5) == 0 {
		return nil
	}
	switch t := t.(type) {
	case iceberg.BooleanType:
		return r.IntN(2) == 0
	case iceberg.Int32Type:
		return int32(r.Uint32())
	case iceberg.Int64Type:
		return int64(r.Uint64())
	case iceberg.Float64Type:
		return r.NormFloat64()
	case iceberg.DecimalType:
		if t.Precision() > 18 {
			return decimal128.New(r.Int64N(1<<40)-1<<39, r.Uint64())
		}
		return decimal128.FromI64(r.Int64N(2_000_000_000) - 1_000_000_000)
	case iceberg.DateType:
		return int32(r.IntN(2_000_000) - 1_000_000)
	case iceberg.TimeType:
		return r.Int64N(86_400_000_000)
	case iceberg.TimestampType, iceberg.TimestampTzType:
		return r.Int64N(1<<58) - 1<<57
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return int64(r.Uint64())
	case iceberg.StringType:
		return randomString(r)
	case iceberg.UUIDType:
		var u uuid.UUID
		for i := range u {
			u[i] = byte(r.Uint32())
		}
		return u
	case iceberg.FixedType:
		b := make([]byte, t.Len())
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case iceberg.BinaryType:
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	panic(fmt.Sprintf("no random values of %s", t))
}

// buildColumn appends values to a new array of Arrow type dt.
func buildColumn(t testing.TB, mem memory.Allocator, dt arrow.DataType, values []any) arrow.Array {
	t.Helper()
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for _, v := range values {
		if db, ok := b.(*array.BinaryDictionaryBuilder); ok && v != nil {
			if err := db.AppendString(v.(string)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := AppendValue(b, v); err != nil {
			t.Fatal(err)
		}
	}
	return b.NewArray()
}

func fieldWithID(name string, dt arrow.DataType, id int) arrow.Field {
	return arrow.Field{Name: name, Type: dt, Nullable: true,
		Metadata: arrow.NewMetadata([]string{"PARQUET:field_id"}, []string{strconv.Itoa(id)})}
}

// singleColumn is a record batch of one column with field ID 1, sliced so
// that its arrays start at a non-zero offset.
func singleColumn(t testing.TB, mem memory.Allocator, dt arrow.DataType, values []any) arrow.RecordBatch {
	t.Helper()
	col := buildColumn(t, mem, dt, values)
	defer col.Release()
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{fieldWithID("c", dt, 1)}, nil), []arrow.Array{col}, int64(col.Len()))
	defer rec.Release()
	return rec.NewSlice(3, rec.NumRows()-2)
}

var transformCalls = []struct {
	fn    string
	param int
}{
	{"identity", 0}, {"bucket", 7}, {"bucket", 1000}, {"truncate", 1}, {"truncate", 3},
	{"truncate", 50}, {"year", 0}, {"month", 0}, {"day", 0}, {"hour", 0},
}

func callExpr(fn string, param int, arg Expr) Apply {
	if fn == "bucket" || fn == "truncate" {
		return NewApply(fn, IntLit(param), arg)
	}
	return NewApply(fn, arg)
}

// checkRowByRow asserts that out holds fn applied to every row of in.
func checkRowByRow(t *testing.T, fn string, param int, src, result iceberg.Type, in, out arrow.Array) {
	t.Helper()
	want, _ := ArrowType(result)
	if !arrow.TypeEqual(out.DataType(), want) {
		t.Fatalf("result type %s, want %s", out.DataType(), want)
	}
	if out.Len() != in.Len() {
		t.Fatalf("%d rows, want %d", out.Len(), in.Len())
	}
	for i := range in.Len() {
		v := ValueAtAs(src, in, i)
		w, err := TransformValue(fn, param, src, v)
		if err != nil {
			t.Fatal(err)
		}
		if g := ValueAtAs(result, out, i); Compare(result, g, w) != 0 {
			t.Fatalf("row %d: %s(%s) = %s, TransformValue gives %s", i, fn, FormatValue(src, v),
				FormatValue(result, g), FormatValue(result, w))
		}
	}
}

func TestEvaluateAgreesWithTransformValue(t *testing.T) {
	sources := []struct {
		name   string
		typ    iceberg.Type
		layout arrow.DataType // nil: ArrowType(typ)
	}{
		{"int", tInt, nil},
		{"long", tLong, nil},
		{"decimal(9,2)", iceberg.DecimalTypeOf(9, 2), nil},
		{"decimal(38,6)", iceberg.DecimalTypeOf(38, 6), nil},
		{"date", tDate, nil},
		{"time", tTime, nil},
		{"timestamp", tTimestamp, nil},
		{"timestamptz", tTimestampTz, nil},
		{"timestamp_ns", tTimestampNs, nil},
		{"timestamptz_ns", tTsTzNs, nil},
		{"string", tString, nil},
		{"string as large_string", tString, arrow.BinaryTypes.LargeString},
		{"string as dictionary", tString, &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}},
		{"uuid", tUUID, nil},
		{"uuid as fixed_size_binary(16)", tUUID, &arrow.FixedSizeBinaryType{ByteWidth: 16}},
		{"fixed[5]", iceberg.FixedTypeOf(5), nil},
		{"binary", tBinary, nil},
		{"binary as large_binary", tBinary, arrow.BinaryTypes.LargeBinary},
		{"boolean", tBool, nil},
		{"double", iceberg.PrimitiveTypes.Float64, nil},
	}
	r := rand.New(rand.NewPCG(7, 8))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, s := range sources {
		dt := s.layout
		if dt == nil {
			dt, _ = ArrowType(s.typ)
		}
		values := make([]any, 400)
		for i := range values {
			values[i] = randomValue(r, s.typ)
		}
		rec := singleColumn(t, mem, dt, values)
		cols := RecordColumns(rec, nil)
		// The column's own Iceberg type may be fixed[16] for uuid storage;
		// both hash and compare alike.
		src, err := icebergTypeOf(dt)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range transformCalls {
			result, err := transformResult(c.fn, src)
			if err != nil {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s[%d]", s.name, c.fn, c.param), func(t *testing.T) {
				out, err := Evaluate(mem, callExpr(c.fn, c.param, Ref{ID: 1}), result, cols)
				if err != nil {
					t.Fatal(err)
				}
				defer out.Release()
				checkRowByRow(t, c.fn, c.param, src, result, rec.Column(0), out)
				if c.fn != "identity" && out.NullN() != rec.Column(0).NullN() {
					t.Errorf("%d nulls out, %d in", out.NullN(), rec.Column(0).NullN())
				}
			})
		}
		rec.Release()
	}
}

func TestEvaluateNestedTransforms(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cases := []struct {
		typ    iceberg.Type
		expr   Expr
		result iceberg.Type
		apply  func(v any) any
	}{
		{
			tString,
			NewApply("bucket", IntLit(4), NewApply("truncate", IntLit(3), Ref{ID: 1})),
			tInt,
			func(v any) any {
				tr, _ := TransformValue("truncate", 3, tString, v)
				b, _ := TransformValue("bucket", 4, tString, tr)
				return b
			},
		},
		{
			tTimestampNs,
			NewApply("year", NewApply("day", Ref{ID: 1})),
			tInt,
			func(v any) any {
				d, _ := TransformValue("day", 0, tTimestampNs, v)
				y, _ := TransformValue("year", 0, tDate, d)
				return y
			},
		},
	}
	for _, c := range cases {
		dt, _ := ArrowType(c.typ)
		values := make([]any, 300)
		for i := range values {
			values[i] = randomValue(r, c.typ)
		}
		rec := singleColumn(t, mem, dt, values)
		out, err := Evaluate(mem, c.expr, c.result, RecordColumns(rec, nil))
		if err != nil {
			t.Fatal(err)
		}
		for i := range out.Len() {
			v := ValueAtAs(c.typ, rec.Column(0), i)
			if got, want := ValueAt(out, i), c.apply(v); got != want {
				t.Errorf("%s of %v = %v, want %v", c.expr, v, got, want)
			}
		}
		out.Release()
		rec.Release()
	}
}

func TestEvaluateConformsToDeclaredType(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	cases := []struct {
		name   string
		layout arrow.DataType
		values []any
		want   iceberg.Type
		expect []any
	}{
		{"int promoted to long", arrow.PrimitiveTypes.Int32,
			[]any{int32(1), nil, int32(-5), int32(7), nil, int32(9), int32(2), int32(3)}, tLong,
			[]any{int64(7), nil, int64(9)}},
		{"large_string to string", arrow.BinaryTypes.LargeString,
			[]any{"a", "bb", "c", "dddd", nil, "イ", "x", "y"}, tString,
			[]any{"dddd", nil, "イ"}},
		{"fixed_size_binary(16) to uuid", &arrow.FixedSizeBinaryType{ByteWidth: 16},
			[]any{u[:], u[:], u[:], nil, u[:], u[:], u[:], u[:]}, tUUID,
			[]any{nil, u, u}},
		{"other time zone label", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "+00:00"},
			[]any{int64(1), int64(2), int64(3), int64(4), nil, int64(6), int64(7), int64(8)}, tTimestampTz,
			[]any{int64(4), nil, int64(6)}},
		{"decimal widened", &arrow.Decimal128Type{Precision: 9, Scale: 2},
			[]any{nil, nil, nil, decimal128.FromI64(1), decimal128.FromI64(-1065), nil, nil, nil}, iceberg.DecimalTypeOf(18, 2),
			[]any{decimal128.FromI64(1), decimal128.FromI64(-1065), nil}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := singleColumn(t, mem, c.layout, c.values) // rows 3..5 of the values
			defer rec.Release()
			out, err := Evaluate(mem, Ref{ID: 1}, c.want, RecordColumns(rec, nil))
			if err != nil {
				t.Fatal(err)
			}
			defer out.Release()
			wantDT, _ := ArrowType(c.want)
			if !arrow.TypeEqual(out.DataType(), wantDT) {
				t.Fatalf("type %s, want %s", out.DataType(), wantDT)
			}
			if out.Len() != len(c.expect) {
				t.Fatalf("%d rows, want %d", out.Len(), len(c.expect))
			}
			for i, w := range c.expect {
				if g := ValueAtAs(c.want, out, i); Compare(c.want, g, w) != 0 {
					t.Errorf("row %d = %v, want %v", i, g, w)
				}
			}
		})
	}
}

func TestEvaluateErrors(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := singleColumn(t, mem, arrow.BinaryTypes.String, []any{"a", "b", "c", "d", "e", "f"})
	defer rec.Release()
	cols := RecordColumns(rec, nil)
	cases := []struct {
		expr Expr
		t    iceberg.Type
		want string
	}{
		{Ref{ID: 1}, tLong, "produces string, want long"},
		{NewApply("bucket", IntLit(4), Ref{ID: 1}), tString, "produces int, want string"},
		{Ref{ID: 42}, tString, "field 42"},
		{IntLit(3), tInt, "literal"},
		{NewApply("hour", Ref{ID: 1}), tInt, "hour cannot be applied to type string"},
		{NewApply("bucket", IntLit(0), Ref{ID: 1}), tInt, "positive"},
	}
	for _, c := range cases {
		out, err := Evaluate(mem, c.expr, c.t, cols)
		if err == nil {
			out.Release()
			t.Errorf("Evaluate(%s): no error", c.expr)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("Evaluate(%s): error %q lacks %q", c.expr, err, c.want)
		}
	}
}

func TestRecordColumns(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := iceberg.NewSchema(0,
		iceberg.NestedField{ID: 1, Name: "id", Type: tLong},
		iceberg.NestedField{ID: 2, Name: "name", Type: tString},
		iceberg.NestedField{ID: 3, Name: "loc", Type: &iceberg.StructType{FieldList: []iceberg.NestedField{
			{ID: 4, Name: "city", Type: tString},
			{ID: 5, Name: "zip", Type: tInt},
		}}},
	)
	// The struct is null in row 1; its children hold values there anyway,
	// which Arrow allows.
	cities := buildColumn(t, mem, arrow.BinaryTypes.String, []any{"Oslo", "Lima", "Rome", "Kyiv"})
	defer cities.Release()
	zips := buildColumn(t, mem, arrow.PrimitiveTypes.Int32, []any{int32(1000), int32(1001), int32(1002), int32(1003)})
	defer zips.Release()
	locValid := []bool{true, false, true, true}
	locFields := []arrow.Field{
		{Name: "city", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "zip", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	}
	locFieldsWithIDs := []arrow.Field{
		fieldWithID("town", arrow.BinaryTypes.String, 4),
		fieldWithID("zip", arrow.PrimitiveTypes.Int32, 5),
	}
	locByName := structWithNulls(t, []arrow.Array{cities, zips}, locFields, locValid)
	defer locByName.Release()
	locByID := structWithNulls(t, []arrow.Array{cities, zips}, locFieldsWithIDs, locValid)
	defer locByID.Release()
	ids := buildColumn(t, mem, arrow.PrimitiveTypes.Int64, []any{int64(10), int64(11), int64(12), int64(13)})
	defer ids.Release()
	names := buildColumn(t, mem, arrow.BinaryTypes.String, []any{"a", "b", nil, "d"})
	defer names.Release()
	files := buildColumn(t, mem, arrow.BinaryTypes.String, []any{"f.parquet", "f.parquet", "f.parquet", "f.parquet"})
	defer files.Release()
	positions := buildColumn(t, mem, arrow.PrimitiveTypes.Int64, []any{int64(0), int64(1), int64(2), int64(3)})
	defer positions.Release()

	byName := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "loc", Type: locByName.DataType(), Nullable: true},
		{Name: "_file", Type: arrow.BinaryTypes.String},
		{Name: "_pos", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	// Renamed columns carry their IDs; "name" here is a dropped column with
	// another ID, which must not be taken for field 2 by its name.
	byID := arrow.NewSchema([]arrow.Field{
		fieldWithID("key", arrow.PrimitiveTypes.Int64, 1),
		fieldWithID("name", arrow.BinaryTypes.String, 77),
		fieldWithID("place", locByID.DataType(), 3),
		fieldWithID("file_path", arrow.BinaryTypes.String, FieldIDFile),
		fieldWithID("row_pos", arrow.PrimitiveTypes.Int64, FieldIDPos),
	}, nil)

	cases := []struct {
		id   int
		typ  iceberg.Type
		want []any // rows 1..3 of the batch before slicing
	}{
		{1, tLong, []any{int64(11), int64(12), int64(13)}},
		{4, tString, []any{nil, "Rome", "Kyiv"}},
		{5, tInt, []any{nil, int32(1002), int32(1003)}},
		{FieldIDFile, tString, []any{"f.parquet", "f.parquet", "f.parquet"}},
		{FieldIDPos, tLong, []any{int64(1), int64(2), int64(3)}},
	}
	for _, sc := range []struct {
		name   string
		schema *arrow.Schema
		loc    arrow.Array
	}{{"by name", byName, locByName}, {"by field ID", byID, locByID}} {
		full := array.NewRecordBatch(sc.schema, []arrow.Array{ids, names, sc.loc, files, positions}, 4)
		rec := full.NewSlice(1, 4)
		full.Release()
		cols := RecordColumns(rec, schema)
		if cols.Len() != 3 {
			t.Errorf("%s: Len = %d, want 3", sc.name, cols.Len())
		}
		for _, c := range cases {
			col, err := cols.Column(c.id)
			if err != nil {
				t.Errorf("%s: field %d: %v", sc.name, c.id, err)
				continue
			}
			for i, w := range c.want {
				if g := ValueAtAs(c.typ, col, i); Compare(c.typ, g, w) != 0 {
					t.Errorf("%s: field %d row %d = %v, want %v", sc.name, c.id, i, g, w)
				}
			}
		}
		name, err := cols.Column(2)
		switch sc.name {
		case "by name":
			if err != nil || ValueAt(name, 1) != nil || ValueAt(name, 2) != "d" {
				t.Errorf("by name: field 2 = %v, %v", name, err)
			}
		case "by field ID":
			if err == nil {
				t.Errorf("by field ID: field 2 found though only a column with ID 77 has its name")
			}
		}
		if _, err := cols.Column(6); err == nil || !strings.Contains(err.Error(), "field 6") {
			t.Errorf("%s: field 6: error %v, want one naming the field", sc.name, err)
		}
		rec.Release()
	}
}

// structWithNulls builds a struct array over children whose values under
// null struct rows stay as they are.
func structWithNulls(t *testing.T, children []arrow.Array, fields []arrow.Field, valid []bool) arrow.Array {
	t.Helper()
	bitmap := make([]byte, bitutil.BytesForBits(int64(len(valid))))
	nulls := 0
	for i, ok := range valid {
		bitutil.SetBitTo(bitmap, i, ok)
		if !ok {
			nulls++
		}
	}
	st, err := array.NewStructArrayWithFieldsAndNulls(children, fields, memory.NewBufferBytes(bitmap), nulls, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestEvaluateNestedStructField(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// outer{inner{v}}: inner is null in rows 0 and 3, outer in row 4, and
	// v itself in row 5; v has values under every null struct.
	v := buildColumn(t, mem, arrow.PrimitiveTypes.Int64, []any{int64(34), int64(35), int64(36), int64(37), int64(38), nil, int64(40)})
	inner := structWithNulls(t, []arrow.Array{v}, []arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true}},
		[]bool{false, true, true, false, true, true, true})
	v.Release()
	outer := structWithNulls(t, []arrow.Array{inner}, []arrow.Field{{Name: "inner", Type: inner.DataType(), Nullable: true}},
		[]bool{true, true, true, true, false, true, true})
	inner.Release()
	schema := iceberg.NewSchema(0, iceberg.NestedField{ID: 1, Name: "outer", Type: &iceberg.StructType{
		FieldList: []iceberg.NestedField{{ID: 2, Name: "inner", Type: &iceberg.StructType{
			FieldList: []iceberg.NestedField{{ID: 3, Name: "v", Type: tLong}}}}}}})
	full := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{{Name: "outer", Type: outer.DataType(), Nullable: true}}, nil), []arrow.Array{outer}, 7)
	outer.Release()
	rec := full.NewSlice(0, 6)
	full.Release()
	defer rec.Release()
	out, err := Evaluate(mem, NewApply("bucket", IntLit(16), Ref{ID: 3}), tInt, RecordColumns(rec, schema))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	for i := range 6 {
		var want any
		if i == 1 || i == 2 {
			want, _ = TransformValue("bucket", 16, tLong, int64(34+i))
		}
		if got := ValueAt(out, i); got != want {
			t.Errorf("row %d: bucket = %v, want %v", i, got, want)
		}
	}
}

const benchRows = 64 * 1024

func benchmarkEvaluate(b *testing.B, typ iceberg.Type, e Expr, result iceberg.Type, gen func(r *rand.Rand) any) {
	r := rand.New(rand.NewPCG(11, 12))
	values := make([]any, benchRows)
	for i := range values {
		values[i] = gen(r)
	}
	dt, _ := ArrowType(typ)
	col := buildColumn(b, memory.DefaultAllocator, dt, values)
	rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{fieldWithID("c", dt, 1)}, nil), []arrow.Array{col}, benchRows)
	col.Release()
	defer rec.Release()
	cols := RecordColumns(rec, nil)
	b.ResetTimer()
	for b.Loop() {
		out, err := Evaluate(memory.DefaultAllocator, e, result, cols)
		if err != nil {
			b.Fatal(err)
		}
		out.Release()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
}

func BenchmarkEvaluateBucketLong(b *testing.B) {
	benchmarkEvaluate(b, tLong, NewApply("bucket", IntLit(16), Ref{ID: 1}), tInt,
		func(r *rand.Rand) any { return int64(r.Uint64()) })
}

func BenchmarkEvaluateTruncateString(b *testing.B) {
	benchmarkEvaluate(b, tString, NewApply("truncate", IntLit(4), Ref{ID: 1}), tString,
		func(r *rand.Rand) any { return randomString(r) + randomString(r) })
}

func TestEvaluateEmptyBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, typ := range []iceberg.Type{tInt, tLong, tDate, tTimestamp, tTimestampNs, tString, tBinary, tUUID,
		iceberg.DecimalTypeOf(9, 2)} {
		for _, layout := range []string{"built empty", "sliced empty"} {
			dt, _ := ArrowType(typ)
			b := array.NewBuilder(mem, dt)
			col := b.NewArray()
			b.Release()
			rec := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{fieldWithID("c", dt, 1)}, nil), []arrow.Array{col}, 0)
			col.Release()
			if layout == "sliced empty" {
				r := rand.New(rand.NewPCG(1, 1))
				values := make([]any, 5) // singleColumn keeps rows 3 to 3
				for i := range values {
					values[i] = randomValue(r, typ)
				}
				rec.Release()
				rec = singleColumn(t, mem, dt, values)
			}
			for _, c := range transformCalls {
				result, err := transformResult(c.fn, typ)
				if err != nil {
					continue
				}
				out, err := Evaluate(mem, callExpr(c.fn, c.param, Ref{ID: 1}), result, RecordColumns(rec, nil))
				if err != nil {
					t.Errorf("%s %s: %s[%d]: %v", layout, typ, c.fn, c.param, err)
					continue
				}
				if out.Len() != 0 {
					t.Errorf("%s %s: %s[%d]: %d rows", layout, typ, c.fn, c.param, out.Len())
				}
				out.Release()
			}
			rec.Release()
		}
	}
}
