package format

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestArrowTypesAreIcebergGos holds ArrowType and ArrowSchema to the
// mapping of iceberg-go's table package (regular offsets, field IDs on),
// which range files were written with before this package had its own:
// every primitive type, required and optional fields, a doc.
func TestArrowTypesAreIcebergGos(t *testing.T) {
	types := []iceberg.Type{
		iceberg.PrimitiveTypes.Bool, iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Int64,
		iceberg.PrimitiveTypes.Float32, iceberg.PrimitiveTypes.Float64, iceberg.DecimalTypeOf(9, 2),
		iceberg.DecimalTypeOf(38, 10), iceberg.PrimitiveTypes.Date, iceberg.PrimitiveTypes.Time,
		iceberg.PrimitiveTypes.Timestamp, iceberg.PrimitiveTypes.TimestampTz, iceberg.PrimitiveTypes.TimestampNs,
		iceberg.PrimitiveTypes.TimestampTzNs, iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.Binary,
		iceberg.FixedTypeOf(12), iceberg.PrimitiveTypes.UUID, iceberg.PrimitiveTypes.Unknown,
	}
	var fields []iceberg.NestedField
	for i, ty := range types {
		want, err := table.TypeToArrowType(ty, false, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ArrowType(ty)
		if err != nil {
			t.Fatalf("ArrowType(%s): %v", ty, err)
		}
		if !arrow.TypeEqual(got, want) {
			t.Errorf("ArrowType(%s) = %s, iceberg-go's %s", ty, got, want)
		}
		f := iceberg.NestedField{ID: 100 + i, Name: ty.String(), Type: ty, Required: i%2 == 0}
		if i == 3 {
			f.Doc = "a column with a doc"
		}
		fields = append(fields, f)
	}
	sc := iceberg.NewSchema(0, fields...)
	want, err := table.SchemaToArrowSchema(sc, nil, true, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ArrowSchema(sc)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Errorf("ArrowSchema:\n%s\niceberg-go's:\n%s", got, want)
	}
	for i, f := range got.Fields() {
		if !f.Metadata.Equal(want.Field(i).Metadata) {
			t.Errorf("field %s: metadata %v, iceberg-go's %v", f.Name, f.Metadata, want.Field(i).Metadata)
		}
	}
	if _, err := ArrowType(&iceberg.ListType{ElementID: 1, Element: iceberg.PrimitiveTypes.Int32, ElementRequired: true}); err == nil {
		t.Error("ArrowType of a list: no error")
	}
}
