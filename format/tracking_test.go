package format

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/iceberg-go"
	"github.com/google/uuid"
	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
)

// The package's tests share one -update flag; whichever test file runs
// first defines it.
func init() {
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite the golden files in testdata")
	}
}

func updateGolden() bool {
	v, _ := flag.Lookup("update").Value.(flag.Getter).Get().(bool)
	return v
}

const trackingGoldenPath = "testdata/tracking_sample.avro"

// testField declares one index field of a test schema.
type testField struct {
	id      int
	typ     iceberg.Type
	kind    FieldKind
	cluster bool
}

func buildIndexSchema(t testing.TB, fields ...testField) *IndexSchema {
	t.Helper()
	md := &Metadata{FormatVersion: 1, Type: TypeScalar}
	var source []iceberg.NestedField
	var clusterIDs []int
	for _, f := range fields {
		switch f.kind {
		case KindIdentity:
			source = append(source, iceberg.NestedField{ID: f.id, Name: fmt.Sprintf("c%d", f.id), Type: f.typ})
			md.IdentityFields = append(md.IdentityFields, f.id)
		case KindMaterialized:
			md.MaterializedFields = append(md.MaterializedFields, ExprField{FieldID: f.id, Type: ExprFieldType, DataType: f.typ, Expr: Ref{ID: FieldIDPos}})
		case KindNonMaterialized:
			md.NonMaterializedFields = append(md.NonMaterializedFields, ExprField{FieldID: f.id, Type: ExprFieldType, DataType: f.typ, Expr: Ref{ID: fields[0].id}})
		}
		if f.cluster {
			clusterIDs = append(clusterIDs, f.id)
		}
	}
	md.ClusterSpec = clusterIDs
	s, err := NewIndexSchema(md, iceberg.NewSchema(0, source...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	negNaN64 = math.Float64frombits(0xfff8000000000001)
	dec38Max = decimal128.GetMaxValue(38)
)

// primitiveSamples gives, for every primitive type, non-null values in
// strictly increasing clustering order.
var primitiveSamples = []struct {
	typ    iceberg.Type
	values []any
}{
	{iceberg.PrimitiveTypes.Bool, []any{false, true}},
	{iceberg.PrimitiveTypes.Int32, []any{int32(math.MinInt32), int32(0), int32(math.MaxInt32)}},
	{iceberg.PrimitiveTypes.Int64, []any{int64(math.MinInt64), int64(-1), int64(math.MaxInt64)}},
	{iceberg.PrimitiveTypes.Float32, []any{float32(math.Inf(-1)), negZero32, float32(0), float32(math.NaN())}},
	{iceberg.PrimitiveTypes.Float64, []any{negNaN64, negZero64, 0.0, 1.5, math.NaN()}},
	{iceberg.DecimalTypeOf(9, 2), []any{decimal128.FromI64(-999999999), decimal128.FromI64(0), decimal128.FromI64(1420)}},
	{iceberg.DecimalTypeOf(38, 10), []any{dec38Max.Negate(), decimal128.FromI64(-1), dec38Max}},
	{iceberg.PrimitiveTypes.Date, []any{int32(-719162), int32(0), int32(17486)}},
	{iceberg.PrimitiveTypes.Time, []any{int64(0), int64(81068000000), int64(86399999999)}},
	{iceberg.PrimitiveTypes.Timestamp, []any{int64(-1), int64(1510871468000001)}},
	{iceberg.PrimitiveTypes.TimestampTz, []any{int64(math.MinInt64), int64(1510871468000000)}},
	{iceberg.PrimitiveTypes.TimestampNs, []any{int64(-5), int64(1510871468000000001)}},
	{iceberg.PrimitiveTypes.TimestampTzNs, []any{int64(0), int64(math.MaxInt64)}},
	{iceberg.PrimitiveTypes.String, []any{"", "a", "iceberg", "é"}},
	{iceberg.PrimitiveTypes.UUID, []any{uuid.UUID{}, uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7"), uuid.Max}},
	{iceberg.FixedTypeOf(3), []any{[]byte{0, 0, 0}, []byte{0, 1, 2}, []byte{255, 255, 255}}},
	{iceberg.PrimitiveTypes.Binary, []any{[]byte{}, []byte{0}, []byte{0, 1, 2, 3}, []byte{255}}},
}

func ptr[T any](v T) *T { return &v }

// sampleStats gives stats with bounds lo and hi and every metric the type keeps.
func sampleStats(typ iceberg.Type, lo, hi any, n int64) *FieldStats {
	st := &FieldStats{LowerBound: lo, UpperBound: hi, TightBounds: ptr(n%2 == 0), ValueCount: ptr(n + 10), NullValueCount: ptr(n)}
	if lo == nil {
		st.TightBounds, st.NullValueCount = nil, ptr(n+10)
	}
	if hasNaN(typ) {
		st.NanValueCount = ptr(n * 3)
	}
	if isVariableLength(typ) {
		st.AvgValueSize = ptr(int32(n + 7))
	}
	return st
}

// typeEntries builds entries for a schema whose field 1 is the only cluster
// field and field 1001 a non-materialized field, both of the type's samples:
// first a file whose cluster values are all null, then one file per sample.
func typeEntries(typ iceberg.Type, values []any) []TrackingEntry {
	entries := []TrackingEntry{{
		FilePath: "s3://warehouse/idx/data/00000.parquet", FileFormat: "parquet", RecordCount: 10, FileSizeInBytes: 4096,
		Stats: map[int]*FieldStats{
			1:    withGroupMax(sampleStats(typ, nil, nil, 0), nil),
			1001: sampleStats(typ, values[0], values[len(values)-1], 1),
		},
		KeyMetadata: []byte{},
	}}
	for i, v := range values {
		e := TrackingEntry{
			FilePath: fmt.Sprintf("s3://warehouse/idx/data/%05d.parquet", i+1), FileFormat: "parquet",
			RecordCount: int64(100 * (i + 1)), FileSizeInBytes: int64(1 << (10 + i)),
			Stats: map[int]*FieldStats{
				1:    withGroupMax(sampleStats(typ, values[0], v, int64(i)), v),
				1001: sampleStats(typ, v, v, int64(i+2)),
			},
		}
		if i%2 == 1 {
			e.KeyMetadata = []byte{0xca, 0xfe, byte(i)}
		}
		entries = append(entries, e)
	}
	return entries
}

func withGroupMax(st *FieldStats, v any) *FieldStats {
	st.GroupMax, st.HasGroupMax = v, true
	return st
}

func typeSchema(t testing.TB, typ iceberg.Type) *IndexSchema {
	return buildIndexSchema(t,
		testField{id: 1, typ: typ, kind: KindIdentity, cluster: true},
		testField{id: 2000, typ: iceberg.PrimitiveTypes.Int64, kind: KindMaterialized},
		testField{id: 1001, typ: typ, kind: KindNonMaterialized},
	)
}

// diffEntries describes how got differs from want, comparing values by the
// clustering order so that -0.0, 0.0 and NaNs are told apart.
func diffEntries(s *IndexSchema, got, want []TrackingEntry) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d entries, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.FilePath != w.FilePath || g.FileFormat != w.FileFormat || g.RecordCount != w.RecordCount || g.FileSizeInBytes != w.FileSizeInBytes {
			return fmt.Sprintf("entry %d: %+v, want %+v", i, g, w)
		}
		if (g.KeyMetadata == nil) != (w.KeyMetadata == nil) || !bytes.Equal(g.KeyMetadata, w.KeyMetadata) {
			return fmt.Sprintf("entry %d: key_metadata %#v, want %#v", i, g.KeyMetadata, w.KeyMetadata)
		}
		if len(g.Stats) != len(w.Stats) {
			return fmt.Sprintf("entry %d: stats of %d fields, want %d", i, len(g.Stats), len(w.Stats))
		}
		for id, ws := range w.Stats {
			gs := g.Stats[id]
			f, _ := s.Field(id)
			if gs == nil {
				return fmt.Sprintf("entry %d field %d: no stats", i, id)
			}
			if d := diffFieldStats(f.Type, gs, ws); d != "" {
				return fmt.Sprintf("entry %d field %d: %s", i, id, d)
			}
		}
	}
	return ""
}

func diffFieldStats(typ iceberg.Type, g, w *FieldStats) string {
	for _, v := range []struct {
		name      string
		got, want any
	}{{"lower_bound", g.LowerBound, w.LowerBound}, {"upper_bound", g.UpperBound, w.UpperBound}, {"group_max_value", g.GroupMax, w.GroupMax}} {
		if err := CheckValue(typ, v.got); err != nil {
			return fmt.Sprintf("%s: %v", v.name, err)
		}
		if Compare(typ, v.got, v.want) != 0 {
			return fmt.Sprintf("%s %s, want %s", v.name, FormatValue(typ, v.got), FormatValue(typ, v.want))
		}
	}
	if g.HasGroupMax != w.HasGroupMax {
		return fmt.Sprintf("HasGroupMax %v, want %v", g.HasGroupMax, w.HasGroupMax)
	}
	same := func(a, b any) bool { return fmt.Sprint(a) == fmt.Sprint(b) }
	for _, m := range []struct {
		name      string
		got, want any
	}{
		{"tight_bounds", optional(g.TightBounds), optional(w.TightBounds)},
		{"value_count", optional(g.ValueCount), optional(w.ValueCount)},
		{"null_value_count", optional(g.NullValueCount), optional(w.NullValueCount)},
		{"nan_value_count", optional(g.NanValueCount), optional(w.NanValueCount)},
		{"avg_value_size_in_bytes", optional(g.AvgValueSize), optional(w.AvgValueSize)},
	} {
		if !same(m.got, m.want) {
			return fmt.Sprintf("%s %v, want %v", m.name, m.got, m.want)
		}
	}
	return ""
}

// trackingEntries keeps only the entries of what ReadTrackingFile returns.
func trackingEntries(tf *TrackingFile, err error) ([]TrackingEntry, error) {
	if err != nil {
		return nil, err
	}
	return tf.Entries, nil
}

func writeTracking(t testing.TB, s *IndexSchema, entries []TrackingEntry, opts TrackingWriteOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteTrackingFile(&buf, s, entries, opts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestTrackingRoundTripEveryType(t *testing.T) {
	for _, sample := range primitiveSamples {
		for _, codec := range []string{"", codecNull} {
			t.Run(fmt.Sprintf("%s/%s", sample.typ, codec), func(t *testing.T) {
				s := typeSchema(t, sample.typ)
				entries := typeEntries(sample.typ, sample.values)
				data := writeTracking(t, s, entries, TrackingWriteOptions{Codec: codec})
				got, err := trackingEntries(ReadTrackingFile(bytes.NewReader(data), "round-trip.avro", s))
				if err != nil {
					t.Fatal(err)
				}
				if d := diffEntries(s, got, entries); d != "" {
					t.Error(d)
				}
			})
		}
	}
}

func TestTrackingRoundTripEmpty(t *testing.T) {
	s := typeSchema(t, iceberg.PrimitiveTypes.Int64)
	data := writeTracking(t, s, nil, TrackingWriteOptions{})
	got, err := trackingEntries(ReadTrackingFile(bytes.NewReader(data), "empty.avro", s))
	if err != nil || len(got) != 0 {
		t.Fatalf("got %d entries, %v; want none", len(got), err)
	}
}

func TestTrackingManyBlocks(t *testing.T) {
	s := typeSchema(t, iceberg.PrimitiveTypes.String)
	var entries []TrackingEntry
	pad := strings.Repeat("x", 4000)
	for i := range 600 {
		v := fmt.Sprintf("key-%06d-%s", i, pad)
		entries = append(entries, TrackingEntry{
			FilePath: fmt.Sprintf("file-%d.parquet", i), FileFormat: "parquet", RecordCount: 1, FileSizeInBytes: 1,
			Stats: map[int]*FieldStats{1: withGroupMax(sampleStats(iceberg.PrimitiveTypes.String, v, v, 1), v),
				1001: sampleStats(iceberg.PrimitiveTypes.String, nil, nil, 1)},
		})
	}
	data := writeTracking(t, s, entries, TrackingWriteOptions{Codec: codecNull})
	if blocks := countBlocks(t, data); blocks < 2 {
		t.Fatalf("%d blocks; the test needs entries spread over several", blocks)
	}
	got, err := trackingEntries(ReadTrackingFile(bytes.NewReader(data), "many.avro", s))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffEntries(s, got, entries); d != "" {
		t.Error(d)
	}
}

// parsedHeader is a tracking file's header, parsed by the test itself.
type parsedHeader struct {
	meta map[string]string
	end  int // offset of the first data block
}

func parseHeader(t testing.TB, data []byte) parsedHeader {
	t.Helper()
	if !bytes.HasPrefix(data, []byte("Obj\x01")) {
		t.Fatalf("no Avro magic: % x", data[:min(4, len(data))])
	}
	pos := 4
	long := func() int64 {
		v, n := binary.Varint(data[pos:])
		if n <= 0 {
			t.Fatalf("bad varint at %d", pos)
		}
		pos += n
		return v
	}
	str := func() string {
		n := int(long())
		s := string(data[pos : pos+n])
		pos += n
		return s
	}
	h := parsedHeader{meta: map[string]string{}}
	for n := long(); n != 0; n = long() {
		for range n {
			k := str()
			h.meta[k] = str()
		}
	}
	h.end = pos + 16
	return h
}

func countBlocks(t testing.TB, data []byte) int {
	pos := parseHeader(t, data).end
	blocks := 0
	for pos < len(data) {
		_, n := binary.Varint(data[pos:])
		pos += n
		size, n := binary.Varint(data[pos:])
		pos += n + int(size) + 16
		blocks++
	}
	return blocks
}

// collectFieldIDs walks an Avro schema in JSON and records every record
// field's field-id, failing on a field without one.
func collectFieldIDs(t *testing.T, node any, ids map[int]bool, named map[string]map[string]any) {
	switch n := node.(type) {
	case []any:
		for _, b := range n {
			collectFieldIDs(t, b, ids, named)
		}
	case map[string]any:
		if name, ok := n["name"].(string); ok {
			named[name] = n
		}
		if n["type"] != "record" {
			return
		}
		for _, f := range n["fields"].([]any) {
			fm := f.(map[string]any)
			id, ok := fm["field-id"].(float64)
			if !ok {
				t.Errorf("field %q of record %q has no field-id: %v", fm["name"], n["name"], fm)
				continue
			}
			if ids[int(id)] {
				t.Errorf("field-id %v appears twice", id)
			}
			ids[int(id)] = true
			collectFieldIDs(t, fm["type"], ids, named)
		}
	}
}

func TestTrackingHeaderNamesItsSnapshot(t *testing.T) {
	s := goldenSchema(t)
	data := writeTracking(t, s, goldenEntries(), TrackingWriteOptions{IndexUUID: "3b5c6e2a", SnapshotID: 7301})
	if got := parseHeader(t, data).meta["snapshot-id"]; got != "7301" {
		t.Errorf("header snapshot-id = %q, want 7301", got)
	}
	tf, err := ReadTrackingFile(bytes.NewReader(data), "named.avro", s)
	if err != nil || tf.IndexUUID != "3b5c6e2a" || tf.SnapshotID != 7301 || len(tf.Entries) != len(goldenEntries()) {
		t.Fatalf("read %+v, %v; want index 3b5c6e2a, snapshot 7301", tf, err)
	}
	// A file that does not say (written before the key existed) reads with
	// neither.
	tf, err = ReadTrackingFile(bytes.NewReader(writeTracking(t, s, goldenEntries(), TrackingWriteOptions{})), "anonymous.avro", s)
	if err != nil || tf.IndexUUID != "" || tf.SnapshotID != 0 {
		t.Fatalf("read %+v, %v; want no index and no snapshot", tf, err)
	}
	bad := bytes.Replace(data, []byte("7301"), []byte("73x1"), 1)
	_, err = ReadTrackingFile(bytes.NewReader(bad), "bad-id.avro", s)
	if path, ok := CorruptPath(err); !IsCorruption(err) || !ok || path != "bad-id.avro" || !strings.Contains(err.Error(), "snapshot-id") {
		t.Errorf("a snapshot-id that is no number: %v, want a corruption naming the file and the key", err)
	}
	if err := WriteTrackingFile(io.Discard, s, nil, TrackingWriteOptions{SnapshotID: -1}); err == nil {
		t.Error("a negative snapshot id was written")
	}
}

func TestTrackingHeaderKeepsFieldIDs(t *testing.T) {
	s := goldenSchema(t)
	data := writeTracking(t, s, goldenEntries(), TrackingWriteOptions{IndexUUID: "3b5c6e2a-8f7d-4c1e-9a0b-1d2e3f405162"})
	h := parseHeader(t, data)
	for key, want := range map[string]string{"format-version": "1", "content": "index-tracking",
		"index-uuid": "3b5c6e2a-8f7d-4c1e-9a0b-1d2e3f405162", "avro.codec": "deflate"} {
		if h.meta[key] != want {
			t.Errorf("header %s = %q, want %q", key, h.meta[key], want)
		}
	}
	var root map[string]any
	if err := json.Unmarshal([]byte(h.meta["avro.schema"]), &root); err != nil {
		t.Fatal(err)
	}
	if root["name"] != "tracking_entry" {
		t.Errorf("record name %v", root["name"])
	}
	ids, named := map[int]bool{}, map[string]map[string]any{}
	collectFieldIDs(t, root, ids, named)

	want := map[int]bool{100: true, 101: true, 103: true, 104: true, 146: true, 131: true}
	for _, f := range s.Fields() {
		if !IsPrimitive(f.Type) {
			continue
		}
		base := StatsBaseID(f.ID)
		want[base] = true
		for _, m := range trackingStatsMetrics(f, s.IsCluster(f.ID)) {
			want[base+m.offset] = true
		}
	}
	if fmt.Sprint(sortedIDs(ids)) != fmt.Sprint(sortedIDs(want)) {
		t.Errorf("field-ids in avro.schema:\n%v\nwant\n%v", sortedIDs(ids), sortedIDs(want))
	}
	// The Iceberg types' Avro annotations survive too.
	if r := named["r10400"]; r == nil {
		t.Error("no record r10400 for the stats of field 2")
	}
	if !strings.Contains(h.meta["avro.schema"], `"adjust-to-utc":true,"logicalType":"timestamp-micros"`) {
		t.Error("timestamptz lost adjust-to-utc")
	}
	if d := named["decimal_12_2"]; d == nil || d["size"] != 6.0 || d["precision"] != 12.0 || d["scale"] != 2.0 || d["logicalType"] != "decimal" {
		t.Errorf("decimal(12, 2) as %v", d)
	}
	if u := named["uuid_fixed"]; u == nil || u["size"] != 16.0 || u["logicalType"] != "uuid" {
		t.Errorf("uuid as %v", u)
	}

	var sc iceberg.Schema
	if err := json.Unmarshal([]byte(h.meta["schema"]), &sc); err != nil {
		t.Fatalf("header schema is not an Iceberg schema: %v", err)
	}
	iceIDs := map[int]bool{}
	for _, f := range []iceberg.NestedField(sc.Fields()) {
		iceIDs[f.ID] = true
		if st, ok := f.Type.(*iceberg.StructType); ok {
			for _, sf := range st.FieldList {
				iceIDs[sf.ID] = true
				for _, mf := range sf.Type.(*iceberg.StructType).FieldList {
					iceIDs[mf.ID] = true
				}
			}
		}
	}
	if fmt.Sprint(sortedIDs(iceIDs)) != fmt.Sprint(sortedIDs(want)) {
		t.Errorf("field IDs in the Iceberg schema:\n%v\nwant\n%v", sortedIDs(iceIDs), sortedIDs(want))
	}
}

func sortedIDs(m map[int]bool) []int {
	var out []int
	for id := range m {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

// badEntryCases are entries the writer refuses. reader marks the cases that
// the unchecked encoder can still write, so that the reader must refuse them too.
func badEntryCases() []struct {
	name    string
	edit    func(es []TrackingEntry) []TrackingEntry
	message string
	reader  bool
} {
	str := iceberg.PrimitiveTypes.String
	return []struct {
		name    string
		edit    func(es []TrackingEntry) []TrackingEntry
		message string
		reader  bool
	}{
		{"descending group max", func(es []TrackingEntry) []TrackingEntry {
			es[2], es[3] = es[3], es[2]
			return es
		}, "is not above key", true},
		{"equal group max", func(es []TrackingEntry) []TrackingEntry {
			es[3].Stats[1] = withGroupMax(sampleStats(str, "", "a", 1), "a")
			return es
		}, "group_max_value key (a) is not above key (a)", true},
		{"null group max after a value", func(es []TrackingEntry) []TrackingEntry {
			return []TrackingEntry{es[1], es[0]}
		}, "group_max_value key (null) is not above key ()", true},
		{"cluster stats missing", func(es []TrackingEntry) []TrackingEntry {
			delete(es[1].Stats, 1)
			return es
		}, "stats struct is required for a cluster field", true},
		{"non-materialized stats missing", func(es []TrackingEntry) []TrackingEntry {
			delete(es[2].Stats, 1001)
			return es
		}, "stats struct is required for a non-materialized field", true},
		{"half bounds", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[1001].UpperBound = nil
			return es
		}, "both set or both null", true},
		{"lower above upper", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[1001].LowerBound = "z"
			return es
		}, "is above upper_bound", true},
		{"empty file path", func(es []TrackingEntry) []TrackingEntry {
			es[0].FilePath = ""
			return es
		}, "file_path is empty", true},
		{"negative record count", func(es []TrackingEntry) []TrackingEntry {
			es[0].RecordCount = -1
			return es
		}, "record_count -1 is negative", true},
		{"string bound not UTF-8", func(es []TrackingEntry) []TrackingEntry {
			es[4].Stats[1001].UpperBound = "\xff"
			return es
		}, "not UTF-8", true},
		{"group max missing", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[1].HasGroupMax, es[1].Stats[1].GroupMax = false, nil
			return es
		}, "group_max_value is required for a cluster field", false},
		{"group max on a non-cluster field", func(es []TrackingEntry) []TrackingEntry {
			withGroupMax(es[1].Stats[1001], "a")
			return es
		}, "kept only for cluster fields", false},
		{"nan count on a string", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[1001].NanValueCount = ptr(int64(1))
			return es
		}, "nan_value_count is not kept for type string", false},
		{"stats of an unknown field", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[77] = &FieldStats{}
			return es
		}, "stats for field 77", false},
		{"value of the wrong type", func(es []TrackingEntry) []TrackingEntry {
			es[1].Stats[1001].LowerBound = int64(1)
			return es
		}, "is not a string", false},
	}
}

func TestTrackingWriterRefusesBadEntries(t *testing.T) {
	str := iceberg.PrimitiveTypes.String
	s := typeSchema(t, str)
	for _, c := range badEntryCases() {
		t.Run(c.name, func(t *testing.T) {
			entries := c.edit(typeEntries(str, []any{"", "a", "iceberg", "é"}))
			var buf bytes.Buffer
			err := WriteTrackingFile(&buf, s, entries, TrackingWriteOptions{})
			if err == nil || !strings.Contains(err.Error(), c.message) {
				t.Fatalf("error %v, want one containing %q", err, c.message)
			}
			if buf.Len() != 0 {
				t.Errorf("the writer wrote %d bytes before refusing", buf.Len())
			}
		})
	}
}

func TestTrackingReaderRefusesBadEntries(t *testing.T) {
	str := iceberg.PrimitiveTypes.String
	s := typeSchema(t, str)
	const name = "s3://warehouse/idx/metadata/tracking-bad.avro"
	for _, c := range badEntryCases() {
		if !c.reader {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			entries := c.edit(typeEntries(str, []any{"", "a", "iceberg", "é"}))
			var buf bytes.Buffer
			if err := writeTrackingEntries(&buf, s, entries, TrackingWriteOptions{Codec: codecDeflate}); err != nil {
				t.Fatal(err)
			}
			_, err := trackingEntries(ReadTrackingFile(&buf, name, s))
			var ce *CorruptFileError
			if !errors.As(err, &ce) || ce.Path != name || !IsCorruption(err) {
				t.Fatalf("error %v (%T), want a *CorruptFileError for %s", err, err, name)
			}
			if !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), c.message) {
				t.Errorf("error %q should name the file and say %q", err, c.message)
			}
		})
	}
}

