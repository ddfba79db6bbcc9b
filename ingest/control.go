package ingest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// ControlPayloadType is the type of an Apache Iceberg Kafka Connect control
// event (the sink's PayloadType).
type ControlPayloadType int32

// Control event types, numbered as the sink numbers them.
const (
	StartCommit    ControlPayloadType = 0
	DataWritten    ControlPayloadType = 1
	DataComplete   ControlPayloadType = 2
	CommitToTable  ControlPayloadType = 3
	CommitComplete ControlPayloadType = 4
)

func (t ControlPayloadType) String() string {
	switch t {
	case StartCommit:
		return "START_COMMIT"
	case DataWritten:
		return "DATA_WRITTEN"
	case DataComplete:
		return "DATA_COMPLETE"
	case CommitToTable:
		return "COMMIT_TO_TABLE"
	case CommitComplete:
		return "COMMIT_COMPLETE"
	}
	return fmt.Sprintf("PayloadType(%d)", int32(t))
}

// ControlEvent is what streamidx reads of an event of the Iceberg Kafka
// Connect sink's control topic. DATA_COMPLETE and COMMIT_TO_TABLE payloads
// are read, of START_COMMIT and COMMIT_COMPLETE only the commit id, and
// DATA_WRITTEN's not at all: nothing else is needed for a notification.
type ControlEvent struct {
	ID          uuid.UUID
	Type        ControlPayloadType
	TimestampUs int64 // when the event was made, µs from the epoch
	GroupID     string
	// CommitID is the commit the event belongs to.
	CommitID uuid.UUID
	// Assignments are the source-topic positions a worker's data of the
	// commit covers (DATA_COMPLETE): per partition, the next offset after
	// the last record written (Kafka's committed-offset convention).
	Assignments []TopicPartitionOffset
	// Catalog, Namespace and Name name the table committed to
	// (COMMIT_TO_TABLE).
	Catalog   string
	Namespace []string
	Name      string
	// SnapshotID is the snapshot the commit made; HasSnapshot is false when
	// the commit wrote nothing to the table (COMMIT_TO_TABLE).
	SnapshotID  int64
	HasSnapshot bool
}

// Table is the COMMIT_TO_TABLE table as namespace.name.
func (e ControlEvent) Table() string {
	return strings.Join(append(append([]string{}, e.Namespace...), e.Name), ".")
}

// TopicPartitionOffset is one assignment of a DATA_COMPLETE event.
type TopicPartitionOffset struct {
	Topic     string
	Partition int32
	// Offset is the next offset to read; HasOffset is false when the
	// worker has read nothing of the partition.
	Offset    int64
	HasOffset bool
}

// controlMagic starts every control event: Iceberg's AvroEncoderUtil writes
// "aVR", a version byte (1), the writer's Avro schema as JSON behind its
// length (4 bytes, big-endian), then the datum in Avro binary encoding.
var controlMagic = []byte{'a', 'V', 'R', 1}

// maxControlSchema bounds the writer schema of one event.
const maxControlSchema = 1 << 20

// controlSchemas caches parsed writer schemas by their JSON: a sink repeats
// a handful of them.
var controlSchemas = struct {
	sync.Mutex
	m map[string]avro.Schema
}{m: map[string]avro.Schema{}}

const maxCachedControlSchemas = 64

func controlSchema(js []byte) (avro.Schema, error) {
	controlSchemas.Lock()
	defer controlSchemas.Unlock()
	if s, ok := controlSchemas.m[string(js)]; ok {
		return s, nil
	}
	s, err := parseAvroSchema(js)
	if err != nil {
		return nil, fmt.Errorf("writer schema: %w", err)
	}
	if len(controlSchemas.m) >= maxCachedControlSchemas {
		clear(controlSchemas.m)
	}
	controlSchemas.m[string(js)] = s
	return s, nil
}

// parseAvroSchema parses a writer schema with a cache of its own (the
// global one of hamba/avro keeps every name ever parsed, and names of
// different writers may clash). The parser panics on some malformed schemas
// (a default that does not fit its type); a record of the control topic is
// input from the network, so that is an error like any other.
func parseAvroSchema(js []byte) (s avro.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("malformed schema: %v", r)
		}
	}()
	return avro.ParseWithCache(string(js), "", &avro.SchemaCache{})
}

