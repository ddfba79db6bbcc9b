package format

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/iceberg-go"
	"github.com/hamba/avro/v2"
)

// A tracking file lists the range files of one index snapshot with their
// statistics. It is an Avro object container file (avro_container.go), like
// an Iceberg manifest, with one tracking_entry record per range file
// (README.md has the byte layout). hamba/avro parses the schema a file
// carries, so the reader accepts any schema the Avro specification allows
// and matches fields by field-id (avro_schema.go).
//
// Header metadata written:
//
//	avro.schema     the Avro schema, every field with its Iceberg "field-id"
//	avro.codec      "deflate" or "null"
//	format-version  "1"
//	content         "index-tracking"
//	schema          the Iceberg schema of the entries as JSON
//	index-uuid      the index's UUID, when the writer is given one
//	snapshot-id     the index snapshot the file belongs to, when the writer
//	                is given one (decimal, as Iceberg manifest lists write it)
//
// index-uuid and snapshot-id tie a file to the one index snapshot that
// references it, so that a tracking file put in another's place (a partial
// restore from a backup) is refused rather than read as the right one.
const (
	trackingFormatVersion = "1"
	trackingContent       = "index-tracking"
	trackingRecordName    = "tracking_entry"

	trackingKeyIndexUUID  = "index-uuid"
	trackingKeySnapshotID = "snapshot-id"
)

// FieldStats are the content statistics of one index field over the entries
// of one range file. Unset metrics are nil. For a cluster field GroupMax is
// the field's value in the file's last entry; there, unlike elsewhere, a nil
// value is a null clustering value, so HasGroupMax says whether it is set.
type FieldStats struct {
	LowerBound     any // the field's canonical Go value; nil when unknown or all null
	UpperBound     any
	TightBounds    *bool
	ValueCount     *int64
	NullValueCount *int64
	NanValueCount  *int64
	AvgValueSize   *int32
	GroupMax       any
	HasGroupMax    bool
}

// TrackingEntry describes one range file of an index snapshot.
type TrackingEntry struct {
	FilePath        string
	FileFormat      string // "parquet"
	RecordCount     int64
	FileSizeInBytes int64
	Stats           map[int]*FieldStats // by index field ID
	KeyMetadata     []byte
}

// GroupMaxKey returns the clustering key of the last entry of the range file:
// the group_max_value metrics of the cluster fields in cluster-spec order.
// It reports false when a cluster field has no group_max_value.
func (e *TrackingEntry) GroupMaxKey(s *IndexSchema) (Key, bool) {
	fields := s.ClusterFields()
	k := make(Key, len(fields))
	for i, f := range fields {
		st := e.Stats[f.ID]
		if st == nil || !st.HasGroupMax {
			return nil, false
		}
		k[i] = st.GroupMax
	}
	return k, true
}

// TrackingWriteOptions control how WriteTrackingFile encodes a tracking file.
type TrackingWriteOptions struct {
	// IndexUUID is stored under the header key "index-uuid" so that a
	// tracking file found on its own can be tied to its index. Default: empty,
	// the key is left out.
	IndexUUID string
	// SnapshotID is stored under the header key "snapshot-id": the index
	// snapshot that will reference the file. Default: 0, the key is left
	// out.
	SnapshotID int64
	// Codec compresses the data blocks: "deflate" or "null". Default: "deflate".
	Codec string
}

// TrackingFile is a decoded tracking file.
type TrackingFile struct {
	// IndexUUID and SnapshotID are what the header says the file belongs
	// to: "" and 0 when it does not say (files written before streamidx
	// recorded the snapshot, or by other writers).
	IndexUUID  string
	SnapshotID int64
	// Entries are the range files, in cluster order.
	Entries []TrackingEntry
}

// WriteTrackingFile writes the entries of one index snapshot as a tracking
// file. It refuses, before writing anything, entries that readers would
// misplan with: entries out of cluster order (the group_max_value keys must
// strictly increase), a missing stats struct for a cluster or
// non-materialized field, a cluster field without group_max_value, and
// values that do not have their field's type. A field whose values are all
// null has null lower and upper bounds; so a field's bounds must be both set
// or both null, and the stats struct's presence is what the spec's
// "required" demands.
func WriteTrackingFile(w io.Writer, s *IndexSchema, entries []TrackingEntry, opts TrackingWriteOptions) error {
	if opts.Codec == "" {
		opts.Codec = codecDeflate
	}
	if opts.Codec != codecDeflate && opts.Codec != codecNull {
		return fmt.Errorf("write tracking file: codec %q is neither %q nor %q", opts.Codec, codecDeflate, codecNull)
	}
	if opts.SnapshotID < 0 {
		return fmt.Errorf("write tracking file: snapshot id %d is negative", opts.SnapshotID)
	}
	if err := checkTrackingEntries(s, entries); err != nil {
		return fmt.Errorf("write tracking file: %w", err)
	}
	if err := writeTrackingEntries(w, s, entries, opts); err != nil {
		return fmt.Errorf("write tracking file: %w", err)
	}
	return nil
}

