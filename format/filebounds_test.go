package format

import (
	"encoding/binary"
	"testing"

	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
)

func le32(v int32) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(v)) }
func le64(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }

func TestBoundValueDecodesTheSingleValueForm(t *testing.T) {
	u := uuid.New()
	for _, tc := range []struct {
		t    iceberg.Type
		b    []byte
		want any
	}{
		{iceberg.PrimitiveTypes.Int32, le32(-7), int32(-7)},
		{iceberg.PrimitiveTypes.Date, le32(19000), int32(19000)},
		{iceberg.PrimitiveTypes.Int64, le64(1 << 40), int64(1 << 40)},
		{iceberg.PrimitiveTypes.Int64, le32(-5), int64(-5)}, // written before int -> long
		{iceberg.PrimitiveTypes.TimestampTz, le64(1_700_000_000_000_000), int64(1_700_000_000_000_000)},
		{iceberg.PrimitiveTypes.String, []byte("order-17"), "order-17"},
		{iceberg.PrimitiveTypes.UUID, u[:], u},
		{iceberg.PrimitiveTypes.Int32, le64(3), nil},            // wrong width
		{iceberg.PrimitiveTypes.Timestamp, le32(3), nil},        // days, not micros
		{iceberg.PrimitiveTypes.Float64, le64(3), nil},          // not decoded
		{iceberg.DecimalTypeOf(10, 2), []byte{0x01, 0x00}, nil}, // not decoded
	} {
		if got := BoundValue(tc.t, tc.b); got != tc.want {
			t.Errorf("BoundValue(%s, %x) = %v (%T), want %v (%T)", tc.t, tc.b, got, got, tc.want, tc.want)
		}
	}
}