// DecodeControlEvent reads one record of the Iceberg Kafka Connect control
// topic, with the Avro schema that travels in it (the schemas of the sink's
// kafka-connect-events module: Event, and the payloads CommitToTable,
// DataComplete, TableReference, TopicPartitionOffset). Fields are found by
// name, so a writer that adds fields is read as well; a record that is not
// such an event is an error, for the dead-letter topic.
func DecodeControlEvent(value []byte) (ControlEvent, error) {
	var ev ControlEvent
	if len(value) == 0 {
		return ev, errors.New("control event: empty record")
	}
	if !bytes.HasPrefix(value, controlMagic) {
		return ev, errors.New("control event: no Avro header (want the magic bytes aVR\\x01 of Iceberg's AvroEncoderUtil)")
	}
	rest := value[len(controlMagic):]
	if len(rest) < 4 {
		return ev, errors.New("control event: truncated schema length")
	}
	n := binary.BigEndian.Uint32(rest)
	rest = rest[4:]
	if n == 0 || n > maxControlSchema || int(n) > len(rest) {
		return ev, fmt.Errorf("control event: schema length %d does not fit the record", n)
	}
	schema, err := controlSchema(rest[:n])
	if err != nil {
		return ev, fmt.Errorf("control event: %w", err)
	}
	r := &avroReader{data: rest[n:]}
	v, err := r.event(schema)
	if err != nil {
		return ev, fmt.Errorf("control event: %w", err)
	}
	if err := ev.fill(v); err != nil {
		return ev, fmt.Errorf("control event: %w", err)
	}
	return ev, nil
}

// event reads the datum of an Event. The payload of a DATA_WRITTEN event
// (data and delete files, the bulk of the control topic) is not read: its
// type field comes first, and nothing in it is needed. Every other datum
// must be read to its end.
func (r *avroReader) event(s avro.Schema) (any, error) {
	rec, ok := s.(*avro.RecordSchema)
	if !ok {
		return nil, errors.New("the writer schema is not a record")
	}
	out := make(map[string]any, len(rec.Fields()))
	for _, f := range rec.Fields() {
		if t, ok := out["type"].(int32); ok && f.Name() == "payload" && ControlPayloadType(t) == DataWritten {
			out["payload"] = map[string]any{}
			return out, nil
		}
		v, err := r.value(f.Type(), 1)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name(), err)
		}
		out[f.Name()] = v
	}
	if len(r.data) != 0 {
		return nil, fmt.Errorf("%d bytes after the datum", len(r.data))
	}
	return out, nil
}

// fill takes the event's fields out of the decoded datum.
func (e *ControlEvent) fill(v any) error {
	rec, ok := v.(map[string]any)
	if !ok {
		return errors.New("the datum is not a record")
	}
	var err error
	if e.ID, err = uuidField(rec, "id"); err != nil {
		return err
	}
	t, err := intField(rec, "type")
	if err != nil {
		return err
	}
	e.Type = ControlPayloadType(t)
	if e.TimestampUs, err = intField(rec, "timestamp"); err != nil {
		return err
	}
	if e.GroupID, err = stringField(rec, "group_id"); err != nil {
		return err
	}
	payload, ok := rec["payload"].(map[string]any)
	if !ok {
		return errors.New("payload is not a record")
	}
	switch e.Type {
	case DataComplete:
		return e.fillDataComplete(payload)
	case CommitToTable:
		return e.fillCommitToTable(payload)
	case DataWritten:
		return nil
	case StartCommit, CommitComplete:
		if e.CommitID, err = uuidField(payload, "commit_id"); err != nil {
			return fmt.Errorf("%s: %w", e.Type, err)
		}
		return nil
	}
	return fmt.Errorf("unknown payload type %d", t)
}