func TestTrackingWriterRefusesUnknownCodec(t *testing.T) {
	s := typeSchema(t, iceberg.PrimitiveTypes.Int64)
	var buf bytes.Buffer
	if err := WriteTrackingFile(&buf, s, nil, TrackingWriteOptions{Codec: "snappy"}); err == nil || buf.Len() != 0 {
		t.Fatalf("codec snappy: error %v after %d bytes, want a refusal", err, buf.Len())
	}
}

func TestTrackingGarbageIsCorrupt(t *testing.T) {
	// A small schema keeps the test quick: it reads every truncation.
	i64 := iceberg.PrimitiveTypes.Int64
	s := typeSchema(t, i64)
	good := writeTracking(t, s, typeEntries(i64, []any{int64(-1), int64(0), int64(1)}), TrackingWriteOptions{Codec: codecNull})
	headerEnd := parseHeader(t, good).end
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 0xff // the block's sync marker
	badCodec := bytes.Replace(bytes.Clone(good), []byte("\x08null"), []byte("\x08zstd"), 1)
	cases := map[string][]byte{
		"empty":             nil,
		"text":              []byte("this is not an avro file"),
		"magic only":        []byte("Obj\x01"),
		"sync marker":       flipped,
		"unknown codec":     badCodec,
		"trailing garbage":  append(bytes.Clone(good), 0x02),
		"huge block size":   append(bytes.Clone(good[:headerEnd]), binary.AppendVarint(binary.AppendVarint(nil, 1), 1<<40)...),
		"huge record count": append(bytes.Clone(good[:headerEnd]), binary.AppendVarint(binary.AppendVarint(nil, 1<<40), 4)...),
		"negative count":    append(bytes.Clone(good[:headerEnd]), binary.AppendVarint(binary.AppendVarint(nil, -1), 4)...),
	}
	for n := range len(good) {
		if n != headerEnd { // a file cut after its header is a valid empty file
			cases[fmt.Sprintf("truncated to %d", n)] = good[:n]
		}
	}
	for name, data := range cases {
		entries, err := trackingEntries(ReadTrackingFile(bytes.NewReader(data), "garbage.avro", s))
		var ce *CorruptFileError
		if !errors.As(err, &ce) || ce.Path != "garbage.avro" {
			t.Errorf("%s: %d entries, error %v; want a *CorruptFileError", name, len(entries), err)
		}
	}
	if got, err := trackingEntries(ReadTrackingFile(bytes.NewReader(good[:headerEnd]), "header-only.avro", s)); err != nil || len(got) != 0 {
		t.Errorf("header only: %d entries, %v", len(got), err)
	}
}

