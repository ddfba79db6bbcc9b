package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// DebeziumOptions say how to read what Debezium's JSON converter leaves
// implicit when schemas are disabled (value.converter.schemas.enable=false).
// With the schema in the envelope, the schema decides.
type DebeziumOptions struct {
	// DecimalHandling is the connector's decimal.handling.mode: precise
	// (base64 of the unscaled big-endian value at the column's scale),
	// string or double. Default: precise.
	DecimalHandling string
}

// EnsureDefaults fills unset fields with their defaults.
func (o *DebeziumOptions) EnsureDefaults() {
	if o.DecimalHandling == "" {
		o.DecimalHandling = "precise"
	}
}

func (o DebeziumOptions) decimalMode() (decimalMode, error) {
	switch o.DecimalHandling {
	case "precise":
		return decBytes, nil
	case "string":
		return decString, nil
	case "double":
		return decDouble, nil
	}
	return 0, fmt.Errorf("debezium decimal handling %q: want precise, string or double", o.DecimalHandling)
}

// errTruncate refuses Debezium's truncate event.
var errTruncate = errors.New("truncate event (op t) refused: a truncate removes every row, which events cannot express " +
	"entry by entry; rebuild the index from the table (streamidx build) after the truncate")

// debezium decodes a Debezium change event:
//
//	{"schema": {...}, "payload": {"before": {...}, "after": {...}, "op": "u", "source": {...}, "ts_ms": ...}}
//
// or the payload alone when the converter writes no schema. op c (create)
// and r (read, a snapshot) insert after; u replaces before with after; d
// removes before; t (truncate) is refused. An update and a delete need the
// full before image: every column the index reads. Column values are read
// in the encodings that the schema's semantic types name (dates as days,
// times and timestamps in millis, micros or nanos, ZonedTimestamp strings,
// decimals as base64 bytes at the schema's scale, strings or doubles),
// otherwise as DebeziumOptions and the column's Iceberg type say.
func (d *ChangeDecoder) debezium(top *members, ev *ChangeEvent) error {
	d.encs = d.noSchema
	if top.payload != nil {
		if isNull(top.payload) {
			return ErrTombstone
		}
		if top.schema != nil && !isNull(top.schema) {
			if err := d.useSchema(top.schema); err != nil {
				return err
			}
		}
		inner, err := readTop(top.payload, &passing{d: d, ev: ev})
		if err != nil {
			return fmt.Errorf("debezium payload: %w", err)
		}
		top = &inner
	}
	if top.op == nil {
		return errors.New("debezium event: no op")
	}
	switch string(top.op) {
	case `"c"`, `"r"`:
		ev.Op = OpInsert
	case `"u"`:
		ev.Op = OpUpdate
	case `"d"`:
		ev.Op = OpDelete
	case `"t"`:
		return errTruncate
	default:
		op, err := stringMember(top.op, "debezium op")
		if err != nil {
			return err
		}
		switch op {
		case "c", "r", "u", "d":
			return fmt.Errorf("debezium op %q written with escapes", op)
		case "t":
			return errTruncate
		}
		return fmt.Errorf("debezium op %q: want c, r, u or d", op)
	}
	if ev.Op != OpDelete {
		if top.after == nil || isNull(top.after) {
			return fmt.Errorf("debezium %s event without an after image", ev.Op)
		}
		if !top.afterRead {
			if err := d.decodeImage(top.after, &ev.After, ev); err != nil {
				return fmt.Errorf("after: %w", err)
			}
		}
	}
	if ev.Op != OpInsert {
		if top.before == nil || isNull(top.before) {
			return fmt.Errorf("debezium %s event without a before image: the index needs the old row to remove its entry "+
				"(have the source log full before images, e.g. PostgreSQL REPLICA IDENTITY FULL)", ev.Op)
		}
		if !top.beforeRead {
			if err := d.decodeImage(top.before, &ev.Before, ev); err != nil {
				return fmt.Errorf("before image is not full enough to remove the old entry (have the source log full before images, "+
					"e.g. PostgreSQL REPLICA IDENTITY FULL): %w", err)
			}
		}
	}
	return nil
}

// useSchema takes the column encodings from a Debezium envelope schema,
// reusing those of the previous record when its schema is the same bytes
// (a connector repeats one schema until the table changes).
func (d *ChangeDecoder) useSchema(raw []byte) error {
	if d.schemaEncs != nil && bytes.Equal(raw, d.schema) {
		d.encs = d.schemaEncs
		return nil
	}
	var sch connectSchema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return fmt.Errorf("debezium schema: %w", err)
	}
	cols := map[string]*connectSchema{}
	for i := range sch.Fields {
		f := &sch.Fields[i]
		if f.Field == "after" || f.Field == "before" {
			f.collect("", cols)
		}
	}
	encs := make([]colEncoding, len(d.rc.slots))
	for i, slot := range d.rc.slots {
		encs[i] = d.noSchema[i]
		if c := cols[slot.name]; c != nil {
			enc, err := c.encoding()
			if err != nil {
				return fmt.Errorf("debezium schema of column %s: %w", slot.name, err)
			}
			encs[i] = enc
		}
	}
	d.schema, d.schemaEncs, d.encs = append(d.schema[:0], raw...), encs, encs
	return nil
}

// connectSchema is a Kafka Connect schema as the JSON converter writes it.
type connectSchema struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Field      string            `json:"field"`
	Fields     []connectSchema   `json:"fields"`
	Parameters map[string]string `json:"parameters"`
}

// collect maps the dotted names of the columns of a row struct to their
// schemas, at most a few levels deep.
func (c *connectSchema) collect(prefix string, out map[string]*connectSchema) {
	if len(prefix) > 4096 {
		return
	}
	for i := range c.Fields {
		f := &c.Fields[i]
		name := prefix + f.Field
		out[name] = f
		if f.Type == "struct" {
			f.collect(name+".", out)
		}
	}
}

// encoding is how values of a column with this schema are written.
func (c *connectSchema) encoding() (colEncoding, error) {
	e := colEncoding{scale: -1}
	switch c.Name {
	case "io.debezium.time.Date", "org.apache.kafka.connect.data.Date":
		e.unit = unitDays
	case "io.debezium.time.Time", "io.debezium.time.Timestamp",
		"org.apache.kafka.connect.data.Time", "org.apache.kafka.connect.data.Timestamp":
		e.unit = unitMillis
	case "io.debezium.time.MicroTime", "io.debezium.time.MicroTimestamp":
		e.unit = unitMicros
	case "io.debezium.time.NanoTime", "io.debezium.time.NanoTimestamp":
		e.unit = unitNanos
	case "org.apache.kafka.connect.data.Decimal":
		e.decimal = decBytes
		scale, err := strconv.ParseInt(c.Parameters["scale"], 10, 32)
		if err != nil || scale < 0 || scale > 38 {
			return e, fmt.Errorf("decimal scale %q: want 0 to 38", c.Parameters["scale"])
		}
		e.scale = int32(scale)
		return e, nil
	}
	switch c.Type {
	case "string":
		e.decimal = decString
	case "double", "float", "float32", "float64":
		e.decimal = decDouble
	case "bytes":
		e.decimal = decBytes
	}
	return e, nil
}