func (e *ControlEvent) fillDataComplete(p map[string]any) error {
	var err error
	if e.CommitID, err = uuidField(p, "commit_id"); err != nil {
		return fmt.Errorf("DATA_COMPLETE: %w", err)
	}
	list, _ := p["assignments"].([]any) // optional: nil when absent or null
	for i, item := range list {
		a, ok := item.(map[string]any)
		if !ok {
			return fmt.Errorf("DATA_COMPLETE: assignment %d is not a record", i)
		}
		var tpo TopicPartitionOffset
		if tpo.Topic, err = stringField(a, "topic"); err != nil {
			return fmt.Errorf("DATA_COMPLETE: assignment %d: %w", i, err)
		}
		part, err := intField(a, "partition")
		if err != nil || part < 0 || part > math.MaxInt32 {
			return fmt.Errorf("DATA_COMPLETE: assignment %d: partition: want an int, got %v", i, a["partition"])
		}
		tpo.Partition = int32(part)
		if a["offset"] != nil {
			if tpo.Offset, err = intField(a, "offset"); err != nil || tpo.Offset < 0 {
				return fmt.Errorf("DATA_COMPLETE: assignment %d: offset: want a non-negative long, got %v", i, a["offset"])
			}
			tpo.HasOffset = true
		}
		e.Assignments = append(e.Assignments, tpo)
	}
	return nil
}

func (e *ControlEvent) fillCommitToTable(p map[string]any) error {
	var err error
	if e.CommitID, err = uuidField(p, "commit_id"); err != nil {
		return fmt.Errorf("COMMIT_TO_TABLE: %w", err)
	}
	ref, ok := p["table_reference"].(map[string]any)
	if !ok {
		return errors.New("COMMIT_TO_TABLE: table_reference is not a record")
	}
	if e.Catalog, err = stringField(ref, "catalog"); err != nil {
		return fmt.Errorf("COMMIT_TO_TABLE: table_reference: %w", err)
	}
	if e.Name, err = stringField(ref, "name"); err != nil || e.Name == "" {
		return fmt.Errorf("COMMIT_TO_TABLE: table_reference: name: want a non-empty string")
	}
	ns, ok := ref["namespace"].([]any)
	if !ok || len(ns) == 0 {
		return errors.New("COMMIT_TO_TABLE: table_reference: namespace: want a non-empty list of strings")
	}
	for _, level := range ns {
		s, ok := level.(string)
		if !ok || s == "" {
			return errors.New("COMMIT_TO_TABLE: table_reference: namespace: want a non-empty list of strings")
		}
		e.Namespace = append(e.Namespace, s)
	}
	if p["snapshot_id"] != nil {
		if e.SnapshotID, err = intField(p, "snapshot_id"); err != nil {
			return fmt.Errorf("COMMIT_TO_TABLE: %w", err)
		}
		e.HasSnapshot = true
	}
	return nil
}

func uuidField(rec map[string]any, name string) (uuid.UUID, error) {
	switch v := rec[name].(type) {
	case []byte:
		if len(v) == 16 {
			return uuid.UUID(v), nil
		}
	case string:
		if u, err := uuid.Parse(v); err == nil {
			return u, nil
		}
	}
	return uuid.UUID{}, fmt.Errorf("%s: want a uuid, got %T", name, rec[name])
}

func intField(rec map[string]any, name string) (int64, error) {
	switch v := rec[name].(type) {
	case int32:
		return int64(v), nil
	case int64:
		return v, nil
	}
	return 0, fmt.Errorf("%s: want an int or long, got %T", name, rec[name])
}

func stringField(rec map[string]any, name string) (string, error) {
	if s, ok := rec[name].(string); ok {
		return s, nil
	}
	return "", fmt.Errorf("%s: want a string, got %T", name, rec[name])
}

// avroReader decodes Avro binary data against a writer schema into plain
// values: records as map[string]any by field name, arrays as []any, maps as
// map[string]any, unions as the chosen branch, int as int32, long as int64,
// bytes and fixed as []byte. Every length is checked against what is left,
// so hostile input fails instead of allocating or looping.
type avroReader struct {
	data   []byte
	items  int // array and map items read, bounded by maxAvroItems
	values int // values read, bounded by maxAvroValues
}

// Bounds of one datum. Values of null, empty records and the like take no
// bytes, so a hostile schema (a record that holds itself twice) could make
// a short datum exponentially long to read without the count of values.
const (
	maxAvroDepth  = 32
	maxAvroItems  = 1 << 16
	maxAvroValues = 1 << 14
)