func TestTrackingReadErrorIsNotCorruption(t *testing.T) {
	s := goldenSchema(t)
	good := writeTracking(t, s, goldenEntries(), TrackingWriteOptions{})
	failure := errors.New("connection reset")
	r := io.MultiReader(bytes.NewReader(good[:len(good)/2]), iotest.ErrReader(failure))
	_, err := trackingEntries(ReadTrackingFile(r, "flaky.avro", s))
	var ce *CorruptFileError
	if !errors.Is(err, failure) || errors.As(err, &ce) || !strings.Contains(err.Error(), "flaky.avro") {
		t.Fatalf("error %v, want the read failure, naming the file, not corruption", err)
	}
}

// TestTrackingReadsOtherWriters writes a tracking file with hamba/avro under
// a schema that renames, reorders and adds fields, leaves key_metadata out
// and puts null second in unions: the reader must match by field-id alone.
func TestTrackingReadsOtherWriters(t *testing.T) {
	s := buildIndexSchema(t,
		testField{id: 1, typ: iceberg.PrimitiveTypes.Int64, kind: KindIdentity, cluster: true},
		testField{id: 2, typ: iceberg.PrimitiveTypes.String, kind: KindIdentity},
		testField{id: 1001, typ: iceberg.PrimitiveTypes.Float64, kind: KindNonMaterialized},
	)
	schema := `{"type": "record", "name": "whatever", "namespace": "other.writer", "fields": [
	  {"name": "extra_map", "type": {"type": "map", "values": "long"}, "field-id": 900},
	  {"name": "stats", "field-id": 146, "type": {"type": "record", "name": "S", "fields": [
	    {"name": "unknown_struct", "field-id": 99999, "type": ["null", {"type": "record", "name": "U", "fields": [
	      {"name": "xs", "type": {"type": "array", "items": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}}]}]},
	    {"name": "one", "field-id": 10200, "type": ["null", {"type": "record", "name": "One", "fields": [
	      {"name": "gm", "field-id": 10208, "type": ["long", "null"]},
	      {"name": "future_metric", "field-id": 10250, "type": "string"},
	      {"name": "hi", "field-id": 10202, "type": ["null", "int"]},
	      {"name": "lo", "field-id": 10201, "type": ["null", "int"]}]}]},
	    {"name": "nm", "field-id": 210200, "type": {"type": "record", "name": "NM", "fields": [
	      {"name": "nans", "field-id": 210206, "type": "long"},
	      {"name": "lo", "field-id": 210201, "type": "float"},
	      {"name": "hi", "field-id": 210202, "type": "double"}]}}]}},
	  {"name": "size", "field-id": 104, "type": "int"},
	  {"name": "count", "field-id": 103, "type": "long"},
	  {"name": "format", "field-id": 101, "type": "string"},
	  {"name": "path", "field-id": 100, "type": "string"}]}`
	var buf bytes.Buffer
	enc, err := ocf.NewEncoder(schema, &buf, ocf.WithSchemaMarshaler(ocf.FullSchemaMarshaler), ocf.WithEncoderSchemaCache(&avro.SchemaCache{}))
	if err != nil {
		t.Fatal(err)
	}
	records := []map[string]any{
		{"extra_map": map[string]any{"k": int64(1)}, "size": 10, "count": int64(3), "format": "parquet", "path": "a.parquet",
			"stats": map[string]any{"unknown_struct": map[string]any{"other.writer.U": map[string]any{"xs": []any{"A", "B"}}},
				"one": map[string]any{"other.writer.One": map[string]any{"gm": nil, "future_metric": "?", "hi": nil, "lo": nil}},
				"nm":  map[string]any{"nans": int64(2), "lo": float32(-1.5), "hi": 2.25}}},
		{"extra_map": map[string]any{}, "size": 20, "count": int64(4), "format": "parquet", "path": "b.parquet",
			"stats": map[string]any{"unknown_struct": nil,
				"one": map[string]any{"other.writer.One": map[string]any{"gm": int64(42), "future_metric": "", "hi": 42, "lo": -7}},
				"nm":  map[string]any{"nans": int64(0), "lo": float32(0), "hi": 0.0}}},
	}
	for _, r := range records {
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := trackingEntries(ReadTrackingFile(&buf, "other-writer.avro", s))
	if err != nil {
		t.Fatal(err)
	}
	want := []TrackingEntry{
		{FilePath: "a.parquet", FileFormat: "parquet", RecordCount: 3, FileSizeInBytes: 10, Stats: map[int]*FieldStats{
			1:    {GroupMax: nil, HasGroupMax: true},
			1001: {LowerBound: -1.5, UpperBound: 2.25, NanValueCount: ptr(int64(2))}}},
		{FilePath: "b.parquet", FileFormat: "parquet", RecordCount: 4, FileSizeInBytes: 20, Stats: map[int]*FieldStats{
			1:    {LowerBound: int64(-7), UpperBound: int64(42), GroupMax: int64(42), HasGroupMax: true},
			1001: {LowerBound: 0.0, UpperBound: 0.0, NanValueCount: ptr(int64(0))}}},
	}
	if d := diffEntries(s, got, want); d != "" {
		t.Error(d)
	}
}

// TestTrackingReadableByHamba reads a written file with hamba/avro's own
// container reader, a second implementation of the format.
func TestTrackingReadableByHamba(t *testing.T) {
	s := goldenSchema(t)
	entries := goldenEntries()
	data := writeTracking(t, s, entries, TrackingWriteOptions{})
	dec, err := ocf.NewDecoder(bytes.NewReader(data), ocf.WithDecoderSchemaCache(&avro.SchemaCache{}))
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	var lastStats map[string]any
	for dec.HasNext() {
		var rec map[string]any
		if err := dec.Decode(&rec); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, rec["file_path"].(string))
		lastStats = rec["content_stats"].(map[string]any)
	}
	if err := dec.Error(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		want = append(want, e.FilePath)
	}
	if fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Errorf("hamba read paths %v, want %v", paths, want)
	}
	// The last entry's customer_id group max, field 2 (stats 10400).
	// Unions come back wrapped in the name of their branch.
	stats := lastStats["field_2"].(map[string]any)["r10400"].(map[string]any)
	if gm := stats["group_max_value"]; gm != "zoe" {
		t.Errorf("hamba read group_max_value %#v", gm)
	}
}

