package format

import (
	"bufio"
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"sort"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
)

// A tracking file is an Avro object container file, like an Iceberg
// manifest, with one record per range file (README.md has the byte layout).
// streamidx writes the container itself rather than through hamba/avro's ocf
// package: that package stores a schema without custom attributes unless told
// otherwise, and its reader allocates whatever block size a file claims.
// hamba/avro still parses the schema a file carries, so the reader accepts
// any schema the Avro specification allows and matches fields by field-id.
//
// Header metadata written:
//
//	avro.schema     the Avro schema, every field with its Iceberg "field-id"
//	avro.codec      "deflate" or "null"
//	format-version  "1"
//	content         "index-tracking"
//	schema          the Iceberg schema of the entries as JSON
//	index-uuid      the index's UUID, when the writer is given one
const (
	trackingFormatVersion = "1"
	trackingContent       = "index-tracking"
	trackingRecordName    = "tracking_entry"

	codecNull    = "null"
	codecDeflate = "deflate"

	// trackingBlockTarget is the uncompressed size at which the writer
	// closes a data block.
	trackingBlockTarget = 1 << 20
	// trackingMaxBlockBytes bounds a data block, compressed and
	// uncompressed, in the writer and the reader alike, so that a corrupt
	// size field cannot make the reader allocate without bound.
	trackingMaxBlockBytes = 64 << 20
	// trackingMaxHeaderBytes bounds the header's metadata map.
	trackingMaxHeaderBytes = 16 << 20
	// avroMaxSkipDepth bounds the nesting of the values of fields the reader
	// does not know and skips; a recursive schema could otherwise recurse
	// without consuming input.
	avroMaxSkipDepth = 64
	// avroMinSkipBudget is the least number of values the reader may skip in
	// one block; null values take no bytes, so the budget is not only the
	// block's size.
	avroMinSkipBudget = 1 << 20
)

var avroMagic = []byte("Obj\x01")

// TrackingWriteOptions control how WriteTrackingFile encodes a tracking file.
type TrackingWriteOptions struct {
	// IndexUUID is stored under the header key "index-uuid" so that a
	// tracking file found on its own can be tied to its index. Default: empty,
	// the key is left out.
	IndexUUID string
	// Codec compresses the data blocks: "deflate" or "null". Default: "deflate".
	Codec string
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
	codec := opts.Codec
	if codec == "" {
		codec = codecDeflate
	}
	if codec != codecDeflate && codec != codecNull {
		return fmt.Errorf("write tracking file: codec %q is neither %q nor %q", codec, codecDeflate, codecNull)
	}
	if err := checkTrackingEntries(s, entries); err != nil {
		return fmt.Errorf("write tracking file: %w", err)
	}
	if err := writeTrackingEntries(w, s, entries, codec, opts.IndexUUID); err != nil {
		return fmt.Errorf("write tracking file: %w", err)
	}
	return nil
}