var errAvroShort = errors.New("truncated Avro datum")

func (r *avroReader) long() (int64, error) {
	v, n := binary.Varint(r.data)
	if n <= 0 {
		return 0, errAvroShort
	}
	r.data = r.data[n:]
	return v, nil
}

func (r *avroReader) bytes() ([]byte, error) {
	n, err := r.long()
	if err != nil {
		return nil, err
	}
	if n < 0 || n > int64(len(r.data)) {
		return nil, fmt.Errorf("length %d does not fit the datum", n)
	}
	b := r.data[:n:n]
	r.data = r.data[n:]
	return b, nil
}

func (r *avroReader) value(s avro.Schema, depth int) (any, error) {
	if depth > maxAvroDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxAvroDepth)
	}
	if r.values++; r.values > maxAvroValues {
		return nil, fmt.Errorf("more than %d values", maxAvroValues)
	}
	switch s.Type() {
	case avro.Null:
		return nil, nil
	case avro.Boolean:
		if len(r.data) < 1 || r.data[0] > 1 {
			return nil, errors.New("invalid boolean")
		}
		b := r.data[0] == 1
		r.data = r.data[1:]
		return b, nil
	case avro.Int:
		v, err := r.long()
		if err != nil {
			return nil, err
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, fmt.Errorf("int %d out of range", v)
		}
		return int32(v), nil
	case avro.Long:
		return r.long()
	case avro.Float:
		if len(r.data) < 4 {
			return nil, errAvroShort
		}
		f := math.Float32frombits(binary.LittleEndian.Uint32(r.data))
		r.data = r.data[4:]
		return f, nil
	case avro.Double:
		if len(r.data) < 8 {
			return nil, errAvroShort
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(r.data))
		r.data = r.data[8:]
		return f, nil
	case avro.Bytes:
		return r.bytes()
	case avro.String:
		b, err := r.bytes()
		return string(b), err
	case avro.Fixed:
		n := s.(*avro.FixedSchema).Size()
		if n < 0 || n > len(r.data) {
			return nil, errAvroShort
		}
		b := r.data[:n:n]
		r.data = r.data[n:]
		return b, nil
	case avro.Enum:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		syms := s.(*avro.EnumSchema).Symbols()
		if i < 0 || i >= int64(len(syms)) {
			return nil, fmt.Errorf("enum index %d out of range", i)
		}
		return syms[i], nil
	case avro.Union:
		i, err := r.long()
		if err != nil {
			return nil, err
		}
		types := s.(*avro.UnionSchema).Types()
		if i < 0 || i >= int64(len(types)) {
			return nil, fmt.Errorf("union branch %d out of range", i)
		}
		return r.value(types[i], depth+1)
	case avro.Record:
		fields := s.(*avro.RecordSchema).Fields()
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			v, err := r.value(f.Type(), depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name(), err)
			}
			out[f.Name()] = v
		}
		return out, nil
	case avro.Ref:
		return r.value(s.(*avro.RefSchema).Schema(), depth+1)
	case avro.Array:
		var out []any
		err := r.blocks(func() error {
			v, err := r.value(s.(*avro.ArraySchema).Items(), depth+1)
			out = append(out, v)
			return err
		})
		return out, err
	case avro.Map:
		out := map[string]any{}
		err := r.blocks(func() error {
			k, err := r.bytes()
			if err != nil {
				return err
			}
			v, err := r.value(s.(*avro.MapSchema).Values(), depth+1)
			out[string(k)] = v
			return err
		})
		return out, err
	}
	return nil, fmt.Errorf("unsupported Avro type %s", s.Type())
}

// blocks reads the blocks of an array or map, calling item per item.
func (r *avroReader) blocks(item func() error) error {
	for {
		n, err := r.long()
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if n < 0 {
			if n == math.MinInt64 {
				return errors.New("invalid block count")
			}
			n = -n
			if _, err := r.long(); err != nil { // the block's size in bytes
				return err
			}
		}
		if n > int64(maxAvroItems-r.items) {
			return fmt.Errorf("more than %d array or map items", maxAvroItems)
		}
		r.items += int(n)
		for range n {
			if err := item(); err != nil {
				return err
			}
		}
	}
}
