package format

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// Avro binary values: the encoder of the values streamidx writes, and the
// cursor the compiled decoders and the skipper of unknown fields read with.
const (
	// avroMaxSkipDepth bounds the nesting of the values of fields the reader
	// does not know and skips; a recursive schema could otherwise recurse
	// without consuming input.
	avroMaxSkipDepth = 64
	// avroMinSkipBudget is the least number of values the reader may skip in
	// one block; null values take no bytes, so the budget is not only the
	// block's size.
	avroMinSkipBudget = 1 << 20
)

// appendAvro appends the Avro binary encoding of v, whose type t has been
// checked by checkTrackingEntry; a struct's value is a map by field ID.
func appendAvro(b []byte, t iceberg.Type, v any) []byte {
	switch t := t.(type) {
	case *iceberg.StructType:
		m := v.(map[int]any)
		for _, f := range t.FieldList {
			fv := m[f.ID]
			if !f.Required {
				if fv == nil {
					b = append(b, 0) // union branch 0: null
					continue
				}
				b = append(b, 2) // union branch 1
			}
			b = appendAvro(b, f.Type, fv)
		}
		return b
	case iceberg.BooleanType:
		if v.(bool) {
			return append(b, 1)
		}
		return append(b, 0)
	case iceberg.Int32Type, iceberg.DateType:
		return binary.AppendVarint(b, int64(v.(int32)))
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		return binary.AppendVarint(b, v.(int64))
	case iceberg.Float32Type:
		return binary.LittleEndian.AppendUint32(b, math.Float32bits(v.(float32)))
	case iceberg.Float64Type:
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(v.(float64)))
	case iceberg.StringType:
		s := v.(string)
		return append(binary.AppendVarint(b, int64(len(s))), s...)
	case iceberg.BinaryType:
		s := v.([]byte)
		return append(binary.AppendVarint(b, int64(len(s))), s...)
	case iceberg.FixedType:
		return append(b, v.([]byte)...)
	case iceberg.UUIDType:
		u := v.(uuid.UUID)
		return append(b, u[:]...)
	case iceberg.DecimalType:
		n := v.(decimal128.Num)
		var full [16]byte
		binary.BigEndian.PutUint64(full[:8], uint64(n.HighBits()))
		binary.BigEndian.PutUint64(full[8:], n.LowBits())
		// The value fits the precision, so the dropped bytes are sign extension.
		return append(b, full[16-decimalBytes(t.Precision()):]...)
	}
	panic(fmt.Sprintf("format: no Avro encoding for %s", t))
}

// avroCursor decodes Avro binary values from a block. The first error
// sticks, and every read after it returns zero values.
type avroCursor struct {
	b      []byte
	err    error
	budget int // values the skipper may still visit
}

func (c *avroCursor) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
	c.b = nil
}

func (c *avroCursor) long() int64 {
	if c.err != nil {
		return 0
	}
	v, n := binary.Varint(c.b)
	if n <= 0 {
		c.fail("truncated or overlong varint")
		return 0
	}
	c.b = c.b[n:]
	return v
}

func (c *avroCursor) int() int32 {
	v := c.long()
	if v < math.MinInt32 || v > math.MaxInt32 {
		c.fail("int %d is out of range", v)
		return 0
	}
	return int32(v)
}

func (c *avroCursor) take(n int64) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > int64(len(c.b)) {
		c.fail("value of %d bytes runs past the block's end", n)
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *avroCursor) bytes() []byte { return c.take(c.long()) }