// writeTrackingEntries encodes entries without checking them.
func writeTrackingEntries(w io.Writer, s *IndexSchema, entries []TrackingEntry, opts TrackingWriteOptions) error {
	sc, err := trackingSchema(s)
	if err != nil {
		return err
	}
	avroSchema, err := json.Marshal(avroRecordOf(trackingRecordName, sc.Fields(), map[string]bool{}))
	if err != nil {
		return fmt.Errorf("encode avro schema: %w", err)
	}
	icebergSchema, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("encode iceberg schema: %w", err)
	}
	meta := map[string][]byte{
		"avro.schema":    avroSchema,
		"avro.codec":     []byte(opts.Codec),
		"format-version": []byte(trackingFormatVersion),
		"content":        []byte(trackingContent),
		"schema":         icebergSchema,
	}
	if opts.IndexUUID != "" {
		meta[trackingKeyIndexUUID] = []byte(opts.IndexUUID)
	}
	if opts.SnapshotID != 0 {
		meta[trackingKeySnapshotID] = strconv.AppendInt(nil, opts.SnapshotID, 10)
	}
	cw, err := newAvroContainerWriter(w, meta, opts.Codec)
	if err != nil {
		return err
	}
	row := sc.AsStruct()
	var rec []byte
	for i := range entries {
		rec = appendAvro(rec[:0], &row, entryToAvro(s, &entries[i]))
		if len(rec) > avroMaxBlockBytes/2 {
			return fmt.Errorf("entry %d (%s) encodes to %d bytes, more than a block may hold", i, entries[i].FilePath, len(rec))
		}
		if err := cw.append(rec); err != nil {
			return err
		}
	}
	return cw.flush()
}

// ReadTrackingFile reads a tracking file written by any Avro writer whose
// fields carry Iceberg field IDs, matching fields by ID and skipping fields
// it does not know. It checks what the writer checks, including the strict
// order of the group_max_value keys. A file that cannot be decoded or breaks
// those rules gives a *CorruptFileError naming name; an error of r itself is
// returned wrapped, not as corruption, so that callers may retry it. Which
// snapshot the file belongs to is for the caller to check.
func ReadTrackingFile(r io.Reader, name string, s *IndexSchema) (*TrackingFile, error) {
	src := &readErrRecorder{r: r}
	tf, err := readTracking(bufio.NewReader(src), s)
	if src.err != nil {
		return nil, fmt.Errorf("read tracking file %s: %w", name, src.err)
	}
	if err != nil {
		return nil, &CorruptFileError{Path: name, Err: err}
	}
	return tf, nil
}

// readErrRecorder remembers an error of the underlying reader, which the
// decoder would otherwise report as a truncated file.
type readErrRecorder struct {
	r   io.Reader
	err error
}

func (e *readErrRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF && e.err == nil {
		e.err = err
	}
	return n, err
}