// writeTrackingEntries encodes entries without checking them.
func writeTrackingEntries(w io.Writer, s *IndexSchema, entries []TrackingEntry, codec, indexUUID string) error {
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
		"avro.codec":     []byte(codec),
		"format-version": []byte(trackingFormatVersion),
		"content":        []byte(trackingContent),
		"schema":         icebergSchema,
	}
	if indexUUID != "" {
		meta["index-uuid"] = []byte(indexUUID)
	}
	header := append([]byte{}, avroMagic...)
	header = appendAvroMetadata(header, meta)
	// A sync marker derived from the header keeps the output a function of
	// the input, so golden files can be compared byte for byte.
	digest := sha256.Sum256(header)
	sync := digest[:16]
	header = append(header, sync...)
	if _, err := w.Write(header); err != nil {
		return err
	}

	row := sc.AsStruct()
	var block, rec []byte
	count := 0
	flush := func() error {
		if count == 0 {
			return nil
		}
		data := block
		if codec == codecDeflate {
			var buf bytes.Buffer
			fw, err := flate.NewWriter(&buf, flate.DefaultCompression)
			if err != nil {
				return fmt.Errorf("compress block: %w", err)
			}
			if _, err := fw.Write(block); err != nil {
				return fmt.Errorf("compress block: %w", err)
			}
			if err := fw.Close(); err != nil {
				return fmt.Errorf("compress block: %w", err)
			}
			data = buf.Bytes()
		}
		out := binary.AppendVarint(nil, int64(count))
		out = binary.AppendVarint(out, int64(len(data)))
		out = append(append(out, data...), sync...)
		block, count = block[:0], 0
		_, err := w.Write(out)
		return err
	}
	// A block closes once it reaches trackingBlockTarget, so with entries of
	// at most half the readers' limit no block exceeds that limit, even
	// after deflate's few bytes of overhead.
	for i := range entries {
		rec = appendAvro(rec[:0], &row, entryToAvro(s, &entries[i]))
		if len(rec) > trackingMaxBlockBytes/2 {
			return fmt.Errorf("entry %d (%s) encodes to %d bytes, more than a block may hold", i, entries[i].FilePath, len(rec))
		}
		block = append(block, rec...)
		count++
		if len(block) >= trackingBlockTarget {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// ReadTrackingFile reads a tracking file written by any Avro writer whose
// fields carry Iceberg field IDs, matching fields by ID and skipping fields
// it does not know. It checks what the writer checks, including the strict
// order of the group_max_value keys. A file that cannot be decoded or breaks
// those rules gives a *CorruptFileError naming name; an error of r itself is
// returned wrapped, not as corruption, so that callers may retry it.
func ReadTrackingFile(r io.Reader, name string, s *IndexSchema) ([]TrackingEntry, error) {
	src := &readErrRecorder{r: r}
	entries, err := readTracking(bufio.NewReader(src), s)
	if src.err != nil {
		return nil, fmt.Errorf("read tracking file %s: %w", name, src.err)
	}
	if err != nil {
		return nil, &CorruptFileError{Path: name, Err: err}
	}
	return entries, nil
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

func readTracking(br *bufio.Reader, s *IndexSchema) ([]TrackingEntry, error) {
	meta, sync, err := readAvroHeader(br)
	if err != nil {
		return nil, err
	}
	for key, want := range map[string]string{"format-version": trackingFormatVersion, "content": trackingContent} {
		if v, ok := meta[key]; ok && string(v) != want {
			return nil, fmt.Errorf("header %s is %q, not %q", key, v, want)
		}
	}
	codec := codecNull
	if v, ok := meta["avro.codec"]; ok {
		codec = string(v)
	}
	if codec != codecNull && codec != codecDeflate {
		return nil, fmt.Errorf("unsupported codec %q", codec)
	}
	rawSchema, ok := meta["avro.schema"]
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

	var entries []TrackingEntry
	types := s.ClusterTypes()
	for blockNo := 0; ; blockNo++ {
		if _, err := br.Peek(1); err == io.EOF {
			return entries, nil
		}
		count, err := binary.ReadVarint(br)
		if err != nil {
			return nil, fmt.Errorf("block %d: read record count: %w", blockNo, eofAsTruncated(err))
		}
		size, err := binary.ReadVarint(br)
		if err != nil {
			return nil, fmt.Errorf("block %d: read size: %w", blockNo, eofAsTruncated(err))
		}
		if count < 0 || size < 0 || size > trackingMaxBlockBytes {
			return nil, fmt.Errorf("block %d: %d records in %d bytes is out of range", blockNo, count, size)
		}
		data, err := readN(br, size)
		if err != nil {
			return nil, fmt.Errorf("block %d: read %d bytes: %w", blockNo, size, err)
		}
		var marker [16]byte
		if _, err := io.ReadFull(br, marker[:]); err != nil {
			return nil, fmt.Errorf("block %d: read sync marker: %w", blockNo, eofAsTruncated(err))
		}
		if !bytes.Equal(marker[:], sync) {
			return nil, fmt.Errorf("block %d: sync marker does not match the header's", blockNo)
		}
		if codec == codecDeflate {
			if data, err = inflate(data); err != nil {
				return nil, fmt.Errorf("block %d: %w", blockNo, err)
			}
		}
		// Every record holds at least a file_path, so each takes a byte.
		if count > int64(len(data)) {
			return nil, fmt.Errorf("block %d: %d records cannot fit in %d bytes", blockNo, count, len(data))
		}
		c := &avroCursor{b: data, budget: max(avroMinSkipBudget, 8*len(data))}
		for i := int64(0); i < count; i++ {
			m, _ := decode(c).(map[int]any)
			if c.err != nil {
				return nil, fmt.Errorf("block %d record %d: %w", blockNo, i, c.err)
			}
			e, err := entryFromAvro(s, m)
			if err != nil {
				return nil, fmt.Errorf("entry %d: %w", len(entries), err)
			}
			if err := checkTrackingEntry(s, &e); err != nil {
				return nil, fmt.Errorf("entry %d (%s): %w", len(entries), e.FilePath, err)
			}
			if n := len(entries); n > 0 {
				if err := checkTrackingOrder(s, types, &entries[n-1], &e, n); err != nil {
					return nil, err
				}
			}
			entries = append(entries, e)
		}
		if len(c.b) != 0 {
			return nil, fmt.Errorf("block %d: %d bytes left after its %d records", blockNo, len(c.b), count)
		}
	}
}

func eofAsTruncated(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readN reads n bytes into a buffer that grows with the bytes that arrive,
// so that a size field larger than the file costs nothing.
func readN(r io.Reader, n int64) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(int(min(n, 64<<10)))
	if _, err := io.CopyN(&buf, r, n); err != nil {
		return nil, eofAsTruncated(err)
	}
	return buf.Bytes(), nil
}

func inflate(data []byte) ([]byte, error) {
	fr := flate.NewReader(bytes.NewReader(data))
	defer fr.Close()
	var out bytes.Buffer
	n, err := io.Copy(&out, io.LimitReader(fr, trackingMaxBlockBytes+1))
	if err != nil {
		return nil, fmt.Errorf("inflate: %w", err)
	}
	if n > trackingMaxBlockBytes {
		return nil, fmt.Errorf("inflates to more than %d bytes", trackingMaxBlockBytes)
	}
	return out.Bytes(), nil
}

// readAvroHeader reads the magic, the metadata map and the sync marker.
func readAvroHeader(br *bufio.Reader) (map[string][]byte, []byte, error) {
	magic := make([]byte, len(avroMagic))
	if _, err := io.ReadFull(br, magic); err != nil || !bytes.Equal(magic, avroMagic) {
		return nil, nil, errors.New("not an Avro object container file")
	}
	meta := map[string][]byte{}
	budget := int64(trackingMaxHeaderBytes)
	readString := func() ([]byte, error) {
		n, err := binary.ReadVarint(br)
		if err != nil {
			return nil, eofAsTruncated(err)
		}
		if n < 0 || n > budget {
			return nil, fmt.Errorf("length %d is out of range", n)
		}
		budget -= n
		return readN(br, n)
	}
	for {
		n, err := binary.ReadVarint(br)
		if err != nil {
			return nil, nil, fmt.Errorf("read header metadata: %w", eofAsTruncated(err))
		}
		if n == 0 {
			break
		}
		if n < 0 {
			// A negative count is followed by the block's size in bytes.
			if n = -n; n < 0 {
				return nil, nil, errors.New("header metadata count is out of range")
			}
			if _, err := binary.ReadVarint(br); err != nil {
				return nil, nil, fmt.Errorf("read header metadata: %w", eofAsTruncated(err))
			}
		}
		for ; n > 0; n-- {
			key, err := readString()
			if err != nil {
				return nil, nil, fmt.Errorf("read header metadata key: %w", err)
			}
			val, err := readString()
			if err != nil {
				return nil, nil, fmt.Errorf("read header metadata %q: %w", key, err)
			}
			if _, dup := meta[string(key)]; dup {
				return nil, nil, fmt.Errorf("header metadata %q appears twice", key)
			}
			meta[string(key)] = val
		}
	}
	sync := make([]byte, 16)
	if _, err := io.ReadFull(br, sync); err != nil {
		return nil, nil, fmt.Errorf("read sync marker: %w", eofAsTruncated(err))
	}
	return meta, sync, nil
}

// appendAvroMetadata encodes the header's map<bytes> as one block with its
// keys sorted, so that equal maps give equal bytes.
func appendAvroMetadata(b []byte, meta map[string][]byte) []byte {
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = binary.AppendVarint(b, int64(len(keys)))
	for _, k := range keys {
		b = binary.AppendVarint(b, int64(len(k)))
		b = append(b, k...)
		b = binary.AppendVarint(b, int64(len(meta[k])))
		b = append(b, meta[k]...)
	}
	return binary.AppendVarint(b, 0)
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

// checkTrackingEntries checks every entry and their cluster order.
func checkTrackingEntries(s *IndexSchema, entries []TrackingEntry) error {
	types := s.ClusterTypes()
	for i := range entries {
		if err := checkTrackingEntry(s, &entries[i]); err != nil {
			return fmt.Errorf("entry %d (%s): %w", i, entries[i].FilePath, err)
		}
		if i > 0 {
			if err := checkTrackingOrder(s, types, &entries[i-1], &entries[i], i); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTrackingOrder checks that entry i's group_max_value key is above
// that of entry i-1, prev.
func checkTrackingOrder(s *IndexSchema, types []iceberg.Type, prev, e *TrackingEntry, i int) error {
	a, _ := prev.GroupMaxKey(s)
	b, _ := e.GroupMaxKey(s)
	if CompareKeys(types, a, b) < 0 {
		return nil
	}
	return fmt.Errorf("entry %d (%s): group_max_value key %s is not above key %s of entry %d (%s)",
		i, e.FilePath, describeKey(types, b), describeKey(types, a), i-1, prev.FilePath)
}

func describeKey(types []iceberg.Type, k Key) string {
	var b bytes.Buffer
	b.WriteByte('(')
	for i, t := range types {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(FormatValue(t, k[i]))
	}
	b.WriteByte(')')
	return b.String()
}

// checkTrackingEntry checks one entry against s: the rules that the writer
// enforces and the reader verifies.
func checkTrackingEntry(s *IndexSchema, e *TrackingEntry) error {
	switch {
	case e.FilePath == "":
		return errors.New("file_path is empty")
	case !utf8.ValidString(e.FilePath):
		return errors.New("file_path is not UTF-8")
	case e.FileFormat == "" || !utf8.ValidString(e.FileFormat):
		return fmt.Errorf("file_format %q is empty or not UTF-8", e.FileFormat)
	case e.RecordCount < 0:
		return fmt.Errorf("record_count %d is negative", e.RecordCount)
	case e.FileSizeInBytes < 0:
		return fmt.Errorf("file_size_in_bytes %d is negative", e.FileSizeInBytes)
	}
	for id, st := range e.Stats {
		if f, ok := s.Field(id); !ok || !IsPrimitive(f.Type) {
			return fmt.Errorf("stats for field %d, which is not a primitive index field", id)
		}
		if st == nil {
			return fmt.Errorf("stats for field %d are nil", id)
		}
	}
	for _, f := range s.Fields() {
		if !IsPrimitive(f.Type) {
			continue
		}
		cluster := s.IsCluster(f.ID)
		st := e.Stats[f.ID]
		if st == nil {
			if cluster || f.Kind == KindNonMaterialized {
				return fmt.Errorf("field %d (%s): the stats struct is required for a %s field", f.ID, f.Name, fieldRole(f, cluster))
			}
			continue
		}
		if err := checkFieldStats(f, cluster, st); err != nil {
			return fmt.Errorf("field %d (%s): %w", f.ID, f.Name, err)
		}
	}
	return nil
}

func fieldRole(f IndexField, cluster bool) string {
	if cluster {
		return "cluster"
	}
	return f.Kind.String()
}

func checkFieldStats(f IndexField, cluster bool, st *FieldStats) error {
	for _, v := range []struct {
		name  string
		value any
	}{{"lower_bound", st.LowerBound}, {"upper_bound", st.UpperBound}, {"group_max_value", st.GroupMax}} {
		if err := checkStoredValue(f.Type, v.value); err != nil {
			return fmt.Errorf("%s: %w", v.name, err)
		}
	}
	switch {
	case (st.LowerBound == nil) != (st.UpperBound == nil):
		return errors.New("lower_bound and upper_bound must be both set or both null")
	case st.LowerBound != nil && Compare(f.Type, st.LowerBound, st.UpperBound) > 0:
		return fmt.Errorf("lower_bound %s is above upper_bound %s", FormatValue(f.Type, st.LowerBound), FormatValue(f.Type, st.UpperBound))
	case st.NanValueCount != nil && !hasNaN(f.Type):
		return fmt.Errorf("nan_value_count is not kept for type %s", f.Type)
	case st.AvgValueSize != nil && !isVariableLength(f.Type):
		return fmt.Errorf("avg_value_size_in_bytes is not kept for type %s", f.Type)
	case !st.HasGroupMax && st.GroupMax != nil:
		return errors.New("group_max_value is set but HasGroupMax is false")
	case st.HasGroupMax && !cluster:
		return errors.New("group_max_value is kept only for cluster fields")
	case cluster && !st.HasGroupMax:
		return errors.New("group_max_value is required for a cluster field")
	}
	return nil
}

// checkStoredValue is CheckValue plus the rules of the Avro encoding:
// decimals within their precision and strings in UTF-8.
func checkStoredValue(t iceberg.Type, v any) error {
	if err := CheckValue(t, v); err != nil || v == nil {
		return err
	}
	switch t := t.(type) {
	case iceberg.DecimalType:
		if !v.(decimal128.Num).FitsInPrecision(int32(t.Precision())) {
			return fmt.Errorf("value %s does not fit %s", FormatValue(t, v), t)
		}
	case iceberg.StringType:
		if !utf8.ValidString(v.(string)) {
			return errors.New("string value is not UTF-8")
		}
	}
	return nil
}

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

// Avro schema JSON, field order kept as written.
type avroRecordJSON struct {
	Type   string          `json:"type"`
	Name   string          `json:"name"`
	Fields []avroFieldJSON `json:"fields"`
}

type avroFieldJSON struct {
	Name    string          `json:"name"`
	Type    any             `json:"type"`
	Default json.RawMessage `json:"default,omitempty"`
	FieldID int             `json:"field-id"`
}

// avroRecordOf maps Iceberg fields to an Avro record the way the table spec
// does: optional fields are ["null", T] unions defaulting to null, every
// field carries its ID as "field-id", nested records are named "r<id>".
// named records the named types already defined, which later uses must
// reference by name.
func avroRecordOf(name string, fields []iceberg.NestedField, named map[string]bool) avroRecordJSON {
	rec := avroRecordJSON{Type: "record", Name: name, Fields: []avroFieldJSON{}}
	for _, f := range fields {
		af := avroFieldJSON{Name: f.Name, Type: avroTypeOf(f.Type, f.ID, named), FieldID: f.ID}
		if !f.Required {
			af.Type = []any{"null", af.Type}
			af.Default = json.RawMessage("null")
		}
		rec.Fields = append(rec.Fields, af)
	}
	return rec
}

func avroTypeOf(t iceberg.Type, id int, named map[string]bool) any {
	switch t := t.(type) {
	case *iceberg.StructType:
		return avroRecordOf(fmt.Sprintf("r%d", id), t.FieldList, named)
	case iceberg.BooleanType:
		return "boolean"
	case iceberg.Int32Type:
		return "int"
	case iceberg.Int64Type:
		return "long"
	case iceberg.Float32Type:
		return "float"
	case iceberg.Float64Type:
		return "double"
	case iceberg.DateType:
		return map[string]any{"type": "int", "logicalType": "date"}
	case iceberg.TimeType:
		return map[string]any{"type": "long", "logicalType": "time-micros"}
	case iceberg.TimestampType:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": false}
	case iceberg.TimestampTzType:
		return map[string]any{"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": true}
	case iceberg.TimestampNsType:
		return map[string]any{"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": false}
	case iceberg.TimestampTzNsType:
		return map[string]any{"type": "long", "logicalType": "timestamp-nanos", "adjust-to-utc": true}
	case iceberg.StringType:
		return "string"
	case iceberg.BinaryType:
		return "bytes"
	case iceberg.UUIDType:
		return avroFixedOf("uuid_fixed", 16, named, "logicalType", "uuid")
	case iceberg.FixedType:
		return avroFixedOf(fmt.Sprintf("fixed_%d", t.Len()), t.Len(), named)
	case iceberg.DecimalType:
		return avroFixedOf(fmt.Sprintf("decimal_%d_%d", t.Precision(), t.Scale()), decimalBytes(t.Precision()), named,
			"logicalType", "decimal", "precision", t.Precision(), "scale", t.Scale())
	}
	// trackingSchema holds primitive types and structs only.
	panic(fmt.Sprintf("format: no Avro type for %s", t))
}

// avroFixedOf defines a named fixed type on first use and references it by
// name afterwards, as Avro requires.
func avroFixedOf(name string, size int, named map[string]bool, props ...any) any {
	if named[name] {
		return name
	}
	named[name] = true
	m := map[string]any{"type": "fixed", "name": name, "size": size}
	for i := 0; i+1 < len(props); i += 2 {
		m[props[i].(string)] = props[i+1]
	}
	return m
}

// decimalSizes[p] is the fewest bytes whose two's complement holds every
// unscaled value of precision p, the size the table spec gives decimal(p, s).
var decimalSizes = func() (sizes [39]int) {
	pow10, limit := big.NewInt(1), new(big.Int)
	for p := range sizes {
		n := 1
		for limit.Lsh(big.NewInt(1), uint(8*n-1)); limit.Cmp(pow10) < 0; limit.Lsh(big.NewInt(1), uint(8*n-1)) {
			n++
		}
		sizes[p] = n
		pow10.Mul(pow10, big.NewInt(10))
	}
	return sizes
}()

func decimalBytes(precision int) int { return decimalSizes[precision] }

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

// derefAvro resolves a named reference to the type it names.
func derefAvro(s avro.Schema) avro.Schema {
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroFieldID reads a field's "field-id" attribute.
func avroFieldID(f *avro.Field) (int, bool) {
	v, ok := f.Prop("field-id").(float64)
	if !ok || v != math.Trunc(v) || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, false
	}
	return int(v), true
}

// avroLogical returns the logicalType attribute of s, known to hamba/avro
// or not.
func avroLogical(s avro.Schema) string {
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		return string(ls.Logical().Type())
	}
	if ps, ok := s.(avro.PropertySchema); ok {
		if v, ok := ps.Prop("logicalType").(string); ok {
			return v
		}
	}
	return ""
}

type avroDecodeFunc func(c *avroCursor) any

// compileAvro builds a decoder that reads values written with schema ws as
// values of Iceberg type t: a struct becomes a map of the fields whose
// field-id t knows, other fields are skipped. ws may be t's type or a union
// of null and it; Avro's promotions of int to long and float to double are
// allowed.
func compileAvro(ws avro.Schema, t iceberg.Type, path string) (avroDecodeFunc, error) {
	ws = derefAvro(ws)
	if u, ok := ws.(*avro.UnionSchema); ok {
		types := u.Types()
		if len(types) != 2 || (types[0].Type() == avro.Null) == (types[1].Type() == avro.Null) {
			return nil, fmt.Errorf("%s: union %s is not an optional %s", path, u, t)
		}
		nullBranch := int64(0)
		if types[1].Type() == avro.Null {
			nullBranch = 1
		}
		inner, err := compileAvro(types[1-nullBranch], t, path)
		if err != nil {
			return nil, err
		}
		return func(c *avroCursor) any {
			switch branch := c.long(); {
			case c.err != nil || branch == nullBranch:
				return nil
			case branch == 1-nullBranch:
				return inner(c)
			default:
				c.fail("%s: union branch %d does not exist", path, branch)
				return nil
			}
		}, nil
	}
	if st, ok := t.(*iceberg.StructType); ok {
		return compileAvroRecord(ws, st, path)
	}
	if err := checkAvroPrimitive(ws, t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return avroPrimitiveDecoder(ws, t), nil
}

func compileAvroRecord(ws avro.Schema, st *iceberg.StructType, path string) (avroDecodeFunc, error) {
	rs, ok := ws.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%s: %s is not a record", path, ws.Type())
	}
	want := map[int]iceberg.NestedField{}
	for _, f := range st.FieldList {
		want[f.ID] = f
	}
	type fieldStep struct {
		id     int
		decode avroDecodeFunc // nil: skip a value of type skip
		skip   avro.Schema
	}
	var steps []fieldStep
	seen := map[int]bool{}
	for _, af := range rs.Fields() {
		id, hasID := avroFieldID(af)
		if hasID && seen[id] {
			return nil, fmt.Errorf("%s: field-id %d appears twice", path, id)
		}
		if hasID {
			seen[id] = true
		}
		f, known := want[id]
		if !hasID || !known {
			steps = append(steps, fieldStep{skip: af.Type()})
			continue
		}
		dec, err := compileAvro(af.Type(), f.Type, fmt.Sprintf("%s.%s (%d)", path, f.Name, id))
		if err != nil {
			return nil, err
		}
		steps = append(steps, fieldStep{id: id, decode: dec})
	}
	return func(c *avroCursor) any {
		m := make(map[int]any, len(steps))
		for _, s := range steps {
			if s.decode == nil {
				skipAvro(c, s.skip, 0)
			} else {
				m[s.id] = s.decode(c)
			}
			if c.err != nil {
				return nil
			}
		}
		return m
	}, nil
}

// checkAvroPrimitive checks that values written with ws can be read as t:
// the same Avro type (or a promotion), the same fixed size, and no
// contradicting logical type.
func checkAvroPrimitive(ws avro.Schema, t iceberg.Type) error {
	kind, logical := ws.Type(), avroLogical(ws)
	logicalIs := func(want string) bool { return logical == "" || logical == want }
	ok := false
	switch t := t.(type) {
	case iceberg.BooleanType:
		ok = kind == avro.Boolean && logical == ""
	case iceberg.Int32Type:
		ok = kind == avro.Int && logical == ""
	case iceberg.Int64Type:
		ok = (kind == avro.Long || kind == avro.Int) && logical == ""
	case iceberg.Float32Type:
		ok = kind == avro.Float && logical == ""
	case iceberg.Float64Type:
		ok = (kind == avro.Double || kind == avro.Float) && logical == ""
	case iceberg.DateType:
		ok = kind == avro.Int && logicalIs("date")
	case iceberg.TimeType:
		ok = kind == avro.Long && logicalIs("time-micros")
	case iceberg.TimestampType, iceberg.TimestampTzType:
		ok = kind == avro.Long && logicalIs("timestamp-micros") && adjustToUTCIs(ws, t.Equals(iceberg.PrimitiveTypes.TimestampTz))
	case iceberg.TimestampNsType, iceberg.TimestampTzNsType:
		ok = kind == avro.Long && logicalIs("timestamp-nanos") && adjustToUTCIs(ws, t.Equals(iceberg.PrimitiveTypes.TimestampTzNs))
	case iceberg.StringType:
		ok = kind == avro.String
	case iceberg.BinaryType:
		ok = kind == avro.Bytes && logical == ""
	case iceberg.UUIDType:
		ok = kind == avro.Fixed && ws.(*avro.FixedSchema).Size() == 16 && logicalIs("uuid")
	case iceberg.FixedType:
		ok = kind == avro.Fixed && ws.(*avro.FixedSchema).Size() == t.Len() && logical == ""
	case iceberg.DecimalType:
		if fs, isFixed := ws.(*avro.FixedSchema); isFixed && fs.Size() <= 16 {
			d, isDecimal := fs.Logical().(*avro.DecimalLogicalSchema)
			ok = isDecimal && d.Precision() == t.Precision() && d.Scale() == t.Scale()
		}
	}
	if !ok {
		return fmt.Errorf("Avro type %s cannot be read as %s", ws, t)
	}
	return nil
}

// adjustToUTCIs reports whether ws's adjust-to-utc attribute, when present,
// says utc.
func adjustToUTCIs(ws avro.Schema, utc bool) bool {
	ps, ok := ws.(avro.PropertySchema)
	if !ok {
		return true
	}
	v, present := ps.Prop("adjust-to-utc").(bool)
	return !present || v == utc
}

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