// goldenSchema is the index behind testdata/tracking_sample.avro: clustered
// by bucket (non-materialized), customer_id, order_ts, amount; identity
// fields of several types; _pos materialized.
func goldenSchema(t testing.TB) *IndexSchema {
	return buildIndexSchema(t,
		testField{id: 1, typ: iceberg.PrimitiveTypes.Int64, kind: KindIdentity},
		testField{id: 2, typ: iceberg.PrimitiveTypes.String, kind: KindIdentity, cluster: true},
		testField{id: 3, typ: iceberg.PrimitiveTypes.TimestampTz, kind: KindIdentity, cluster: true},
		testField{id: 4, typ: iceberg.DecimalTypeOf(12, 2), kind: KindIdentity, cluster: true},
		testField{id: 5, typ: iceberg.PrimitiveTypes.UUID, kind: KindIdentity},
		testField{id: 6, typ: iceberg.PrimitiveTypes.Float64, kind: KindIdentity},
		testField{id: 2000, typ: iceberg.PrimitiveTypes.Int64, kind: KindMaterialized},
		testField{id: 1001, typ: iceberg.PrimitiveTypes.Int32, kind: KindNonMaterialized},
		testField{id: 1002, typ: iceberg.PrimitiveTypes.Date, kind: KindNonMaterialized},
		testField{id: 1003, typ: iceberg.PrimitiveTypes.Binary, kind: KindNonMaterialized},
		testField{id: 1004, typ: iceberg.FixedTypeOf(4), kind: KindNonMaterialized},
		testField{id: 1005, typ: iceberg.PrimitiveTypes.Float32, kind: KindNonMaterialized},
		testField{id: 1006, typ: iceberg.PrimitiveTypes.Bool, kind: KindNonMaterialized},
		testField{id: 1007, typ: iceberg.PrimitiveTypes.TimestampNs, kind: KindNonMaterialized},
	)
}