func avroPrimitiveDecoder(ws avro.Schema, t iceberg.Type) avroDecodeFunc {
	switch t := t.(type) {
	case iceberg.BooleanType:
		return func(c *avroCursor) any {
			switch b := c.take(1); {
			case b == nil:
				return nil
			case b[0] > 1:
				c.fail("boolean byte %d is neither 0 nor 1", b[0])
				return nil
			default:
				return b[0] == 1
			}
		}
	case iceberg.Int32Type, iceberg.DateType:
		return func(c *avroCursor) any { return c.int() }
	case iceberg.Int64Type, iceberg.TimeType, iceberg.TimestampType, iceberg.TimestampTzType,
		iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		if ws.Type() == avro.Int {
			return func(c *avroCursor) any { return int64(c.int()) }
		}
		return func(c *avroCursor) any { return c.long() }
	case iceberg.Float32Type:
		return func(c *avroCursor) any { return readFloat32(c) }
	case iceberg.Float64Type:
		if ws.Type() == avro.Float {
			return func(c *avroCursor) any { return float64(readFloat32(c)) }
		}
		return func(c *avroCursor) any {
			if b := c.take(8); b != nil {
				return math.Float64frombits(binary.LittleEndian.Uint64(b))
			}
			return float64(0)
		}
	case iceberg.StringType:
		return func(c *avroCursor) any { return string(c.bytes()) }
	case iceberg.BinaryType:
		return func(c *avroCursor) any { return append([]byte{}, c.bytes()...) }
	case iceberg.FixedType:
		return func(c *avroCursor) any { return append([]byte{}, c.take(int64(t.Len()))...) }
	case iceberg.UUIDType:
		return func(c *avroCursor) any {
			var u uuid.UUID
			copy(u[:], c.take(16))
			return u
		}
	case iceberg.DecimalType:
		size := int64(ws.(*avro.FixedSchema).Size())
		return func(c *avroCursor) any {
			b := c.take(size)
			var full [16]byte
			if len(b) > 0 && b[0]&0x80 != 0 {
				for i := range full {
					full[i] = 0xff
				}
			}
			copy(full[16-len(b):], b)
			n := decimal128.New(int64(binary.BigEndian.Uint64(full[:8])), binary.BigEndian.Uint64(full[8:]))
			if !n.FitsInPrecision(int32(t.Precision())) {
				c.fail("decimal %s does not fit %s", n.ToString(int32(t.Scale())), t)
			}
			return n
		}
	}
	panic(fmt.Sprintf("format: no Avro decoder for %s", t))
}

func readFloat32(c *avroCursor) float32 {
	if b := c.take(4); b != nil {
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	}
	return 0
}

// skipAvro skips a value of a field the reader does not know. Every value
// visited spends the cursor's budget: null values and empty records take no
// bytes, so the input's size alone does not bound the work.
func skipAvro(c *avroCursor, s avro.Schema, depth int) {
	if c.err != nil {
		return
	}
	if c.budget--; c.budget < 0 {
		c.fail("too many values to skip")
		return
	}
	if depth > avroMaxSkipDepth {
		c.fail("values nested more than %d deep", avroMaxSkipDepth)
		return
	}
	switch s := derefAvro(s).(type) {
	case *avro.NullSchema:
	case *avro.PrimitiveSchema:
		switch s.Type() {
		case avro.Boolean:
			c.take(1)
		case avro.Int, avro.Long:
			c.long()
		case avro.Float:
			c.take(4)
		case avro.Double:
			c.take(8)
		case avro.String, avro.Bytes:
			c.bytes()
		default:
			c.fail("cannot skip Avro type %s", s.Type())
		}
	case *avro.FixedSchema:
		c.take(int64(s.Size()))
	case *avro.EnumSchema:
		if i := c.long(); c.err == nil && (i < 0 || i >= int64(len(s.Symbols()))) {
			c.fail("enum index %d does not exist", i)
		}
	case *avro.RecordSchema:
		for _, f := range s.Fields() {
			skipAvro(c, f.Type(), depth+1)
		}
	case *avro.UnionSchema:
		types := s.Types()
		i := c.long()
		if c.err == nil && (i < 0 || i >= int64(len(types))) {
			c.fail("union branch %d does not exist", i)
			return
		}
		skipAvro(c, types[i], depth+1)
	case *avro.ArraySchema:
		skipAvroBlocks(c, func() { skipAvro(c, s.Items(), depth+1) })
	case *avro.MapSchema:
		skipAvroBlocks(c, func() { c.bytes(); skipAvro(c, s.Values(), depth+1) })
	default:
		c.fail("cannot skip Avro type %s", s.Type())
	}
}

// skipAvroBlocks skips the blocks of an array or a map.
func skipAvroBlocks(c *avroCursor, item func()) {
	for c.err == nil {
		n := c.long()
		if n == 0 {
			return
		}
		if n < 0 {
			n = -n
			c.long() // the block's size in bytes
		}
		if n < 0 || n > int64(len(c.b)) {
			c.fail("block of %d items is out of range", n)
			return
		}
		for ; n > 0 && c.err == nil; n-- {
			item()
		}
	}
}
