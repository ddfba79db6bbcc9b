package format

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/extensions"
	"github.com/apache/iceberg-go"
)

// ParquetFieldIDKey is the Arrow field metadata key that carries a field's
// Iceberg field ID, as Parquet readers and writers (and iceberg-go) spell
// it.
const ParquetFieldIDKey = "PARQUET:field_id"

// ArrowType is the Arrow type that holds values of the Iceberg primitive
// type t, with regular (not large) offsets: the mapping iceberg-go uses for
// Parquet files (TestArrowTypesAreIcebergGos holds the two equal). It is
// written here rather than taken from iceberg-go's table package so that a
// program reading an index need not link that package, whose
// initialisation alone takes tens of milliseconds.
func ArrowType(t iceberg.Type) (arrow.DataType, error) {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return arrow.FixedWidthTypes.Boolean, nil
	case iceberg.Int32Type:
		return arrow.PrimitiveTypes.Int32, nil
	case iceberg.Int64Type:
		return arrow.PrimitiveTypes.Int64, nil
	case iceberg.Float32Type:
		return arrow.PrimitiveTypes.Float32, nil
	case iceberg.Float64Type:
		return arrow.PrimitiveTypes.Float64, nil
	case iceberg.DecimalType:
		return &arrow.Decimal128Type{Precision: int32(t.Precision()), Scale: int32(t.Scale())}, nil
	case iceberg.DateType:
		return arrow.FixedWidthTypes.Date32, nil
	case iceberg.TimeType:
		return arrow.FixedWidthTypes.Time64us, nil
	case iceberg.TimestampType:
		return &arrow.TimestampType{Unit: arrow.Microsecond}, nil
	case iceberg.TimestampTzType:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, nil
	case iceberg.TimestampNsType:
		return &arrow.TimestampType{Unit: arrow.Nanosecond}, nil
	case iceberg.TimestampTzNsType:
		return &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, nil
	case iceberg.StringType:
		return arrow.BinaryTypes.String, nil
	case iceberg.BinaryType:
		return arrow.BinaryTypes.Binary, nil
	case iceberg.FixedType:
		return &arrow.FixedSizeBinaryType{ByteWidth: t.Len()}, nil
	case iceberg.UUIDType:
		return extensions.NewUUIDType(), nil
	case iceberg.UnknownType:
		return arrow.Null, nil
	}
	return nil, fmt.Errorf("arrow type of %s: index fields hold primitive values only", t)
}

// ArrowSchema converts an Iceberg schema from StoredSchema or EntrySchema to
// Arrow with the Parquet field IDs (and docs) on every field, by ArrowType.
func ArrowSchema(sc *iceberg.Schema) (*arrow.Schema, error) {
	fields := make([]arrow.Field, 0, len(sc.Fields()))
	for _, f := range sc.Fields() {
		dt, err := ArrowType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("arrow schema of index fields: field %s: %w", f.Name, err)
		}
		keys, vals := []string{ParquetFieldIDKey}, []string{strconv.Itoa(f.ID)}
		if f.Doc != "" {
			keys, vals = append(keys, "doc"), append(vals, f.Doc)
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: dt, Nullable: !f.Required, Metadata: arrow.NewMetadata(keys, vals)})
	}
	return arrow.NewSchema(fields, nil), nil
}