func readTracking(br *bufio.Reader, s *IndexSchema) (*TrackingFile, error) {
	cr, err := newAvroContainerReader(br)
	if err != nil {
		return nil, err
	}
	for key, want := range map[string]string{"format-version": trackingFormatVersion, "content": trackingContent} {
		if v, ok := cr.meta[key]; ok && string(v) != want {
			return nil, fmt.Errorf("header %s is %q, not %q", key, v, want)
		}
	}
	tf := &TrackingFile{IndexUUID: string(cr.meta[trackingKeyIndexUUID])}
	if v, ok := cr.meta[trackingKeySnapshotID]; ok {
		if tf.SnapshotID, err = strconv.ParseInt(string(v), 10, 64); err != nil || tf.SnapshotID <= 0 {
			return nil, fmt.Errorf("header %s %q is not a snapshot id", trackingKeySnapshotID, v)
		}
	}
	rawSchema, ok := cr.meta["avro.schema"]
	if !ok {
		return nil, errors.New("header has no avro.schema")
	}
	// A fresh cache per file: named types of one file must not resolve
	// references in another.
	ws, err := avro.ParseBytesWithCache(rawSchema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("parse avro.schema: %w", err)
	}
	sc, err := trackingSchema(s)
	if err != nil {
		return nil, err
	}
	if _, isRecord := derefAvro(ws).(*avro.RecordSchema); !isRecord {
		return nil, fmt.Errorf("avro.schema is a %s, not a record", ws.Type())
	}
	row := sc.AsStruct()
	decode, err := compileAvro(ws, &row, trackingRecordName)
	if err != nil {
		return nil, err
	}

	types := s.ClusterTypes()
	for blockNo := 0; ; blockNo++ {
		// Every record holds at least a file_path, so each takes a byte, as
		// next requires.
		count, data, err := cr.next()
		if err == io.EOF {
			return tf, nil
		}
		if err != nil {
			return nil, err
		}
		c := &avroCursor{b: data, budget: max(avroMinSkipBudget, 8*len(data))}
		for i := int64(0); i < count; i++ {
			m, _ := decode(c).(map[int]any)
			if c.err != nil {
				return nil, fmt.Errorf("block %d record %d: %w", blockNo, i, c.err)
			}
			e, err := entryFromAvro(s, m)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", len(tf.Entries), err)
			}
			if err := checkTrackingEntry(s, &e); err != nil {
				return nil, fmt.Errorf("entry %d (%s): %w", len(tf.Entries), e.FilePath, err)
			}
			if n := len(tf.Entries); n > 0 {
				if err := checkTrackingOrder(s, types, &tf.Entries[n-1], &e, n); err != nil {
					return nil, err
				}
			}
			tf.Entries = append(tf.Entries, e)
		}
		if len(c.b) != 0 {
			return nil, fmt.Errorf("block %d: %d bytes left after its %d records", blockNo, len(c.b), count)
		}
	}
}

// trackingSchema is the Iceberg schema of the entries of a tracking file for
// s: the tracking entry fields and one optional stats struct per primitive
// index field, in index field order.
func trackingSchema(s *IndexSchema) (*iceberg.Schema, error) {
	var stats []iceberg.NestedField
	for _, f := range s.Fields() {
		if !IsPrimitive(f.Type) {
			continue
		}
		if f.ID < 0 || f.ID > MaxIndexFieldID {
			return nil, fmt.Errorf("index field ID %d has no content stats ID", f.ID)
		}
		base := StatsBaseID(f.ID)
		var metrics []iceberg.NestedField
		for _, m := range trackingStatsMetrics(f, s.IsCluster(f.ID)) {
			metrics = append(metrics, iceberg.NestedField{ID: base + m.offset, Name: m.name, Type: m.typ})
		}
		stats = append(stats, iceberg.NestedField{ID: base, Name: trackingStatsName(f.ID), Type: &iceberg.StructType{FieldList: metrics}})
	}
	return iceberg.NewSchema(0,
		iceberg.NestedField{ID: TrackingFieldFilePath, Name: "file_path", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: TrackingFieldFileFormat, Name: "file_format", Type: iceberg.PrimitiveTypes.String, Required: true},
		iceberg.NestedField{ID: TrackingFieldRecordCount, Name: "record_count", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: TrackingFieldFileSizeInBytes, Name: "file_size_in_bytes", Type: iceberg.PrimitiveTypes.Int64, Required: true},
		iceberg.NestedField{ID: TrackingFieldContentStats, Name: "content_stats", Type: &iceberg.StructType{FieldList: stats}, Required: true},
		iceberg.NestedField{ID: TrackingFieldKeyMetadata, Name: "key_metadata", Type: iceberg.PrimitiveTypes.Binary},
	), nil
}

// statsMetric is one metric of a content stats struct.
type statsMetric struct {
	offset int
	name   string
	typ    iceberg.Type
}

// trackingStatsMetrics lists the metrics that a stats struct of field f
// holds, as the table spec assigns them: NaN counts for float and double,
// average sizes for the variable-length string and binary, and
// group_max_value for cluster fields only.
func trackingStatsMetrics(f IndexField, cluster bool) []statsMetric {
	ms := []statsMetric{
		{StatsLowerBound, "lower_bound", f.Type},
		{StatsUpperBound, "upper_bound", f.Type},
		{StatsTightBounds, "tight_bounds", iceberg.PrimitiveTypes.Bool},
		{StatsValueCount, "value_count", iceberg.PrimitiveTypes.Int64},
		{StatsNullValueCount, "null_value_count", iceberg.PrimitiveTypes.Int64},
	}
	if hasNaN(f.Type) {
		ms = append(ms, statsMetric{StatsNanValueCount, "nan_value_count", iceberg.PrimitiveTypes.Int64})
	}
	if isVariableLength(f.Type) {
		ms = append(ms, statsMetric{StatsAvgValueSize, "avg_value_size_in_bytes", iceberg.PrimitiveTypes.Int32})
	}
	if cluster {
		ms = append(ms, statsMetric{StatsGroupMaxValue, "group_max_value", f.Type})
	}
	return ms
}