func goldenEntries() []TrackingEntry {
	str, ts, dec := iceberg.PrimitiveTypes.String, iceberg.PrimitiveTypes.TimestampTz, iceberg.DecimalTypeOf(12, 2)
	i32, date, bin, fix := iceberg.PrimitiveTypes.Int32, iceberg.PrimitiveTypes.Date, iceberg.PrimitiveTypes.Binary, iceberg.FixedTypeOf(4)
	f32, f64, b, tsns := iceberg.PrimitiveTypes.Float32, iceberg.PrimitiveTypes.Float64, iceberg.PrimitiveTypes.Bool, iceberg.PrimitiveTypes.TimestampNs
	u := uuid.MustParse("f79c3e09-677c-4bbd-a479-3f349cb785e7")
	nonMat := func(n int64) map[int]*FieldStats {
		return map[int]*FieldStats{
			1001: sampleStats(i32, int32(0), int32(15), n),
			1002: sampleStats(date, int32(17486), int32(17500+n), n),
			1003: sampleStats(bin, []byte{0}, []byte{0xff, byte(n)}, n),
			1004: sampleStats(fix, []byte{0, 1, 2, 3}, []byte{9, 9, 9, byte(n)}, n),
			1005: sampleStats(f32, negZero32, float32(n), n),
			1006: sampleStats(b, false, true, n),
			1007: sampleStats(tsns, int64(-1), int64(1510871468000000001), n),
		}
	}
	entries := []TrackingEntry{
		{FilePath: "s3://warehouse/sales/orders/indexes/by_customer/data/00000-a.parquet", FileFormat: "parquet",
			RecordCount: 12, FileSizeInBytes: 2048, Stats: nonMat(0)},
		{FilePath: "s3://warehouse/sales/orders/indexes/by_customer/data/00001-b.parquet", FileFormat: "parquet",
			RecordCount: 5000, FileSizeInBytes: 81920, Stats: nonMat(1), KeyMetadata: []byte("wrapped-key-1")},
		{FilePath: "s3://warehouse/sales/orders/indexes/by_customer/data/00002-c.parquet", FileFormat: "parquet",
			RecordCount: 4999, FileSizeInBytes: 80000, Stats: nonMat(2)},
	}
	// File 0: customer_id null throughout, its last key (null, null, null).
	entries[0].Stats[2] = withGroupMax(sampleStats(str, nil, nil, 0), nil)
	entries[0].Stats[3] = withGroupMax(sampleStats(ts, int64(1510871468000000), int64(1510871468000000), 0), nil)
	entries[0].Stats[4] = withGroupMax(sampleStats(dec, nil, nil, 0), nil)
	entries[0].Stats[6] = sampleStats(f64, negZero64, 0.0, 0)
	// File 1: last key ("alice", 2017-11-16T22:31:08Z, null).
	entries[1].Stats[2] = withGroupMax(sampleStats(str, "aaron", "alice", 1), "alice")
	entries[1].Stats[3] = withGroupMax(sampleStats(ts, int64(0), int64(1510871468000000), 1), int64(1510871468000000))
	entries[1].Stats[4] = withGroupMax(sampleStats(dec, decimal128.FromI64(-1420), decimal128.FromI64(1420), 1), nil)
	entries[1].Stats[5] = sampleStats(iceberg.PrimitiveTypes.UUID, u, u, 1)
	// File 2: last key ("zoe", 2017-11-16T22:31:08.000001Z, 14.20).
	entries[2].Stats[2] = withGroupMax(sampleStats(str, "bob", "zoe", 2), "zoe")
	entries[2].Stats[3] = withGroupMax(sampleStats(ts, int64(-1), int64(1510871468000001), 2), int64(1510871468000001))
	entries[2].Stats[4] = withGroupMax(sampleStats(dec, decimal128.FromI64(1), decimal128.FromI64(99999999999), 2), decimal128.FromI64(1420))
	entries[2].Stats[6] = sampleStats(f64, math.Inf(-1), 1e300, 2)
	entries[2].Stats[1] = sampleStats(iceberg.PrimitiveTypes.Int64, int64(math.MinInt64), int64(math.MaxInt64), 2)
	return entries
}

func TestTrackingGolden(t *testing.T) {
	s := goldenSchema(t)
	entries := goldenEntries()
	written := writeTracking(t, s, entries, TrackingWriteOptions{IndexUUID: "3b5c6e2a-8f7d-4c1e-9a0b-1d2e3f405162"})
	if updateGolden() {
		if err := os.WriteFile(trackingGoldenPath, written, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(trackingGoldenPath)
	if err != nil {
		t.Fatal(err)
	}
	got, err := trackingEntries(ReadTrackingFile(bytes.NewReader(golden), trackingGoldenPath, s))
	if err != nil {
		t.Fatal(err)
	}
	if d := diffEntries(s, got, entries); d != "" {
		t.Errorf("%s: %s", trackingGoldenPath, d)
	}
	if !bytes.Equal(written, golden) {
		t.Errorf("writing the sample gives %d bytes that differ from %s; run go test -run TestTrackingGolden -update if the change is intended", len(written), trackingGoldenPath)
	}
}