func hasNaN(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.Float32Type, iceberg.Float64Type:
		return true
	}
	return false
}

func isVariableLength(t iceberg.Type) bool {
	switch t.(type) {
	case iceberg.StringType, iceberg.BinaryType:
		return true
	}
	return false
}

// trackingStatsName names the stats struct of index field id. Column names
// of index fields may hold any character and Avro names may not, so the
// name is built from the ID; readers match by field ID anyway.
func trackingStatsName(id int) string { return fmt.Sprintf("field_%d", id) }

// entryToAvro gives the record of e: field ID to value, structs as nested maps.
func entryToAvro(s *IndexSchema, e *TrackingEntry) map[int]any {
	stats := map[int]any{}
	for id, st := range e.Stats {
		base := StatsBaseID(id)
		m := map[int]any{
			base + StatsLowerBound:     st.LowerBound,
			base + StatsUpperBound:     st.UpperBound,
			base + StatsTightBounds:    optional(st.TightBounds),
			base + StatsValueCount:     optional(st.ValueCount),
			base + StatsNullValueCount: optional(st.NullValueCount),
			base + StatsNanValueCount:  optional(st.NanValueCount),
			base + StatsAvgValueSize:   optional(st.AvgValueSize),
		}
		if st.HasGroupMax {
			m[base+StatsGroupMaxValue] = st.GroupMax
		}
		stats[base] = m
	}
	rec := map[int]any{
		TrackingFieldFilePath:        e.FilePath,
		TrackingFieldFileFormat:      e.FileFormat,
		TrackingFieldRecordCount:     e.RecordCount,
		TrackingFieldFileSizeInBytes: e.FileSizeInBytes,
		TrackingFieldContentStats:    stats,
	}
	if e.KeyMetadata != nil {
		rec[TrackingFieldKeyMetadata] = e.KeyMetadata
	}
	return rec
}

// optional turns a nil pointer into a nil value rather than a typed nil.
func optional[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// entryFromAvro builds an entry from a decoded record. Only fields present
// in the file's schema are keys of m; a present key with a nil value is null.
func entryFromAvro(s *IndexSchema, m map[int]any) (TrackingEntry, error) {
	var e TrackingEntry
	var ok bool
	if e.FilePath, ok = m[TrackingFieldFilePath].(string); !ok {
		return e, errors.New("file_path (100) is missing or null")
	}
	if e.FileFormat, ok = m[TrackingFieldFileFormat].(string); !ok {
		return e, fmt.Errorf("%s: file_format (101) is missing or null", e.FilePath)
	}
	if e.RecordCount, ok = m[TrackingFieldRecordCount].(int64); !ok {
		return e, fmt.Errorf("%s: record_count (103) is missing or null", e.FilePath)
	}
	if e.FileSizeInBytes, ok = m[TrackingFieldFileSizeInBytes].(int64); !ok {
		return e, fmt.Errorf("%s: file_size_in_bytes (104) is missing or null", e.FilePath)
	}
	stats, ok := m[TrackingFieldContentStats].(map[int]any)
	if !ok {
		return e, fmt.Errorf("%s: content_stats (146) is missing or null", e.FilePath)
	}
	e.KeyMetadata, _ = m[TrackingFieldKeyMetadata].([]byte)
	e.Stats = map[int]*FieldStats{}
	for _, f := range s.Fields() {
		base := StatsBaseID(f.ID)
		sm, ok := stats[base].(map[int]any)
		if !ok {
			continue
		}
		st := &FieldStats{LowerBound: sm[base+StatsLowerBound], UpperBound: sm[base+StatsUpperBound]}
		st.TightBounds = pointerTo[bool](sm[base+StatsTightBounds])
		st.ValueCount = pointerTo[int64](sm[base+StatsValueCount])
		st.NullValueCount = pointerTo[int64](sm[base+StatsNullValueCount])
		st.NanValueCount = pointerTo[int64](sm[base+StatsNanValueCount])
		st.AvgValueSize = pointerTo[int32](sm[base+StatsAvgValueSize])
		st.GroupMax, st.HasGroupMax = sm[base+StatsGroupMaxValue]
		e.Stats[f.ID] = st
	}
	return e, nil
}

func pointerTo[T any](v any) *T {
	if x, ok := v.(T); ok {
		return &x
	}
	return nil
}
